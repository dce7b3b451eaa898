"""One search, top to bottom: context, plan, compile, execute, assemble, post-stages, sinks.

Every interface's search is this one generator of steps (ranklock.store.steps), driven by the
sync ``Engine`` (``run_steps``) or the ``AsyncEngine`` (``AsyncDatabase.run``), so both return
the same bytes.  Each stage is a step over frozen values, in this order, and none calls back::

    SearchRequest + Stages
      │ context    collection and snapshot rows: kept per process (ranklock.search.context)
      ▼
    plan         the spec (filter compiled, segments routed), every branch prepared (the
      │          lexical probe, the query vector), the hard constraints counted      ── round trip 1 ┐
      ▼          (all read before by this process, or no constraint: no round trip)                │
    compile      the one statement, built once (and the result cache's key)                          │
      ▼                                                                                              │
    execute      guard, read gate and settings, the statement                          ── round trip 2 ┤
      │          (an index scan that came back short: rescanned exactly, one more)                  │
      ▼                                                                                              │
    assemble     hits, tie groups, echoed parameters, completeness                                   │
      ▼                                                                                              │
    post         rerank (the reranker off the event loop), paging                                    │
      ▼                                                                                              │
    sinks        the query log, a new query vector, the result cache                  ── round trip 3 ┘

A guard that no longer holds (the collection or snapshot changed since this process read
them) starts the search over once from freshly read rows.  A connection that breaks under a
read is retried once on a new one, and the result says so.  :func:`sql_steps` is the
``*_sql`` twin: the plan and compile stages only, writing nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import psycopg
from psycopg import sql

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..errors import ConnectionLost, QueryError, RanklockError, SnapshotError
from ..segmenting import Segmenting, route
from ..settings import SearchParams, Settings
from ..snapshot.rules import rules_of
from ..store.steps import Batch, Fetch, Offload, Steps, gather
from .branches import prepare_branches, registry
from .completeness import judge
from .context import Contexts, SearchContext, StaleContext
from .fusion import build_search_sql, read_hits, settings_fetches, shortfall_column
from .request import SearchRequest, parse_as_of
from .results import SearchResult, SnapshotRef
from .scope import scope_steps
from .spec import BranchContext, FallsShort, Scope, SearchSpec

if TYPE_CHECKING:
    from ..rerank.base import Reranker
    from ..store.database import Database
    from ..store.replicas import Route

__all__ = [
    "Plan",
    "Search",
    "Services",
    "Stages",
    "echo_params",
    "plan_steps",
    "request_steps",
    "search_steps",
    "sql_steps",
]

#: The collection's embedder, checked against its weights (the facade owns the loaded models).
EmbedderFor = Callable[[CollectionInfo], Embedder]

#: How many times a search starts over because its collection or snapshot changed under it: a third
#: change within one search is a write storm, said as such.
RESTARTS = 2


@dataclass(frozen=True)
class Stages:
    """What runs around the statement: rerank the top ``rerank`` fused hits, then skip ``offset`` of them."""

    rerank: int | None = None
    offset: int = 0

    def check(self, k: int) -> None:
        from .inputs import check_offset

        if self.offset:
            check_offset(self.offset, k)
        if self.rerank is not None:
            from .rerank import check_rerank

            check_rerank(self.rerank)

    def fused_k(self, k: int) -> int:
        """How many fused hits the statement must return for a page of ``k`` after these stages."""
        return max(k + self.offset, self.rerank or 0)

    def as_log(self) -> dict[str, Any]:
        """The stages as the query log keeps them beside the request: only those that ran (none: nothing)."""
        out: dict[str, Any] = {}
        if self.rerank is not None:
            out["rerank"] = self.rerank
        if self.offset:
            out["offset"] = self.offset
        return out


@dataclass(frozen=True)
class Services:
    """What the engine lends a search: its settings, the primary, the models, what this process keeps.

    ``dsn`` names the database the search reads (a replica's when routed there); ``primary`` is the
    sync primary the query log's retention prunes on.
    """

    settings: Settings
    primary: Database
    dsn: str
    embedder: EmbedderFor
    contexts: Contexts
    reranker: Callable[[], Reranker] | None = None
    #: The replica this search was routed to (None: the primary), resolved before any stage.
    route: Route | None = None


@dataclass(frozen=True)
class Plan:
    """What the plan stage made: the spec whose branches run the plans the count picked, and what it learned."""

    spec: SearchSpec
    scope: Scope
    params: SearchParams
    warnings: tuple[str, ...]
    timings: Mapping[str, float]
    #: Writes the sinks make (a query vector embedded for this search, for the embedding cache).
    writes: tuple[Fetch, ...] = ()


@dataclass(frozen=True)
class Run:
    """What executing the statement gave: its rows, the spec that served them, and how complete they are."""

    rows: list[dict[str, Any]]
    #: The spec of the statement that served (an exact rescan replaces the branch that fell short).
    spec: SearchSpec
    complete: bool
    truncation: str | None
    params: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


# -- the request ---------------------------------------------------------------------------


def request_steps(
    services: Services, req: SearchRequest, stages: Stages = Stages(), *, started: float | None = None
) -> Steps[SearchResult]:
    """One request, from its collection's name: checked, its context resolved, then searched (:func:`search_steps`)."""
    t0 = time.perf_counter() if started is None else started
    req.check()
    stages.check(req.k)
    fresh = False
    for attempt in range(RESTARTS + 1):
        ctx = yield from services.contexts.steps(req.collection, req.snapshot, fresh=fresh)
        try:
            try:
                result: SearchResult = yield from search_steps(services, ctx, req, stages, started=t0)
                return result
            except (RanklockError, psycopg.Error):
                if fresh:
                    raise
                # Refused on what this process kept (a field the collection did not have, statistics of an
                # older layout, a table a purge or a rebuild replaced): said only once the guard says it is
                # still so; otherwise the search starts over from the rows as they are now.
                rows = yield ctx.guard.fetch()
                ctx.guard.check(rows)
                raise
        except StaleContext:
            fresh = True
            if attempt == RESTARTS:
                break
    raise SnapshotError(
        f"collection {req.collection!r} changed {RESTARTS + 1} times while this search ran (ingests or purges "
        "in quick succession); nothing was returned. Search again."
    )


def search_steps(
    services: Services,
    ctx: SearchContext,
    req: SearchRequest,
    stages: Stages = Stages(),
    *,
    started: float | None = None,
) -> Steps[SearchResult]:
    """Run ``req`` in ``ctx``: the fused, tie-broken top ``k``, through every stage (see the module docstring)."""
    from ..store.timeout import effective_timeout
    from .log import SearchRecord

    t0 = time.perf_counter() if started is None else started
    timeout = effective_timeout(services.settings.statement_timeout)
    fused_req = dataclasses.replace(req, k=stages.fused_k(req.k)) if stages != Stages() else req
    plan: Plan = yield from plan_steps(services, ctx, fused_req, timeout=timeout)
    # The query log and a replay decide whether the statement reports each branch's candidates.
    record = SearchRecord.start(
        services.primary, services.settings, services.route, ctx, plan.spec, request={**req.as_log(), **stages.as_log()}
    )
    spec = dataclasses.replace(plan.spec, capture_branches=record.wants_branches)
    statement = build_search_sql(spec)
    record = record.with_statement(*statement)
    timings = dict(plan.timings)
    hit = yield from record.cached_steps()
    if hit is None:
        t1 = time.perf_counter()
        run: Run = yield from execute_steps(ctx, spec, statement, plan, timeout=timeout)
        timings["sql_ms"] = (time.perf_counter() - t1) * 1000
        record = record.with_branches(run.spec, run.rows)
        fused = assemble(services, ctx, fused_req, plan, run, timeout)
    else:
        # The result cache lives on the primary: served_by stays "primary".
        fused, record = hit
        timings.update(fused.timings)
    cached = hit is not None
    served = yield from post_steps(services, fused, req.k, stages)
    timings["total_ms"] = (time.perf_counter() - t0) * 1000
    if services.route is not None:
        timings["replica_wait_ms"] = services.route.waited_ms
    served = served.model_copy(update={"timings": timings})
    logged: SearchResult = yield from record.finish_steps(served, fused=fused, cached=cached, writes=plan.writes)
    return logged


# -- plan ------------------------------------------------------------------------------------


def plan_steps(
    services: Services,
    ctx: SearchContext,
    req: SearchRequest,
    *,
    timeout: float | None,
    store_vector: bool = True,
) -> Steps[Plan]:
    """The spec of ``req`` with every branch prepared and the constraints counted, in one round trip.

    The guard, each branch's reads (the lexical probe, the query vector) and the count travel
    together (``gather``); a probe or vector this process has already read costs nothing.
    ``store_vector=False`` (``search_sql``) leaves a new query vector unstored.
    """
    from ..ingest.normalize import normalize
    from ..validation import parse_search_params

    coll, snap = ctx.coll, ctx.snap
    sp = parse_search_params({**coll.search_defaults, **{k_: v for k_, v in req.params.items() if v is not None}})
    mode, k = req.mode, req.k
    stats = snap.get("stats") or {}
    filter_sql: sql.Composable = sql.SQL("TRUE")
    filter_params: dict[str, Any] = {}
    fields: tuple[str, ...] = ()
    layout = ctx.layout
    if req.filter is not None:
        from .filters import compile_filter

        compiled = compile_filter(coll, req.filter)
        filter_sql, filter_params, fields = compiled.sql, compiled.params, compiled.fields
        if compiled.structured:
            # The segments this request can match (ranklock.segmenting): a filter that pins the collection's
            # window or partition field skips the others, decided from their keys alone.
            keep = route(layout.segments, Segmenting.of(coll.segmenting), compiled.structured)
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
        filter_fields=fields,
        rules=rules_of(snap["manifest"]),
    )
    bctx = BranchContext(
        coll,
        snap,
        spec,
        sp,
        req.query,
        services.embedder,
        store_vector=store_vector,
        memo=services.contexts,
        version=ctx.guard,
    )
    try:
        (branches, warnings), scope = yield from gather(
            prepare_branches(bctx), scope_steps(spec, snap), timeout=timeout
        )
    except ConnectionLost as exc:
        # The server was reached again (or restarted) already: reads are safe to send once more.
        bctx = dataclasses.replace(bctx, timings={}, writes=[])
        (branches, warnings), scope = yield from gather(
            prepare_branches(bctx), scope_steps(spec, snap), timeout=timeout
        )
        bctx.notes.append(_retried(exc))
    spec = spec.with_branches(tuple(b.constrained(scope, sp, spec) for b in branches))
    return Plan(spec, scope, sp, (*bctx.notes, *warnings), dict(bctx.timings), tuple(bctx.writes))


