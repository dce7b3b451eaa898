"""Running a search: the plan, the completeness count, the statement, the result.

The path of one search (``Engine.search`` calls :func:`run_search`):

1. :func:`build_plan`: the collection's search defaults and the caller's
   parameters, the compiled filter, the lexical probe (stop words, postings),
   BM25 statistics and the query vector;
2. ``completeness.prepare_plan``: count the matching documents, pick the vector
   strategy;
3. ``log.SearchRecord``: answer from the result cache, or ask the statement to
   report each branch's candidates for the query log;
4. :func:`execute_search`: index settings, the fused statement
   (``fusion.build_search_sql``), an exact rescan if the index came back short;
   ``completeness.judge`` says whether the answer is whole;
5. hits, tie groups (``ties``), the echoed parameters, then the log and cache.

:func:`search_sql` builds the same statement without running it, and writes
nothing (no embedding-cache row, no value-count table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import psycopg
from psycopg import sql

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..errors import QueryError
from ..settings import SearchParams, Settings
from ..snapshot.rules import rules_of
from ..store.database import Database
from ..store.steps import Block, Fetch, Offload, Steps, drive, fetch_on, run_steps
from ..store.tables import snapshot_table
from .completeness import Scope, judge, prepare_plan_steps
from .fusion import build_search_sql
from .plan import SearchPlan
from .results import Hit, SearchResult, SnapshotRef
from .semantic import index_settings_sql, setup_semantic

__all__ = [
    "PlannedSearch",
    "SearchRequest",
    "SearchRun",
    "build_plan",
    "build_plan_steps",
    "execute_search",
    "execute_search_steps",
    "parse_as_of",
    "run_search",
    "search_sql",
    "search_sql_steps",
    "search_steps",
]

#: The collection's embedder, checked against its weights (the facade owns the loaded models).
EmbedderFor = Callable[[CollectionInfo], Embedder]


@dataclass
class SearchRequest:
    """One search as the caller asked for it (echoed in the result and the query log)."""

    collection: str
    query: str
    k: int = 10
    mode: str = "hybrid"
    filter: Any = None
    snapshot: int | None = None
    as_of: datetime | str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        collection: str,
        query: str,
        *,
        k: int = 10,
        mode: str = "hybrid",
        filter: Any = None,
        snapshot: int | None = None,
        as_of: datetime | str | None = None,
        **params: Any,
    ) -> SearchRequest:
        """The request of a call with ``Engine.search``'s keywords (``AsyncEngine`` takes the same)."""
        return cls(collection, query, k, mode, filter, snapshot, as_of, params)

    def check(self) -> None:
        """Refuse a bad query, mode, k or snapshot id before any SQL (ranklock.search.inputs)."""
        from .inputs import check_query, check_request

        check_query(self.query)
        check_request(mode=self.mode, k=self.k, snapshot=self.snapshot)

    def as_log(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "query": self.query,
            "k": self.k,
            "mode": self.mode,
            "filter": self.filter,
            "snapshot": self.snapshot,
            "as_of": self.as_of,
            "params": self.params,
        }


@dataclass
class PlannedSearch:
    plan: SearchPlan
    params: SearchParams
    timings: dict[str, float]
    warnings: list[str]


@dataclass
class SearchRun:
    rows: list[tuple[Any, ...]]
    scope: Scope
    complete: bool
    truncation: str | None
    params: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_as_of(value: datetime | str | None) -> datetime | None:
    """``as_of`` as an aware datetime; QueryError for a naive one or text that is not ISO 8601."""
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is None:
            raise QueryError(f"as_of {value.isoformat()} has no time zone; pass an aware datetime (e.g. UTC).")
        return value
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise QueryError(f"as_of {value!r} is not an ISO 8601 timestamp; e.g. 2026-01-31T00:00:00Z.") from exc
    if dt.tzinfo is None:
        raise QueryError(f"as_of {value!r} has no time zone; append Z or an offset like +01:00.")
    return dt


