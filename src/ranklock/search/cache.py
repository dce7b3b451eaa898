"""The result cache: repeated searches of an immutable snapshot, answered from storage.

An entry is keyed by (query fingerprint, filter, as_of, k, mode, snapshot id,
parameters).  The parameters are the bound values of the search statement
(the query vector aside, which the fingerprint and embedder checksum pin),
the explicit and default search settings, and the sha256 of the statement
text together with the package version, so a code change that alters the
SQL or its post-processing can never be answered by an entry it did not write.

An entry stores ids, ranks and scores (the result JSON without hit texts);
texts are rehydrated from the snapshot's chunk table.  A snapshot is never
modified, so an entry stays valid for the snapshot's life, and dropping the
snapshot drops its entries (foreign key, ON DELETE CASCADE).

The cached result serialises (``to_json``) to exactly the bytes of a fresh
one: the payload is kept as JSON text, because jsonb would reorder keys.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import TYPE_CHECKING, Any, Protocol

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..snapshot.manifest import UNCHANGED_SNAPSHOT
from ..snapshot.segments import Layout, chunks_sql, live_sql
from ..store.steps import Fetch, Steps

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..settings import Settings
    from ..store.database import Database
    from .results import SearchResult

__all__ = ["CachedSearch", "cache_key", "clear", "lookup_steps", "store_steps"]


class CachedSearch(Protocol):
    """What the cache reads of a search (ranklock.search.log.SearchRecord is one)."""

    @property
    def coll(self) -> CollectionInfo: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def snapshot_id(self) -> int: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def request(self) -> dict[str, Any]: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def sql_query(self) -> sql.Composable: ...
    @property
    def sql_params(self) -> dict[str, Any]: ...


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def cache_key(rec: CachedSearch) -> tuple[str, dict[str, Any]]:
    """The cache key of a search: (sha256 of the canonical key, the key)."""
    from .._version import __version__
    from ..store.timeout import effective_timeout

    bound = {k: v for k, v in rec.sql_params.items() if k != "qvec"}
    key: dict[str, Any] = {
        "fingerprint": rec.fingerprint,
        "filter": rec.request.get("filter"),
        "as_of": rec.request.get("as_of"),
        "k": rec.request.get("k"),
        "mode": rec.request.get("mode"),
        "snapshot_id": rec.snapshot_id,
        "parameters": {
            "explicit": rec.request.get("params", {}),
            "collection_defaults": rec.coll.search_defaults,
            "bound": json.loads(_canonical(bound)),
            # Echoed in the result's params, so an entry serves only the timeout it was made under.
            "statement_timeout_s": effective_timeout(rec.settings.statement_timeout),
        },
        "embedder_sha256": rec.coll.embedder_sha256,
        "sql_sha256": hashlib.sha256(rec.sql_query.as_string(None).encode("utf-8")).hexdigest(),
        "version": __version__,
    }
    return hashlib.sha256(_canonical(key).encode("utf-8")).hexdigest(), key


def lookup_steps(
    rec: CachedSearch, key_hash: str
) -> Steps[tuple[SearchResult, dict[str, list[list[Any]]] | None] | None]:
    """The cached result with its texts rehydrated, and the branch candidates if stored; on the primary."""
    found = yield Fetch(
        "SELECT payload, branches FROM ranklock.result_cache WHERE snapshot_id = %s AND cache_key = %s",
        [rec.snapshot_id, key_hash],
        primary=True,
    )
    if not found:
        return None
    row = found[0]
    payload: dict[str, Any] = json.loads(row["payload"])
    hits: list[dict[str, Any]] = payload["hits"]
    if hits:
        rows = yield Fetch(
            sql.SQL(
                "SELECT c.doc_id, c.chunk, c.text FROM {} AS c JOIN unnest(%s::text[], %s::int[]) "
                "AS p(doc_id, chunk) ON c.doc_id = p.doc_id AND c.chunk = p.chunk WHERE {}"
            ).format(chunks_sql(rec.layout), live_sql(rec.layout)),
            [[h["doc_id"] for h in hits], [h["chunk"] for h in hits]],
            primary=True,
        )
        texts = {(r["doc_id"], int(r["chunk"])): r["text"] for r in rows}
        for h in hits:
            h["text"] = texts[(h["doc_id"], h["chunk"])]
    # The echo of the request is this request's, not the one that filled the
    # entry: equal fingerprints may come from differently spaced query text.
    payload["query"] = rec.request["query"]
    payload["filter"] = rec.request.get("filter")
    from .branches import read_result

    result = read_result(payload)
    branches = None if row["branches"] is None else json.loads(row["branches"])
    return result, branches


def store_steps(
    snapshot_id: int,
    manifest_hash: str | None,
    key: tuple[str, dict[str, Any]],
    result: SearchResult,
    branches: dict[str, list[list[Any]]] | None,
) -> Steps[None]:
    """Store ``result`` (texts left out: they are read back from the snapshot) under ``key``, on the primary.

    Only while the snapshot's manifest is ``manifest_hash`` (the one the search read): a purge that
    committed meanwhile changed it, and cleared the entries that could quote what it erased.
    """
    payload = result.model_dump(mode="json", exclude={"timings", "query_id", "served_by"})
    for h in payload["hits"]:
        h.pop("text", None)
    # The snapshot may have been dropped while this search ran (foreign key
    # violation): then there is nothing to cache for.
    with contextlib.suppress(psycopg.errors.ForeignKeyViolation):
        yield Fetch(
            "INSERT INTO ranklock.result_cache (snapshot_id, cache_key, key, payload, branches) "
            "SELECT %s, %s, %s, %s, %s WHERE EXISTS (" + UNCHANGED_SNAPSHOT + ") "
            "ON CONFLICT (snapshot_id, cache_key) DO UPDATE SET "
            "payload = EXCLUDED.payload, branches = coalesce(EXCLUDED.branches, ranklock.result_cache.branches)",
            [
                snapshot_id,
                key[0],
                Jsonb(key[1]),
                json.dumps(payload, ensure_ascii=False),
                None if branches is None else json.dumps(branches),
                snapshot_id,
                manifest_hash,
            ],
            primary=True,
        )


def clear(db: Database, snapshot_id: int | None = None) -> int:
    """Delete cache entries (of one snapshot, or all); return how many."""
    row = db.fetchone(
        "WITH d AS (DELETE FROM ranklock.result_cache WHERE %s::bigint IS NULL OR snapshot_id = %s RETURNING 1) "
        "SELECT count(*) AS n FROM d",
        [snapshot_id, snapshot_id],
    )
    return int(row["n"]) if row else 0
