"""Running a search: the spec, the scope, the statement (built once), the result.

The path of one search (``Engine.search`` and ``AsyncEngine.search`` drive
:func:`search_steps`), each step a pure function returning a frozen value:

1. :func:`setup_steps`: the collection's search defaults and the caller's
   parameters, the compiled filter, and every branch of the mode prepared
   (ranklock.search.branches: the lexical probe and BM25 plan, the query
   vector): a :class:`~.spec.SearchSpec`;
2. :func:`constrain_steps`: count the documents the hard constraints admit
   (ranklock.search.scope); each branch returns the plan it runs under that
   count (the vector strategy and ``ef_search``, BM25's admitted plan);
3. ``log.SearchRecord``: whether the statement must also report each
   branch's candidates (the query log, a replay), then the statement is built
   once (``fusion.build_search_sql``), and the result cache is keyed by it;
4. :func:`execute_steps`: the branches' settings and the statement; an exact
   rescan of a branch that fell short (a second, different statement);
   ``completeness.judge`` says whether the answer is whole;
5. hits, tie groups (``ties``), the echoed parameters, then the log and cache.

:func:`search_sql_steps` builds the same statement without running it, and
writes nothing (no embedding-cache row, no value-count table).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from psycopg import sql

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..segmenting import Segmenting, route
from ..settings import SearchParams, Settings
from ..snapshot.rules import rules_of
from ..snapshot.segments import Layout
from ..store.database import Database
from ..store.steps import Block, Fetch, Steps
from .branches import prepare_branches, registry
from .completeness import judge
from .fusion import build_search_sql, read_hits, settings_sql, shortfall_column
from .request import SearchRequest, parse_as_of
from .results import SearchResult, SnapshotRef
from .scope import scope_steps
from .spec import BranchContext, FallsShort, Scope, SearchSpec

__all__ = [
    "SearchRun",
    "SearchSetup",
    "constrain_steps",
    "echo_params",
    "execute_steps",
    "request_steps",
    "search_sql_steps",
    "search_steps",
    "setup_steps",
    "sql_request_steps",
]

#: The collection's embedder, checked against its weights (the facade owns the loaded models).
EmbedderFor = Callable[[CollectionInfo], Embedder]


@dataclass(frozen=True)
class SearchSetup:
    """A request made ready to run: its spec (branches prepared), parameters, warnings and timings so far."""

    spec: SearchSpec
    params: SearchParams
    warnings: tuple[str, ...]
    timings: dict[str, float]


@dataclass(frozen=True)
class SearchRun:
    """What running the statement gave: its rows, the spec that served them, and how complete they are."""

    rows: list[dict[str, Any]]
    #: The spec of the statement that served (an exact rescan replaces the branch that fell short).
    spec: SearchSpec
    scope: Scope
    complete: bool
    truncation: str | None
    params: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def setup_steps(
    coll: CollectionInfo,
    snap: dict[str, Any],
    req: SearchRequest,
    embedder: EmbedderFor,
    *,
    store_vector: bool = True,
) -> Steps[SearchSetup]:
    """The spec of ``req`` on snapshot ``snap`` of ``coll``: every branch prepared, nothing counted yet."""
    from ..ingest.normalize import normalize
    from ..validation import parse_search_params

    sp = parse_search_params({**coll.search_defaults, **{k_: v for k_, v in req.params.items() if v is not None}})
    mode, k = req.mode, req.k
    stats = snap.get("stats") or {}
    filter_sql: sql.Composable = sql.SQL("TRUE")
    filter_params: dict[str, Any] = {}
    structured: dict[str, Any] | None = None
    if req.filter is not None:
        from .filters import compile_filter

        compiled = compile_filter(coll, req.filter)
        filter_sql, filter_params, structured = compiled.sql, compiled.params, compiled.structured
    # The segments this request can match (ranklock.segmenting): a filter that pins the collection's
    # window or partition field skips the others, decided from their keys alone.
    layout = Layout.of(snap)
    if structured:
        keep = route(layout.segments, Segmenting.of(coll.segmenting), structured)
        # None can match: read one (the filter admits nothing of it), so the statement keeps its shape.
        layout = layout.only(keep or [layout.segments[0].id])
    spec = SearchSpec(
        layout=layout,
        mode=mode,
        k=k,
        depth=max(sp.depth, k) if mode != "hybrid" else sp.depth,
        rrf_k=sp.rrf_k,
        query=normalize(req.query),
        language=coll.language,
        accent=coll.accent,
        max_chunks_per_doc=int(stats.get("max_chunks_per_doc", 1) or 1),
        as_of=parse_as_of(req.as_of),
        filter_sql=filter_sql,
        filter_params=filter_params,
        rules=rules_of(snap["manifest"]),
    )
    ctx = BranchContext(coll, snap, spec, sp, req.query, embedder, store_vector=store_vector)
    branches, warnings = yield from prepare_branches(ctx)
    return SearchSetup(spec.with_branches(branches), sp, tuple(warnings), ctx.timings)


def constrain_steps(
    dsn: str,
    spec: SearchSpec,
    snap: dict[str, Any],
    sp: SearchParams,
    *,
    timeout: float | None = None,
    build_counts: bool = True,
) -> Steps[tuple[SearchSpec, Scope]]:
    """Count what the hard constraints admit; the spec whose branches run the plans that count picks.

    ``dsn`` names the database read, for the value-count memo; ``build_counts=False`` writes nothing.
    """
    scope = yield from scope_steps(dsn, spec, snap, timeout=timeout, build_counts=build_counts)
    return spec.with_branches(tuple(b.constrained(scope, sp, spec) for b in spec.branches)), scope


def request_steps(
    dsn: str,
    primary: Database,
    settings: Settings,
    req: SearchRequest,
    embedder: EmbedderFor,
    *,
    started: float | None = None,
) -> Steps[SearchResult]:
    """One request, from its collection's name: checked, its collection and snapshot read, then searched.

    The one request path of ``Engine.search``, ``AsyncEngine.search`` and their replays;
    :func:`search_steps` says what ``dsn`` and ``primary`` are.
    """
    coll, snap = yield from _resolve_steps(req)
    result: SearchResult = yield from search_steps(dsn, primary, settings, coll, snap, req, embedder, started=started)
    return result


def sql_request_steps(
    dsn: str, settings: Settings, req: SearchRequest, embedder: EmbedderFor
) -> Steps[tuple[sql.Composed, dict[str, Any]]]:
    """The statement and values :func:`request_steps` would run, composed but not rendered; writes nothing.

    The one path of ``Engine.search_sql`` and ``AsyncEngine.search_sql``; the caller renders the
    text on its own connection.
    """
    coll, snap = yield from _resolve_steps(req)
    statement: tuple[sql.Composed, dict[str, Any]] = yield from search_sql_steps(
        dsn, settings, coll, snap, req, embedder
    )
    return statement


def _resolve_steps(req: SearchRequest) -> Steps[tuple[CollectionInfo, dict[str, Any]]]:
    from ..collection import read_collection_steps
    from ..snapshot.lifecycle import resolve_steps

    req.check()
    coll = yield from read_collection_steps(req.collection)
    snap = yield from resolve_steps(coll, req.snapshot)
    return coll, snap


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
    setup = yield from setup_steps(coll, snap, req, embedder, store_vector=False)
    # The plans search() would pick, from the same count, without building value counts.
    spec, _ = yield from constrain_steps(dsn, setup.spec, snap, setup.params, build_counts=False)
    # search() also returns the branches to the query log when it logs.
    return build_search_sql(dataclasses.replace(spec, capture_branches=bool(settings.log_queries)))


def execute_steps(
    spec: SearchSpec, statement: tuple[sql.Composed, dict[str, Any]], sp: SearchParams, scope: Scope
) -> Steps[SearchRun]:
    """Run ``statement`` (built from ``spec``); rescan exactly a branch that fell short, or flag it; judge.

    All on the one connection of the caller's :class:`Block`.
    """
    warnings: list[str] = []
    notes: dict[str, str | None] = {}
    truncation: str | None = None
    yield Fetch(*settings_sql(spec))
    rows = yield Fetch(*statement)
    for b in spec.branches:
        if not (b.can_fall_short and b.approximate):
            continue
        got = int(rows[0][shortfall_column(type(b))]) if rows else 0
        want = min(spec.depth, scope.documents)
        if got >= want:
            continue
        short = cast(FallsShort, b)
        if sp.exact_fallback:
            notes[b.name] = short.shortfall(got, want, fallback=True)
            spec = spec.with_branches(tuple(short.exact() if x is b else x for x in spec.branches))
            rows = yield Fetch(*build_search_sql(spec))
        else:
            truncation = "index_scan_budget"
            warnings.append(short.shortfall(got, want, fallback=False))
    truncation = judge(spec, scope, len(rows), truncation, warnings)
    params: dict[str, Any] = {"matching_chunks": scope.chunks, "exact_threshold": sp.exact_threshold}
    for b in spec.branches:
        if b.can_fall_short:
            params[cast(FallsShort, b).fallback_key] = notes.get(b.name)
    return SearchRun(
        rows=rows,
        spec=spec,
        scope=scope,
        complete=truncation is None,
        truncation=truncation,
        params=params,
        warnings=tuple(warnings),
    )


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
    """Run ``req`` on snapshot ``snap`` of ``coll``: the fused, tie-broken top ``k`` documents.

    The search reads the database the driver runs it on (a read replica when the facade routed
    it there), named by ``dsn`` (it keys the value-count memo); the query log, the result cache
    and new query vectors live on ``primary``, the sync primary the query log prunes on (in a
    worker thread when async).  ``started`` (a ``perf_counter`` value) is when the caller began,
    for ``total_ms``.
    """
    from ..store.replicas import current_route
    from ..store.timeout import effective_timeout
    from .log import SearchRecord
    from .ties import assign_tie_groups

    t0 = time.perf_counter() if started is None else started
    setup = yield from setup_steps(coll, snap, req, embedder)
    sp, timings = setup.params, dict(setup.timings)
    # Hard constraints: count the matching documents; each branch picks its plan (ranklock.search.scope).
    timeout = effective_timeout(settings.statement_timeout)
    spec, scope = yield from constrain_steps(dsn, setup.spec, snap, sp, timeout=timeout)
    # Query log, replay capture and result cache (ranklock.search.log): they decide whether the
    # statement reports each branch's candidates, so it is built once, after them.
    record = SearchRecord.start(primary, settings, coll=coll, snap=snap, spec=spec, request=req.as_log())
    spec = dataclasses.replace(spec, capture_branches=record.wants_branches)
    statement = build_search_sql(spec)
    record = record.with_statement(*statement)
    cached = yield from record.cached_steps(timings, t0)
    if cached is not None:
        return cached  # the result cache lives on the primary: served_by stays "primary"
    t1 = time.perf_counter()
    # Settings, the search, and an exact rescan if a branch came back short: one transaction on
    # one connection, every statement under the timeout.
    run: SearchRun = yield Block(execute_steps(spec, statement, sp, scope), timeout=timeout)
    record = record.with_branches(run.spec, run.rows)
    timings["sql_ms"] = (time.perf_counter() - t1) * 1000
    # Hits the rankers cannot tell apart share a tie group (ranklock.search.ties).
    hits, ties = assign_tie_groups(read_hits(run.rows))
    warnings = [*setup.warnings, *ties, *run.warnings]
    timings["total_ms"] = (time.perf_counter() - t0) * 1000
    route = current_route()
    if route is not None:
        timings["replica_wait_ms"] = route.waited_ms  # polling replicas' replay before this node served
        if route.warning:
            warnings.append(route.warning)
    filt = req.filter
    result = SearchResult(
        query=req.query,
        collection=req.collection,
        mode=req.mode,
        k=req.k,
        hits=hits,
        params=echo_params(run, coll, sp, timeout),
        snapshot=SnapshotRef(
            id=int(snap["id"]), manifest_hash=snap["manifest_hash"], segments=list(run.spec.layout.ids)
        ),
        filter=filt if filt is None or isinstance(filt, (str, dict, list)) else str(filt),
        as_of=spec.as_of.isoformat() if spec.as_of is not None else None,
        matching_count=run.scope.documents,
        complete=run.complete,
        truncation=run.truncation,
        warnings=warnings,
        timings=timings,
        served_by="primary" if route is None else route.served_by,
    )
    # After every field is final: the log and cache keep its digest; the result as logged (its query_id).
    logged: SearchResult = yield from record.finish_steps(result)
    return logged


def echo_params(run: SearchRun, coll: CollectionInfo, sp: SearchParams, timeout: float | None) -> dict[str, Any]:
    """The parameters a result echoes: what shaped it, in a fixed order (the order is part of its JSON bytes)."""
    spec = run.spec
    # Each registry branch's plan, in registry order; the keys of one that did not serve hold None.
    plans: dict[str, Any] = {}
    for kind in registry():
        served = spec.branch(kind.name)
        plans.update(served.echo() if served is not None else dict.fromkeys(kind.echo_keys))
    out: dict[str, Any] = {
        "depth": spec.depth,
        "rrf_k": spec.rrf_k,
        "lexical_ranker": sp.lexical_ranker,
        "query_syntax": sp.query_syntax,
        "language": coll.language,
        "accent": coll.accent,
        **plans,
        **run.params,
        "embedder_id": coll.embedder_id,
        "embedder_sha256": coll.embedder_sha256,
        "statement_timeout_s": timeout,
        # How many of the snapshot's segments the search read (fewer when its filter routed it,
        # ranklock.segmenting); their ids are in the result's ``snapshot.segments``.
        "segments": {"read": len(spec.layout.segments), "of": len(spec.layout.statistics)},
    }
    if sp.lexical_ranker == "bm25":
        out.update({"k1": sp.k1, "b": sp.b})
    return out