def _probe(
    plan: SearchPlan, coll: CollectionInfo, snap: dict[str, Any], query: str
) -> Steps[tuple[list[int] | None, str | None]]:
    """Is anything searchable, and (BM25) how many postings its terms have: one round trip.

    When the query has only stop words or only exclusions, lexical mode is
    refused (QueryError) and hybrid mode turns the lexical branch off.
    Returns (the postings counts or None, the warning or None).
    """
    from ..validation import short_repr
    from .bm25 import query_postings_sql

    count_sql, count_params = query_postings_sql(plan, int(snap["id"]), snap.get("stats") or {})
    rows = yield Fetch(
        sql.SQL(
            "SELECT numnode(ranklock.query_tsquery(%s::regconfig, %s, %s, %s)) AS n, "
            "cardinality(ranklock.query_terms(%s::regconfig, %s, %s, %s)) AS positive, {} AS postings"
        ).format(count_sql),
        [*(2 * [coll.language, coll.accent, plan.syntax, plan.query]), *count_params],
    )
    row = rows[0] if rows else None
    if row is None or row["n"] == 0:
        if plan.mode == "lexical":
            raise QueryError(
                f"the query {short_repr(query)} has no searchable words in {coll.language} (only stop words or "
                "punctuation); add content words, or use --mode semantic."
            )
        plan.lexical_branch = False
        return None, "query has only stop words: the lexical branch was skipped"
    if not row["positive"]:
        # websearch "-word" alone: it would match (and tie) nearly every chunk.
        if plan.mode == "lexical":
            raise QueryError(
                f"the query {short_repr(query)} only excludes words (-word); say what to look for too, "
                "e.g. 'canyon -alpha', or drop the minus signs."
            )
        plan.lexical_branch = False
        return None, "query only excludes words: the lexical branch was skipped"
    return (None if row["postings"] is None else [int(x) for x in row["postings"]]), None


def build_plan(
    db: Database,
    coll: CollectionInfo,
    snap: dict[str, Any],
    req: SearchRequest,
    embedder: EmbedderFor,
    *,
    store_vector: bool = True,
    primary: Database | None = None,
) -> PlannedSearch:
    """The plan of ``req`` on snapshot ``snap`` of ``coll``: every value the statement binds.

    Reads go to ``db``; a new query vector is stored on ``primary`` (default ``db``), or nowhere
    with ``store_vector=False``.
    """
    return run_steps(db, build_plan_steps(coll, snap, req, embedder, store_vector=store_vector), primary=primary)


def build_plan_steps(
    coll: CollectionInfo,
    snap: dict[str, Any],
    req: SearchRequest,
    embedder: EmbedderFor,
    *,
    store_vector: bool = True,
) -> Steps[PlannedSearch]:
    """:func:`build_plan` as steps (ranklock.store.steps): the one plan the sync and async search share."""
    from ..ingest.normalize import normalize
    from ..validation import parse_search_params
    from .embedding import query_vector_steps

    params = req.params
    sp = parse_search_params({**coll.search_defaults, **{k_: v for k_, v in params.items() if v is not None}})
    timings: dict[str, float] = {}
    warnings: list[str] = []
    q = normalize(req.query)
    as_of_dt = parse_as_of(req.as_of)
    mode, k = req.mode, req.k
    plan = SearchPlan(
        table=snapshot_table("chunks", int(snap["id"])),
        mode=mode,
        k=k,
        depth=max(sp.depth, k) if mode != "hybrid" else sp.depth,
        rrf_k=sp.rrf_k,
        query=q,
        language=coll.language,
        accent=coll.accent,
        syntax=sp.query_syntax,
        lexical_ranker=sp.lexical_ranker,
        k1=sp.k1,
        b=sp.b,
        as_of=as_of_dt,
        rules=rules_of(snap["manifest"]),
    )
    if req.filter is not None:
        from .filters import compile_filter

        compiled = compile_filter(coll, req.filter)
        plan.filter_sql, plan.filter_params = compiled.sql, compiled.params
    postings: list[int] | None = None
    if plan.uses_lexical:
        postings, skipped = yield from _probe(plan, coll, snap, req.query)
        if skipped is not None:
            warnings.append(skipped)
    if plan.uses_lexical and plan.lexical_ranker == "bm25":
        from .bm25 import prepare_bm25

        prepare_bm25(plan, int(snap["id"]), snap.get("stats") or {}, postings, collection=coll.name)
    if plan.uses_semantic:
        t = time.perf_counter()
        # Resolving the embedder may load a model (seconds of CPU): off the event loop when async.
        emb: Embedder = yield Offload(lambda: embedder(coll))
        qvec = yield from query_vector_steps(coll, emb, q, store=store_vector)
        timings["embed_ms"] = (time.perf_counter() - t) * 1000
        setup_semantic(plan, coll, snap, qvec)
    return PlannedSearch(plan, sp, timings, warnings)


