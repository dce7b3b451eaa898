"""The query log: what a search writes once it has answered (ranklock.search.replay re-runs an entry).

Every search (unless ``Settings.log_queries`` is off) writes one row of
``ranklock.query_log``: the query fingerprint (sha256 of the normalised text
and the text-search language), the snapshot id and manifest hash it ran
against, the full request, each branch's candidates with their raw scores,
the final order, a digest of the canonical result JSON, and the timings.

:func:`replay` re-runs a logged request against the same snapshot, bypassing
the result cache, and compares every recorded list and the result digest::

    >>> res = eng.search("docs", "how do vaccines work", k=5)
    >>> eng.replay(res.query_id).identical
    True

:class:`SearchRecord` is the small object a search (ranklock.search.pipeline) drives: it
says whether the search statement must return the branch candidates too
(``SearchSpec.capture_branches``: one statement, no second search), serves
from the result cache keyed by that statement, and logs and caches the
finished result.  It keeps those concerns out of the (shared) search method.
It is frozen: each step that learns something (the statement, the branches'
candidates) returns a new record, and the hooks return the result as it is
returned (its ``query_id``), a copy of the one they were given.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..errors import RanklockError
from ..ingest.normalize import normalize
from ..snapshot.manifest import UNCHANGED_SNAPSHOT
from ..snapshot.segments import Layout
from ..store.steps import Batch, Fetch, Offload, Steps, failed_at
from .fusion import read_branches

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..settings import Settings
    from ..store.database import Database
    from ..store.replicas import Route
    from .context import SearchContext
    from .results import SearchResult
    from .spec import SearchSpec

__all__ = [
    "SearchRecord",
    "fingerprint",
    "result_digest",
    "text_sha256",
    "wants_branches",
]

log = logging.getLogger("ranklock.querylog")


def fingerprint(query: str, language: str) -> str:
    """sha256 of the normalised query text and the text-search language."""
    return hashlib.sha256(f"{language}\x00{normalize(query)}".encode()).hexdigest()


def result_digest(result: SearchResult) -> str:
    """sha256 of the canonical result JSON (no timings, no log id)."""
    return hashlib.sha256(result.to_json().encode("utf-8")).hexdigest()


def text_sha256(text: str) -> str:
    """The sha256 a hash-only log keeps of a text (RANKLOCK_LOG_TEXT=hash): of its exact UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def logged_request(request: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The request as the log keeps it: with ``log_text = "hash"`` the query text is replaced by its sha256."""
    if settings.log_text != "hash":
        return request
    out = {k: v for k, v in request.items() if k != "query"}
    out["query_sha256"] = text_sha256(str(request["query"]))
    return out


def final_order(result: SearchResult) -> list[list[Any]]:
    """The final hits as ``[doc_id, chunk, rank, score]`` then each branch's rank and raw score, in registry
    order: ``[…, lex rank, lex score, sem rank, sem distance]``."""
    return [
        [h.doc_id, h.chunk, h.rank, h.score, *(x for sig in h.signals for x in (sig.rank, sig.raw))]
        for h in result.hits
    ]


def _jsonable(value: Any) -> Any:
    """The request value as JSON, the way the search result echoes it."""
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


# While a replay runs, the search it drives must neither read the result cache
# (a cached answer would make the comparison meaningless) nor log itself; it
# hands its record to the replay instead.  A context variable keeps this
# thread-safe without widening Engine.search's signature.
_REPLAY: ContextVar[list[dict[str, Any]] | None] = ContextVar("ranklock_replay", default=None)


@contextmanager
def replaying() -> Iterator[list[dict[str, Any]]]:
    captured: list[dict[str, Any]] = []
    token = _REPLAY.set(captured)
    try:
        yield captured
    finally:
        _REPLAY.reset(token)


@dataclass(frozen=True)
class SearchRecord:
    """What one search needs for the query log and the result cache; each step returns a new record."""

    db: Database
    settings: Settings
    coll: CollectionInfo
    snapshot_id: int
    #: The snapshot's segments and dead rows (the result cache reads hit texts through them).
    layout: Layout
    manifest_hash: str | None
    request: dict[str, Any]
    fingerprint: str
    #: The statement that runs (:meth:`with_statement`, once it is built): the cache key hashes it.
    sql_query: sql.Composable = field(default_factory=lambda: sql.SQL(""))
    sql_params: dict[str, Any] = field(default_factory=dict)
    #: Each branch's candidates, as the statement (:meth:`with_branches`) or the cache entry reported them.
    branches: dict[str, list[list[Any]]] | None = None
    #: The result cache's key of the statement (set with it, when the cache is on).
    cache_key: tuple[str, dict[str, Any]] | None = None
    #: The replica that served the search (None: the primary), for the log entry's ``node``.
    route: Route | None = None
    _capture: list[dict[str, Any]] | None = field(default=None, repr=False)

    @classmethod
    def start(
        cls,
        db: Database,
        settings: Settings,
        route: Route | None,
        ctx: SearchContext,
        spec: SearchSpec,
        *,
        request: dict[str, Any],
    ) -> SearchRecord:
        """The record of a search of ``spec`` in ``ctx``: its log row and cache key go to ``db`` (the primary)."""
        req = {k: _jsonable(v) for k, v in request.items() if k != "params"}
        req["params"] = {k: _jsonable(v) for k, v in sorted(request.get("params", {}).items()) if v is not None}
        if spec.as_of is not None:
            req["as_of"] = spec.as_of.isoformat()
        return cls(
            db=db,
            settings=settings,
            coll=ctx.coll,
            snapshot_id=int(ctx.snap["id"]),
            layout=spec.layout,
            manifest_hash=ctx.snap.get("manifest_hash"),
            request=req,
            fingerprint=fingerprint(str(request["query"]), ctx.coll.language),
            route=route,
            _capture=_REPLAY.get(),
        )

    def with_statement(self, query: sql.Composable, params: dict[str, Any]) -> SearchRecord:
        """This record with the statement the search runs (built once :attr:`wants_branches` was known), and
        the cache key of it when the cache is on."""
        rec = dataclasses.replace(self, sql_query=query, sql_params=params)
        if not rec.caching:
            return rec
        from .cache import cache_key

        return dataclasses.replace(rec, cache_key=cache_key(rec))

    # -- policy --------------------------------------------------------------

    @property
    def logging(self) -> bool:
        return self._capture is None and bool(self.settings.log_queries)

    @property
    def caching(self) -> bool:
        return self._capture is None and bool(getattr(self.settings, "result_cache", False))

    @property
    def wants_branches(self) -> bool:
        """The search statement must return the branch candidates: someone records them."""
        return self.logging or self._capture is not None

    # -- the hooks the search calls ------------------------------------------

    def cached_steps(self) -> Steps[tuple[SearchResult, SearchRecord] | None]:
        """The cached result of this exact statement (fused, before any post-stage) and this record with the
        entry's branch candidates, or None (then the statement runs)."""
        if self.cache_key is None:
            return None
        from .cache import lookup_steps

        t = time.perf_counter()
        found = yield from lookup_steps(self, self.cache_key[0])
        if found is None:
            return None
        result, branches = found
        if self.logging and branches is None:
            return None  # the entry lacks what the log needs: run the search and refresh it
        timings = {"cache_ms": (time.perf_counter() - t) * 1000}
        return result.model_copy(update={"timings": timings}), dataclasses.replace(self, branches=branches)

    def with_branches(self, spec: SearchSpec, rows: Sequence[Mapping[str, Any]]) -> SearchRecord:
        """This record with each branch's candidates, read from the search statement's ``branches`` column.

        The statement was built for them (``spec.capture_branches``), so the
        statement that served the result also reported what fusion saw, with
        no second statement.  An empty result means every branch was empty.
        """
        if not self.wants_branches:
            return self
        got = read_branches(rows)
        return dataclasses.replace(self, branches={b.name: got.get(b.name, []) for b in spec.branches})

    def finish_steps(
        self, served: SearchResult, *, fused: SearchResult, cached: bool, writes: Sequence[Fetch] = ()
    ) -> Steps[SearchResult]:
        """Log ``served`` (the result as returned) and cache ``fused`` (the statement's, before post-stages), with
        ``writes`` (a new query vector) in the same round trip; ``served`` as returned (its ``query_id``, or the
        warning of a failed log write)."""
        if self._capture is not None:
            self._capture.append(self.entry(served))
            if writes:
                yield from _unlogged_writes(writes)
            return served
        if self.logging:
            served = yield from self._logged_steps(served, cached=cached, writes=writes)
            writes = ()
            if served.query_id is None:
                return served  # the logging warning belongs to this answer only: never cache it
        elif writes:
            yield from _unlogged_writes(writes)
        if self.caching and not cached:
            from .cache import cache_key, store_steps

            key = self.cache_key or cache_key(self)
            yield from store_steps(self.snapshot_id, self.manifest_hash, key, fused, self.branches)
        return served

    # -- log rows ---------------------------------------------------------------

    def entry(self, result: SearchResult) -> dict[str, Any]:
        return {
            "final": final_order(result),
            "branches": self.branches,
            "digest": result_digest(result),
            "manifest_hash": self.manifest_hash,
            "rerank": _rerank_record(result),
        }

    def _logged_steps(self, result: SearchResult, *, cached: bool, writes: Sequence[Fetch]) -> Steps[SearchResult]:
        """``result`` logged: with its ``query_id``, or, when the write failed, a warning saying so."""
        query_id, warning = yield from self._log(result, cached=cached, writes=writes)
        if warning is not None:
            return result.model_copy(update={"warnings": [*result.warnings, warning]})
        return result.model_copy(update={"query_id": query_id})

    def _log(
        self, result: SearchResult, *, cached: bool, writes: Sequence[Fetch]
    ) -> Steps[tuple[int | None, str | None]]:
        """Insert the log row (after ``writes``, in one round trip); its id, or None and the warning of a failed write.

        A full disk or any other failure of the log write must not cost the
        caller an answer that is complete: the search stands, loudly unlogged.
        """
        body = {"final": final_order(result), "branches": self.branches, "params": result.params, "cached": cached}
        route = self.route  # the replica that served it and its replay position (None: the primary)
        body["node"] = {"served_by": "primary"} if route is None else route.as_log()
        rerank = _rerank_record(result)
        # Only while the snapshot is as the search read it: a purge that committed meanwhile changed
        # its manifest (ranklock.snapshot.purge), and an entry written now could quote what it erased.
        insert = Fetch(
            "INSERT INTO ranklock.query_log (collection, snapshot_id, manifest_hash, fingerprint, request, "
            "result_digest, result, timings, rerank) SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s WHERE EXISTS ("
            + UNCHANGED_SNAPSHOT
            + ") RETURNING id, bytes",
            [
                self.coll.name,
                self.snapshot_id,
                self.manifest_hash,
                self.fingerprint,
                Jsonb(logged_request(self.request, self.settings)),
                result_digest(result),
                Jsonb(body),
                Jsonb(result.timings),
                None if rerank is None else Jsonb(rerank),
                self.snapshot_id,
                self.manifest_hash,
            ],
            primary=True,
        )
        try:
            try:
                values = yield Batch((*writes, insert), primary=True)
            except (psycopg.Error, RanklockError) as exc:
                at = failed_at(exc)
                if at is None or at >= len(writes):
                    raise
                # A write before the log's failed (a query vector the cache refused): the log goes alone.
                values = [(yield insert)]
            rows = values[-1]
        except (psycopg.Error, RanklockError) as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            message = (
                f"query log: this search was not logged ({type(exc).__name__}: {text}); the results are complete, "
                "but `ranklock replay` cannot re-run it. Free space on the database server or fix the cause "
                "(RANKLOCK_LOG_QUERIES=0 turns logging off)."
            )
            log.warning(message)
            return None, message
        if not rows:
            message = (
                f"query log: this search was not logged: a purge changed snapshot {self.snapshot_id} while it ran "
                "(an entry now could quote an erased document); the results are as the snapshot was when it "
                "started. Search again for a logged, replayable answer."
            )
            log.warning(message)
            return None, message
        query_id = int(rows[0]["id"])
        from ..store.log_retention import QUERY_LOG, RetentionPolicy, schedule_for

        # The entry's size drives the schedule (ranklock.store.log_retention): a burst of deep searches prunes
        # as soon as its bytes reach 5 % of the limit.  On the sync pool: in a worker thread when async.
        policy, schedule = RetentionPolicy.from_settings(self.settings), schedule_for(self.db)
        if schedule.logged(QUERY_LOG, int(rows[0]["bytes"] or 0), policy):
            yield Offload(lambda: schedule.run(self.db, QUERY_LOG, policy))
        return query_id, None


def wants_branches(settings: Settings) -> bool:
    """Whether a search under ``settings`` returns each branch's candidates (for its log, or a replay's capture)."""
    return _REPLAY.get() is not None or bool(settings.log_queries)


def _unlogged_writes(writes: Sequence[Fetch]) -> Steps[None]:
    """``writes`` without a log entry to go with: a failure (a cache that refused a vector) costs nothing."""
    with contextlib.suppress(psycopg.Error, RanklockError):
        yield Batch(tuple(writes), primary=True)


def _rerank_record(result: SearchResult) -> dict[str, Any] | None:
    """What the query log keeps of a rerank stage: the result's rerank record and k (None: not reranked)."""
    record = result.params.get("rerank")
    return None if record is None else {**record, "k": result.k, "digest": result_digest(result)}