# -- execute ---------------------------------------------------------------------------------


def execute_steps(
    ctx: SearchContext,
    spec: SearchSpec,
    statement: tuple[sql.Composed, dict[str, Any]],
    plan: Plan,
    *,
    timeout: float | None,
) -> Steps[Run]:
    """The statement in one round trip with the guard, the read gate and the settings; a short branch rescanned.

    A connection that breaks under it is replaced and the round trip sent once more (a read: safe).
    """
    warnings: list[str] = []
    notes: dict[str, str | None] = {}
    truncation: str | None = None
    rows = yield from _statement_steps(ctx, spec, statement, timeout, warnings)
    for b in spec.branches:
        if not (b.can_fall_short and b.approximate):
            continue
        got = int(rows[0][shortfall_column(type(b))]) if rows else 0
        want = min(spec.depth, plan.scope.documents)
        if got >= want:
            continue
        short = cast(FallsShort, b)
        if plan.params.exact_fallback:
            notes[b.name] = short.shortfall(got, want, fallback=True)
            spec = spec.with_branches(tuple(short.exact() if x is b else x for x in spec.branches))
            rows = yield from _statement_steps(ctx, spec, build_search_sql(spec), timeout, warnings)
        else:
            truncation = "index_scan_budget"
            warnings.append(short.shortfall(got, want, fallback=False))
    truncation = judge(spec, plan.scope, len(rows), truncation, warnings)
    params: dict[str, Any] = {"matching_chunks": plan.scope.chunks, "exact_threshold": plan.params.exact_threshold}
    for b in spec.branches:
        if b.can_fall_short:
            params[cast(FallsShort, b).fallback_key] = notes.get(b.name)
    return Run(rows, spec, truncation is None, truncation, params, tuple(warnings))