def search_sql(
    db: Database,
    settings: Settings,
    coll: CollectionInfo,
    snap: dict[str, Any],
    req: SearchRequest,
    embedder: EmbedderFor,
) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters :func:`run_search` would run, without running it; writes nothing."""
    q, p = run_steps(db, search_sql_steps(db.dsn, settings, coll, snap, req, embedder))
    with db.connection() as conn:
        text = q.as_string(conn)
    return text, p


def search_sql_steps(
    dsn: str,
    settings: Settings,
    coll: CollectionInfo,
    snap: dict[str, Any],
    req: SearchRequest,
    embedder: EmbedderFor,
) -> Steps[tuple[sql.Composed, dict[str, Any]]]:
    """The statement :func:`search_sql` shows, composed but not yet rendered to text (the caller's connection does).

    ``dsn`` names the database read (it keys the value-count memo).
    """
    planned = yield from build_plan_steps(coll, snap, req, embedder, store_vector=False)
    plan = planned.plan
    # The strategy search() would pick, from the same count, without building value counts.
    yield from prepare_plan_steps(dsn, plan, coll.index_kind, snap, planned.params, build_counts=False)
    plan.capture_branches = bool(settings.log_queries)  # search() also returns branches to log
    return build_search_sql(plan)


def execute_search(conn: psycopg.Connection[Any], plan: SearchPlan, sp: SearchParams, scope: Scope) -> SearchRun:
    """Run the planned search inside the caller's transaction; check the vector branch; fall back or flag.

    On a fallback ``plan.vector_strategy`` becomes ``exact``, so whatever
    reads the plan afterwards (the query log) sees the statement that served.
    """
    return drive(execute_search_steps(plan, sp, scope), lambda step: fetch_on(conn, cast(Fetch, step)))


def execute_search_steps(plan: SearchPlan, sp: SearchParams, scope: Scope) -> Steps[SearchRun]:
    """:func:`execute_search` as steps, all on the one connection of the caller's :class:`Block`."""
    warnings: list[str] = []
    fallback: str | None = None
    truncation: str | None = None
    yield Fetch(*index_settings_sql(plan, sp))
    q, p = build_search_sql(plan)
    rows = yield Fetch(q, p, dicts=False)
    if plan.uses_semantic and plan.vector_strategy != "exact":
        # The last column is how many documents the vector branch handed to fusion.
        got = int(rows[0][-1]) if rows else 0
        want = min(plan.depth, scope.documents)
        if got < want:
            if sp.exact_fallback:
                fallback = (
                    f"index_scan_budget: {plan.vector_strategy} returned {got} of {want} documents; rescanned exactly"
                )
                plan.vector_strategy = "exact"
                q, p = build_search_sql(plan)
                rows = yield Fetch(q, p, dicts=False)
            else:
                truncation = "index_scan_budget"
                warnings.append(
                    f"the {plan.vector_strategy} index returned {got} of {want} documents before its scan budget "
                    f"ran out; raise max_scan_tuples (now {sp.max_scan_tuples}) or allow exact_fallback"
                )
    truncation = judge(plan, sp, scope, len(rows), truncation, warnings)
    params: dict[str, Any] = {"matching_chunks": scope.chunks, "exact_threshold": sp.exact_threshold}
    if plan.uses_semantic:
        params["vector_fallback"] = fallback
    return SearchRun(
        rows=rows,
        scope=scope,
        complete=truncation is None,
        truncation=truncation,
        params=params,
        warnings=warnings,
    )


def _hits(rows: list[tuple[Any, ...]]) -> list[Hit]:
    return [
        Hit(
            rank=int(r[0]),
            doc_id=r[1],
            chunk=int(r[2]),
            score=float(r[3]),
            lexical_rank=None if r[4] is None else int(r[4]),
            lexical_score=None if r[5] is None else float(r[5]),
            semantic_rank=None if r[6] is None else int(r[6]),
            semantic_distance=None if r[7] is None else float(r[7]),
            char_start=int(r[8]),
            char_end=int(r[9]),
            text=r[10],
        )
        for r in rows
    ]


def run_search(
    db: Database,
    settings: Settings,
    coll: CollectionInfo,
    snap: dict[str, Any],
    req: SearchRequest,
    embedder: EmbedderFor,
    *,
    started: float | None = None,
    primary: Database | None = None,
) -> SearchResult:
    """Run ``req`` on snapshot ``snap`` of ``coll``: the fused, tie-broken top ``k`` documents.

    The search reads ``db`` (a read replica when the facade routed it there); the query log, the
    result cache and new query vectors live on ``primary`` (default ``db``).  ``started`` (a
    ``perf_counter`` value) is when the caller began, for ``total_ms``.
    """
    steps = search_steps(db.dsn, primary or db, settings, coll, snap, req, embedder, started=started)
    return run_steps(db, steps, primary=primary)


def search_steps(
    dsn: str,
    primary: Database,
    settings: Settings,
    coll: CollectionInfo,
    snap: dict[str, Any],
    req: SearchRequest,
    embedder: EmbedderFor,
    *,
    started: float | None = None,
) -> Steps[SearchResult]:
    """:func:`run_search` as steps (ranklock.store.steps): the one search ``Engine`` and ``AsyncEngine`` run.

    ``dsn`` names the database read (it keys the value-count memo); ``primary`` is the sync
    primary the query log prunes on (in a worker thread when async).
    """
    from ..store.replicas import current_route
    from ..store.timeout import effective_timeout
    from .log import SearchRecord
    from .ties import assign_tie_groups

    t0 = time.perf_counter() if started is None else started
    planned = yield from build_plan_steps(coll, snap, req, embedder)
    plan, sp, timings, warnings = planned.plan, planned.params, planned.timings, planned.warnings
    # Hard constraints: count the matching documents, pick the vector strategy (ranklock.search.completeness).
    timeout = effective_timeout(settings.statement_timeout)
    scope = yield from prepare_plan_steps(dsn, plan, coll.index_kind, snap, sp, timeout=timeout)
    q, p = build_search_sql(plan)
    # Query log, replay capture and result cache (ranklock.search.log).
    record = SearchRecord.start(
        primary, settings, coll=coll, snap=snap, plan=plan, sql_query=q, sql_params=p, request=req.as_log()
    )
    cached = yield from record.cached_steps(timings, t0)
    if cached is not None:
        return cached  # the result cache lives on the primary: served_by stays "primary"
    t1 = time.perf_counter()
    # Index settings, the search, and an exact rescan if the index came back short: one
    # transaction on one connection, every statement under the timeout.
    run: SearchRun = yield Block(execute_search_steps(plan, sp, scope), timeout=timeout)
    rows = run.rows
    record.capture_branches(rows)
    timings["sql_ms"] = (time.perf_counter() - t1) * 1000
    hits = _hits(rows)
    # Hits the ranker cannot tell apart share a tie group (ranklock.search.ties).
    warnings.extend(assign_tie_groups(hits))
    emb_meta = {"embedder_id": coll.embedder_id, "embedder_sha256": coll.embedder_sha256}
    # The order of these keys is part of the result's JSON bytes.
    out_params: dict[str, Any] = {
        "depth": plan.depth,
        "rrf_k": plan.rrf_k,
        "lexical_ranker": plan.lexical_ranker,
        "query_syntax": plan.syntax,
        "language": coll.language,
        "accent": coll.accent,
        "vector_strategy": plan.vector_strategy if plan.uses_semantic else None,
        "ef_search": plan.ef_search if plan.vector_strategy == "hnsw" else None,
        "iterative_scan": sp.iterative_scan if plan.vector_strategy in ("hnsw", "ivfflat") else None,
        "max_scan_tuples": sp.max_scan_tuples if plan.vector_strategy == "hnsw" else None,
        "probes": sp.probes if plan.vector_strategy == "ivfflat" else None,
        **run.params,
        **emb_meta,
        "statement_timeout_s": timeout,
    }
    if plan.lexical_ranker == "bm25":
        out_params.update({"k1": plan.k1, "b": plan.b})
    timings["total_ms"] = (time.perf_counter() - t0) * 1000
    filt = req.filter
    result = SearchResult(
        query=req.query,
        collection=req.collection,
        mode=req.mode,
        k=req.k,
        hits=hits,
        params=out_params,
        snapshot=SnapshotRef(id=int(snap["id"]), manifest_hash=snap["manifest_hash"]),
        filter=filt if filt is None or isinstance(filt, (str, dict, list)) else str(filt),
        as_of=plan.as_of.isoformat() if plan.as_of is not None else None,
        matching_count=run.scope.documents,
        complete=run.complete,
        truncation=run.truncation,
        warnings=warnings + run.warnings,
        timings=timings,
    )
    route = current_route()
    result.served_by = "primary" if route is None else route.served_by
    if route is not None:
        result.timings["replica_wait_ms"] = route.waited_ms  # polling replicas' replay before this node served
        if route.warning:
            result.warnings.append(route.warning)
    yield from record.finish_steps(result)  # after every field is final: the log and cache keep its digest
    return result
