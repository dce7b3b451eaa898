"""The query log, and exact replay of a logged query.

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

:class:`SearchRecord` is the small object a search (ranklock.search.execute) drives: it
says whether the search statement must return the branch candidates too
(``SearchSpec.capture_branches``: one statement, no second search), serves
from the result cache keyed by that statement, and logs and caches the
finished result.  It keeps those concerns out of the (shared) search method.
It is frozen: each step that learns something (the statement, the branches'
candidates) returns a new record, and the hooks return the result as it is
returned (its ``query_id``), a copy of the one they were given.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..errors import NotFound, QueryError, RanklockError
from ..ingest.normalize import normalize
from ..snapshot.manifest import UNCHANGED_SNAPSHOT
from ..snapshot.segments import Layout
from ..store.steps import Fetch, Offload, Steps, run_steps
from ..validation import short_repr

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..settings import Settings
    from ..store.database import Database
    from .protocol import Searcher
    from .results import SearchResult
    from .spec import SearchSpec

__all__ = [
    "ReplayReport",
    "SearchRecord",
    "fingerprint",
    "replay",
    "replay_steps",
    "replay_text",
    "result_digest",
    "text_sha256",
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
    _capture: list[dict[str, Any]] | None = field(default=None, repr=False)

    @classmethod
    def start(
        cls,
        db: Database,
        settings: Settings,
        *,
        coll: CollectionInfo,
        snap: dict[str, Any],
        spec: SearchSpec,
        request: dict[str, Any],
    ) -> SearchRecord:
        req = {k: _jsonable(v) for k, v in request.items() if k != "params"}
        req["params"] = {k: _jsonable(v) for k, v in sorted(request.get("params", {}).items()) if v is not None}
        if spec.as_of is not None:
            req["as_of"] = spec.as_of.isoformat()
        return cls(
            db=db,
            settings=settings,
            coll=coll,
            snapshot_id=int(snap["id"]),
            layout=spec.layout,
            manifest_hash=snap.get("manifest_hash"),
            request=req,
            fingerprint=fingerprint(str(request["query"]), coll.language),
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

    def cached_steps(self, timings: dict[str, float], t0: float) -> Steps[SearchResult | None]:
        """The cached result of this exact request (logged, when the log is on), or None (then search runs)."""
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
        timings = {
            **timings,
            "cache_ms": (time.perf_counter() - t) * 1000,
            "total_ms": (time.perf_counter() - t0) * 1000,
        }
        result = result.model_copy(update={"timings": timings})
        if self.logging:
            result = yield from dataclasses.replace(self, branches=branches)._logged_steps(result, cached=True)
        return result

    def with_branches(self, spec: SearchSpec, rows: Sequence[Mapping[str, Any]]) -> SearchRecord:
        """This record with each branch's candidates, read from the search statement's ``branches`` column.

        The statement was built for them (``spec.capture_branches``), so the
        statement that served the result also reported what fusion saw, with
        no second statement.  An empty result means every branch was empty.
        """
        if not self.wants_branches:
            return self
        got: dict[str, list[list[Any]]] = rows[0]["branches"] if rows else {}
        return dataclasses.replace(self, branches={b.name: got.get(b.name, []) for b in spec.branches})

    def finish_steps(self, result: SearchResult) -> Steps[SearchResult]:
        """Log the finished result and store it in the cache; the result as returned (its ``query_id``, or the
        warning of a failed log write)."""
        if self._capture is not None:
            self._capture.append(self.entry(result))
            return result
        if self.logging:
            result = yield from self._logged_steps(result, cached=False)
            if result.query_id is None:
                return result  # the logging warning belongs to this answer only: never cache it
        if self.caching:
            from .cache import cache_key, store_steps

            key = self.cache_key or cache_key(self)
            yield from store_steps(self.snapshot_id, self.manifest_hash, key, result, self.branches)
        return result

    # -- log rows ---------------------------------------------------------------

    def entry(self, result: SearchResult) -> dict[str, Any]:
        return {
            "final": final_order(result),
            "branches": self.branches,
            "digest": result_digest(result),
            "manifest_hash": self.manifest_hash,
        }

    def _logged_steps(self, result: SearchResult, *, cached: bool) -> Steps[SearchResult]:
        """``result`` logged: with its ``query_id``, or, when the write failed, a warning saying so."""
        query_id, warning = yield from self._log(result, cached=cached)
        if warning is not None:
            return result.model_copy(update={"warnings": [*result.warnings, warning]})
        return result.model_copy(update={"query_id": query_id})

    def _log(self, result: SearchResult, *, cached: bool) -> Steps[tuple[int | None, str | None]]:
        """Insert the log row; its id, or None and the warning of a failed write (also logged).

        A full disk or any other failure of the log write must not cost the
        caller an answer that is complete: the search stands, loudly unlogged.
        """
        body = {"final": final_order(result), "branches": self.branches, "params": result.params, "cached": cached}
        from ..store.replicas import current_route

        route = current_route()  # the replica that served it and its replay position (None: the primary)
        body["node"] = {"served_by": "primary"} if route is None else route.as_log()
        try:
            # Only while the snapshot is as the search read it: a purge that committed meanwhile changed
            # its manifest (ranklock.snapshot.purge), and an entry written now could quote what it erased.
            rows = yield Fetch(
                "INSERT INTO ranklock.query_log (collection, snapshot_id, manifest_hash, fingerprint, request, "
                "result_digest, result, timings) SELECT %s, %s, %s, %s, %s, %s, %s, %s WHERE EXISTS ("
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
                    self.snapshot_id,
                    self.manifest_hash,
                ],
                primary=True,
            )
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


# -- replay -------------------------------------------------------------------------


@dataclass
class ReplayReport:
    query_id: int
    collection: str
    snapshot_id: int | None
    identical: bool
    logged_digest: str
    replayed_digest: str
    manifest_hash: dict[str, str | None]
    differences: list[dict[str, Any]]
    request: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "collection": self.collection,
            "snapshot_id": self.snapshot_id,
            "identical": self.identical,
            "logged_digest": self.logged_digest,
            "replayed_digest": self.replayed_digest,
            "manifest_hash": self.manifest_hash,
            "differences": self.differences,
            "request": self.request,
        }


def _diff_lists(where: str, logged: list[Any], replayed: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(max(len(logged), len(replayed))):
        a = logged[i] if i < len(logged) else None
        b = replayed[i] if i < len(replayed) else None
        if a != b:
            out.append({"where": where, "position": i + 1, "logged": a, "replayed": b})
    return out


def replay(
    db: Database, settings: Settings, search: Searcher, query_id: int, *, query: str | None = None
) -> ReplayReport:
    """Re-run logged query ``query_id`` against its snapshot (through ``search``) and compare it with the log.

    ``query``: the text of an entry logged with hashes only (checked against its sha256).
    """

    def searched(name: str, query: str, **kwargs: Any) -> Steps[SearchResult]:
        result: SearchResult = yield Offload(lambda: search(name, query, **kwargs))
        return result

    return run_steps(db, replay_steps(db, settings, searched, query_id, query=query))


def replay_text(req: dict[str, Any], key: str, given: str | None, *, entry: str, option: str, stored: str) -> str:
    """The text a replay re-runs: ``req[key]``, or for an entry logged with hashes only ``given``, once its sha256
    matches ``req[key + "_sha256"]``; QueryError otherwise, saying what is stored (``stored``) and how to replay.

    ``entry`` names the entry ("query 12", "answer 3f2c…"), ``option`` the CLI option that gives the text.
    Shared by the query log and the answer log (ranklock.ask.log).
    """
    what = key.replace("_", " ")
    if key in req:
        if given is not None and given != req[key]:
            raise QueryError(f"{entry} was logged with its {what} {short_repr(req[key])}; replay it without {option}.")
        return str(req[key])
    digest = str(req.get(f"{key}_sha256"))
    if given is None:
        raise QueryError(
            f"{entry} was logged with hashes only (RANKLOCK_LOG_TEXT=hash): its {what} is not stored, only its "
            f"sha256 {digest[:12]}…. {stored} replays once the {what} is given again ({option} TEXT); its sha256 "
            "must match."
        )
    if text_sha256(given) != digest:
        raise QueryError(
            f"the {what} given for {entry} is not the one logged: its sha256 is {text_sha256(given)[:12]}…, the "
            f"log's {digest[:12]}…. Give the exact {what} (same spaces and case)."
        )
    return given


def replay_steps(
    db: Database,
    settings: Settings,
    search: Callable[..., Steps[SearchResult]],
    query_id: int,
    *,
    query: str | None = None,
) -> Steps[ReplayReport]:
    """:func:`replay` as steps (ranklock.store.steps); ``search`` is the search as steps.

    ``db`` (the sync primary) only serves the rare message of a pruned entry, off the event loop.
    """
    if not isinstance(query_id, int) or query_id < 1:
        raise QueryError(f"query id must be a positive integer, got {query_id!r}.")
    rows = yield Fetch("SELECT * FROM ranklock.query_log WHERE id = %s", [query_id], primary=True)
    if not rows:
        purged = yield Fetch(
            "SELECT id, at FROM ranklock.purges WHERE %s = ANY (query_ids) ORDER BY id LIMIT 1",
            [query_id],
            primary=True,
        )
        if purged:
            raise NotFound(
                f"query {query_id} touched a document that purge {purged[0]['id']} erased at "
                f"{purged[0]['at'].isoformat(timespec='seconds')}; its log entry was removed with the document, "
                "so it cannot be replayed (`ranklock purge` erases a document from every snapshot and log)."
            )
        dropped = yield Fetch(
            "SELECT collection, at FROM ranklock.collection_drops WHERE %s = ANY (query_ids) ORDER BY id LIMIT 1",
            [query_id],
            primary=True,
        )
        if dropped:
            raise NotFound(
                f"query {query_id} searched collection {dropped[0]['collection']!r}, which was dropped at "
                f"{dropped[0]['at'].isoformat(timespec='seconds')} with its snapshots and log entries; it cannot be "
                "replayed."
            )
        from ..store.log_retention import RetentionPolicy, pruned_through

        watermark: int = yield Offload(lambda: pruned_through(db))
        if query_id <= watermark:
            policy = RetentionPolicy.from_settings(settings).describe()
            raise NotFound(
                f"query {query_id} was pruned from the query log by its retention policy (every entry up to id "
                f"{watermark} is gone; the policy keeps {policy}). Its request and recorded results are no longer "
                "stored, so it cannot be replayed or compared. Run the search again to log it anew; raise "
                "RANKLOCK_LOG_RETENTION or RANKLOCK_LOG_MAX_BYTES to keep entries longer."
            )
        last = yield Fetch("SELECT max(id) AS m FROM ranklock.query_log", primary=True)
        raise NotFound(
            f"no logged query with id {query_id} (the log holds ids up to {last[0]['m'] if last else None}); "
            "searches are logged unless log_queries is off."
        )
    row = rows[0]
    req: dict[str, Any] = row["request"]
    text = replay_text(
        req,
        "query",
        query,
        entry=f"query {query_id}",
        option="--query",
        stored="What is still stored (the snapshot, the parameters, the filter, every branch's ids, ranks and scores, "
        "the result digest)",
    )
    sid = row["snapshot_id"]
    exists = yield Fetch("SELECT status, manifest_hash FROM ranklock.snapshots WHERE id = %s", [sid], primary=True)
    if not exists:
        raise NotFound(
            f"query {query_id} ran against snapshot {sid} of {row['collection']!r}, which has been dropped (by "
            "`snapshot drop` or by snapshot retention); a replay needs the snapshot it ran against. Pin an entry "
            "whose replay must keep working: `ranklock log pin ID` keeps it and its snapshot."
        )
    from ..store.timeout import timeout_override

    logged_timeout = ((row["result"] or {}).get("params") or {}).get("statement_timeout_s")
    # The context variables are set while the generator runs: in the driver's thread or task.
    with replaying() as captured, timeout_override(logged_timeout):
        yield from search(
            row["collection"],
            text,
            k=req["k"],
            mode=req["mode"],
            filter=req.get("filter"),
            snapshot=sid,
            as_of=req.get("as_of"),
            **req.get("params", {}),
        )
    fresh = captured[-1]
    logged: dict[str, Any] = row["result"]
    diffs = _diff_lists("final", logged.get("final") or [], fresh["final"])
    lb: dict[str, Any] = logged.get("branches") or {}
    fb: dict[str, Any] = fresh["branches"] or {}
    for branch in sorted(set(lb) | set(fb)):
        diffs += _diff_lists(f"branch:{branch}", lb.get(branch) or [], fb.get(branch) or [])
    if row["manifest_hash"] != fresh["manifest_hash"]:
        diffs.append(
            {
                "where": "manifest_hash",
                "position": None,
                "logged": row["manifest_hash"],
                "replayed": fresh["manifest_hash"],
            }
        )
        # A purge since the query ran corrected the snapshot (and its manifest): say so.
        later = yield Fetch(
            "SELECT id FROM ranklock.purges WHERE %s = ANY (snapshots) AND at > %s ORDER BY id",
            [sid, row["logged_at"]],
            primary=True,
        )
        if later:
            diffs.append(
                {"where": "purge", "position": None, "logged": None, "replayed": [int(r["id"]) for r in later]}
            )
    if row["result_digest"] != fresh["digest"] and not diffs:
        # Same ids, ranks and scores but other bytes: texts, warnings or echoed parameters.
        diffs.append(
            {"where": "result_json", "position": None, "logged": row["result_digest"], "replayed": fresh["digest"]}
        )
    return ReplayReport(
        query_id=query_id,
        collection=row["collection"],
        snapshot_id=sid,
        identical=not diffs,
        logged_digest=row["result_digest"],
        replayed_digest=fresh["digest"],
        manifest_hash={"logged": row["manifest_hash"], "replayed": fresh["manifest_hash"]},
        differences=diffs,
        request=req,
    )