def _statement_steps(
    ctx: SearchContext,
    spec: SearchSpec,
    statement: tuple[sql.Composed, dict[str, Any]],
    timeout: float | None,
    warnings: list[str],
) -> Steps[list[dict[str, Any]]]:
    """Guard, gate and settings, then the statement: one batch (one implicit transaction, under the timeout)."""
    batch = Batch((ctx.guard.fetch(), *settings_fetches(spec), Fetch(*statement)), timeout=timeout)
    try:
        values = yield batch
    except ConnectionLost as exc:
        # The server was reached again (or restarted) already: a read is safe to send once more.
        values = yield batch
        warnings.append(_retried(exc))
    ctx.guard.check(values[0])
    rows: list[dict[str, Any]] = values[-1]
    return rows


def _retried(exc: ConnectionLost) -> str:
    """The warning of a read sent again because its connection broke (what broke, and that it was retried)."""
    what = str(exc).split(";")[0].removesuffix(".")
    return f"{what}; ranklock reconnected and ran that part of the search again, once"


# -- assemble and post-stages ------------------------------------------------------------------


def assemble(
    services: Services, ctx: SearchContext, req: SearchRequest, plan: Plan, run: Run, timeout: float | None
) -> SearchResult:
    """The result of ``run``: hits, tie groups, echoed parameters, snapshot and completeness."""
    from .ties import assign_tie_groups

    # Hits the rankers cannot tell apart share a tie group (ranklock.search.ties).
    hits, ties = assign_tie_groups(read_hits(run.rows))
    warnings = [*plan.warnings, *ties, *run.warnings]
    route = services.route
    if route is not None and route.warning:
        warnings.append(route.warning)
    filt = req.filter
    return SearchResult(
        query=req.query,
        collection=req.collection,
        mode=req.mode,
        k=req.k,
        hits=hits,
        params=echo_params(run, ctx.coll, plan.params, timeout),
        snapshot=SnapshotRef(
            id=int(ctx.snap["id"]), manifest_hash=ctx.snap["manifest_hash"], segments=list(run.spec.layout.ids)
        ),
        filter=filt if filt is None or isinstance(filt, (str, dict, list)) else str(filt),
        as_of=plan.spec.as_of.isoformat() if plan.spec.as_of is not None else None,
        matching_count=plan.scope.documents,
        complete=run.complete,
        truncation=run.truncation,
        warnings=warnings,
        served_by="primary" if route is None else route.served_by,
    )


def post_steps(services: Services, fused: SearchResult, k: int, stages: Stages) -> Steps[SearchResult]:
    """The stages after fusion: the top ``rerank`` reranked (the rest after them), then the page at ``offset``."""
    result = fused
    if stages.rerank is not None:
        from .rerank import rerank_result

        if services.reranker is None:
            raise QueryError("rerank was asked but this engine has no reranker; pass Engine(reranker=...).")
        reranker = services.reranker()
        n = stages.rerank
        # A model or an HTTP call: off the event loop when async.
        result = yield Offload(lambda: rerank_result(fused, reranker, n, k + stages.offset))
    if stages.offset:
        result = result.page(stages.offset, k)
    return result


def echo_params(run: Run, coll: CollectionInfo, sp: SearchParams, timeout: float | None) -> dict[str, Any]:
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


# -- the *_sql twin ----------------------------------------------------------------------------


def sql_steps(services: Services, req: SearchRequest) -> Steps[tuple[sql.Composed, dict[str, Any]]]:
    """The statement and values :func:`request_steps` would run, composed but not rendered; writes nothing.

    The caller renders the text on its own connection.
    """
    from .log import wants_branches

    req.check()
    for attempt in range(RESTARTS + 1):
        ctx = yield from services.contexts.steps(req.collection, req.snapshot, fresh=attempt > 0)
        try:
            plan = yield from plan_steps(services, ctx, req, timeout=None, store_vector=False)
            # Nothing executes the statement to check the guard on the way: check it here.
            ctx.guard.check((yield ctx.guard.fetch()))
        except StaleContext:
            continue
        # search() also returns the branches to the query log when it logs.
        spec = dataclasses.replace(plan.spec, capture_branches=wants_branches(services.settings))
        return build_search_sql(spec)
    raise SnapshotError(
        f"collection {req.collection!r} changed {RESTARTS + 1} times while its statement was built; search again."
    )


# -- the blocking driver -----------------------------------------------------------------------


class Search:
    """The pipeline over one engine's database, blocking: what ``Engine.search`` is, and what the features get.

    Features above the search (Ask, plans, evaluation, replays) are handed this object, never the
    facade, so a search they run enters the pipeline once and never calls back up.  With read
    replicas, the router picks the node first (ranklock.store.replicas) and the route is part of
    the services every stage sees.
    """

    def __init__(
        self,
        primary: Database,
        settings: Settings,
        contexts: Contexts,
        embedder: EmbedderFor,
        *,
        router: Any = None,
        reranker: Callable[[], Reranker] | None = None,
    ) -> None:
        self.primary, self.settings, self.contexts = primary, settings, contexts
        self.embedder, self.router, self.reranker = embedder, router, reranker

    def services(self) -> Services:
        """The services of a search on this thread's node (a replica when the router bound one)."""
        from ..store.replicas import current_route

        route = current_route()
        db = self.primary if route is None else route.db
        return Services(self.settings, self.primary, db.dsn, self.embedder, self.contexts, self.reranker, route)

    def run(self, req: SearchRequest, stages: Stages = Stages()) -> SearchResult:
        """Run ``req`` through every stage: on a replica that has replayed the primary, else on the primary."""
        from ..store.steps import run_steps

        t0 = time.perf_counter()

        def one() -> SearchResult:
            services = self.services()
            db = self.primary if services.route is None else services.route.db
            return run_steps(db, request_steps(services, req, stages, started=t0), primary=self.primary)

        if self.router is None:
            return one()
        result: SearchResult = self.router.run(req.collection, req.snapshot, one)
        return result

    def __call__(
        self, name: str, query: str, *, rerank: int | None = None, offset: int = 0, **keywords: Any
    ) -> SearchResult:
        """``Engine.search``'s call: the request's keywords (ranklock.search.request), ``rerank`` and ``offset``."""
        return self.run(SearchRequest.of(name, query, **keywords), Stages(rerank, offset))

    def steps(self, req: SearchRequest, stages: Stages = Stages()) -> Steps[SearchResult]:
        """The pipeline as steps on the primary, for a feature that drives its own steps (a replay)."""
        return request_steps(self.services(), req, stages)
