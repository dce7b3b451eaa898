"""The semantic branch: nearest chunks by cosine distance, exact or through an ANN index.

:meth:`SemanticBranch.prepare` embeds the query (through the embedding cache)
and fills the branch from the snapshot's statistics; which strategy serves it
(exact or the index) is decided once the completeness count knows how many
chunks the hard constraints admit (:meth:`SemanticBranch.constrained`), and an
index scan that came back short is rescanned exactly (:meth:`SemanticBranch.exact`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from psycopg import sql

from ..embed.base import Embedder
from ..settings import SearchParams
from ..store.steps import Offload, Steps
from .rrf import rrf_weight_sql, tie_window
from .spec import SearchSpec, Signal, where_sql

if TYPE_CHECKING:
    from .spec import BranchContext, Scope

__all__ = [
    "EF_SEARCH_BASE",
    "EF_SEARCH_MAX",
    "SemanticBranch",
    "choose_ef_search",
    "choose_strategy",
]

#: hnsw.ef_search of an unfiltered query (and the least of any query): five times
#: the default fetch (depth 40), a candidate list several times the results it
#: must yield.  Measured on 1M generated chunks (issue 14): at 100, one query of
#: 50 ended its walk in the wrong part of the graph (recall@10 0); at 200 none
#: did (recall 0.992, ~5 ms more).
EF_SEARCH_BASE = 200
#: pgvector's largest hnsw.ef_search.
EF_SEARCH_MAX = 1000


def choose_ef_search(sem_fetch: int, sp: SearchParams, matching_chunks: int, total_chunks: int) -> int:
    """hnsw.ef_search for this query: the caller's, else sized from the filter's measured selectivity.

    HNSW walks the whole graph whatever the filter, so of the ``ef`` nearest
    candidates it keeps only a fraction ``s`` (the share of chunks the filter
    and ``as_of`` admit, counted exactly before the search) pass.  The list is
    made wide enough that the passing candidates alone can fill the branch's
    fetch: ``ef = max(EF_SEARCH_BASE, ceil(sem_fetch / s))``, at most
    ``EF_SEARCH_MAX``; the iterative scan goes on past that when it must.  An
    unfiltered query keeps ``EF_SEARCH_BASE``.  The same count always gives the
    same ``ef``, so the choice is as deterministic as the count.
    """
    if sp.ef_search is not None:
        return sp.ef_search
    if matching_chunks <= 0 or total_chunks <= 0:
        return EF_SEARCH_BASE
    selectivity = min(1.0, matching_chunks / total_chunks)
    return int(min(EF_SEARCH_MAX, max(EF_SEARCH_BASE, math.ceil(sem_fetch / selectivity))))


def choose_strategy(index_kind: str, matching_chunks: int, sp: SearchParams) -> str:
    """``exact`` for a small filtered set or an index-less collection, else the collection's index."""
    if index_kind == "exact" or matching_chunks <= sp.exact_threshold:
        return "exact"
    return index_kind


@dataclass(frozen=True)
class SemanticBranch:
    """The vector branch: cosine distance to the query's embedding, exact or through the ANN index."""

    name: ClassVar[str] = "semantic"
    alias: ClassVar[str] = "s"
    cte: ClassVar[str] = "sem"
    signal: ClassVar[Signal] = Signal("semantic_rank", "semantic_distance", "dist", "float8", "distance", "d {:.3f}")
    ranks_every_document: ClassVar[bool] = True
    can_fall_short: ClassVar[bool] = True
    fallback_key: ClassVar[str] = "vector_fallback"
    #: The keys of :meth:`echo`, all None in a result this branch did not serve.
    echo_keys: ClassVar[tuple[str, ...]] = (
        "vector_strategy",
        "ef_search",
        "iterative_scan",
        "max_scan_tuples",
        "probes",
    )

    qvec: Any
    #: The collection's vector index: "hnsw", "ivfflat" or "exact".
    index_kind: str
    #: "hnsw"/"ivfflat": index scan with over-fetch; "exact": full scan of the filtered set.
    strategy: str
    #: Chunks an index scan fetches: room for several chunks of one document.
    sem_fetch: int
    #: hnsw.ef_search for this query (:func:`choose_ef_search`); None: not chosen (not an HNSW scan).
    iterative_scan: str
    max_scan_tuples: int
    probes: int
    ef_search: int | None = None

    @classmethod
    def prepare(cls, ctx: BranchContext) -> Steps[tuple[SemanticBranch, None]]:
        """The branch for ``ctx``'s query: its embedding (from the cache when it was embedded before)."""
        from .embedding import query_vector_steps

        t = time.perf_counter()
        # Resolving the embedder may load a model (seconds of CPU): off the event loop when async.
        emb: Embedder = yield Offload(lambda: ctx.embedder(ctx.coll))
        qvec = yield from query_vector_steps(
            ctx.coll,
            emb,
            ctx.spec.query,
            store=ctx.store_vector,
            memo=ctx.memo.vectors if ctx.memo is not None else None,
            writes=ctx.writes,
        )
        ctx.timings["embed_ms"] = (time.perf_counter() - t) * 1000
        sp, depth = ctx.params, ctx.spec.depth
        branch = cls(
            qvec=qvec,
            index_kind=ctx.coll.index_kind,
            strategy="exact" if ctx.coll.index_kind == "exact" else ctx.coll.index_kind,
            sem_fetch=max(depth, depth * min(ctx.spec.max_chunks_per_doc, 4)),
            iterative_scan=sp.iterative_scan,
            max_scan_tuples=sp.max_scan_tuples,
            probes=sp.probes,
        )
        return branch, None

    def constrained(self, scope: Scope, sp: SearchParams, spec: SearchSpec) -> SemanticBranch:  # noqa: ARG002 (the Branch protocol)
        """The strategy the count picks, and for HNSW the ``ef_search`` its selectivity asks for."""
        strategy = choose_strategy(self.index_kind, scope.chunks, sp)
        ef_search = self.ef_search
        if strategy == "hnsw":
            ef_search = choose_ef_search(self.sem_fetch, sp, scope.chunks, scope.total_chunks)
        return dataclasses.replace(self, strategy=strategy, ef_search=ef_search)

    @property
    def approximate(self) -> bool:
        return self.strategy != "exact"

    def exact(self) -> SemanticBranch:
        return dataclasses.replace(self, strategy="exact")

    def ctes(self, spec: SearchSpec) -> sql.Composable:
        """The vector branch's CTEs: candidates (exact scan or ANN index), best chunk per document, rank."""
        if spec.layout.distributed:
            # Every shard's top documents (exact) or top chunks (an index), merged in the order one node
            # gives them (ranklock.search.sharded), then ranked as on one node.
            fetch = sql.SQL("%(sem_exact_fetch)s") if self.strategy == "exact" else sql.SQL("%(sem_fetch)s")
            cand: sql.Composable = sql.SQL(
                "SELECT doc_id, chunk, score AS dist FROM shard_rows WHERE branch = {name} "
                "ORDER BY score, doc_id, chunk LIMIT {fetch}::bigint"
            ).format(name=sql.Literal(self.name), fetch=fetch)
        elif self.strategy == "exact":
            # Every filtered chunk is scored: the sort is over a subquery's output,
            # by ``distance + 0``, an expression no ANN index can supply (an index
            # orders only by the bare ``embedding <=> const``): a scan and a top-N sort,
            # exact and complete by construction; ``+ 0`` changes no value.  The
            # sort keeps depth * max_chunks_per_doc chunks, which always hold the
            # best chunk of each of the top `depth` documents: at most
            # (depth - 1) * max_chunks chunks of better-ranked documents can
            # precede it.
            # (OFFSET 0 keeps the subquery whole, so each distance is computed once.)
            cand = sql.SQL(
                "SELECT doc_id, chunk, dist FROM ("
                "SELECT c.doc_id, c.chunk, (c.embedding <=> %(qvec)s)::float8 AS dist FROM {table} AS c WHERE {where} "
                "OFFSET 0) AS e ORDER BY dist + 0, doc_id, chunk LIMIT %(sem_exact_fetch)s::bigint"
            ).format(table=spec.table, where=where_sql(spec))
        else:
            # ORDER BY the bare distance so the planner can use the ANN index; the
            # over-fetch leaves room for several chunks of one document.  Ties
            # are broken after the index returns, below.
            cand = sql.SQL(
                "SELECT c.doc_id, c.chunk, (c.embedding <=> %(qvec)s)::float8 AS dist FROM {table} AS c "
                "WHERE {where} ORDER BY c.embedding <=> %(qvec)s LIMIT %(sem_fetch)s::bigint"
            ).format(table=spec.table, where=where_sql(spec))
        return sql.SQL(
            """sem_cand AS MATERIALIZED ({cand}),
sem_best AS (
    SELECT doc_id, chunk, dist,
           row_number() OVER (PARTITION BY doc_id ORDER BY dist, chunk) AS rn
    FROM sem_cand
),
sem_top AS (
    SELECT doc_id, chunk, dist,
           rank() OVER (ORDER BY dist) AS rank,
           row_number() OVER (ORDER BY dist, doc_id, chunk) AS pos
    FROM sem_best WHERE rn = 1
    ORDER BY dist, doc_id, chunk
    LIMIT %(depth)s::bigint
),
sem AS (SELECT doc_id, chunk, dist, rank, {rrf} AS rrf FROM sem_top{window})"""
        ).format(cand=cand, rrf=rrf_weight_sql(spec), window=tie_window(spec))

    def shard_hits(self, spec: SearchSpec) -> sql.Composable:
        """Its top list on one shard: exact, the top ``depth`` documents by their best chunk (``sem_best``,
        ``sem_top``); through the index, its top ``sem_fetch`` chunks, as one node's index scan returns them."""
        name = sql.Literal(self.name)
        if self.strategy != "exact":
            return sql.SQL(
                "SELECT {name} AS branch, c.seg, c.row_id, c.doc_id, c.chunk, (c.embedding <=> %(qvec)s)::float8 "
                "AS score FROM {table} AS c WHERE {where} ORDER BY c.embedding <=> %(qvec)s LIMIT %(sem_fetch)s::bigint"
            ).format(name=name, table=spec.table, where=where_sql(spec))
        return sql.SQL(
            """SELECT {name} AS branch, b.seg, b.row_id, b.doc_id, b.chunk, b.dist AS score FROM (
    SELECT e.seg, e.row_id, e.doc_id, e.chunk, e.dist,
           row_number() OVER (PARTITION BY e.doc_id ORDER BY e.dist, e.chunk) AS rn
    FROM (
        SELECT seg, row_id, doc_id, chunk, dist FROM (
            SELECT c.seg, c.row_id, c.doc_id, c.chunk, (c.embedding <=> %(qvec)s)::float8 AS dist
            FROM {table} AS c WHERE {where} OFFSET 0) AS d
        ORDER BY dist + 0, doc_id, chunk LIMIT %(sem_exact_fetch)s::bigint
    ) AS e
) AS b
WHERE b.rn = 1 ORDER BY b.dist, b.doc_id, b.chunk LIMIT %(depth)s::bigint"""
        ).format(name=name, table=spec.table, where=where_sql(spec))

    def params(self, spec: SearchSpec) -> Mapping[str, Any]:
        if self.strategy != "exact":
            return {"qvec": self.qvec, "sem_fetch": self.sem_fetch}
        return {"qvec": self.qvec, "sem_exact_fetch": spec.depth * max(1, spec.max_chunks_per_doc)}

    def settings(self) -> list[tuple[str, str]]:
        """The index's scan budget, for the search's transaction only."""
        if self.strategy == "hnsw":
            return [
                ("hnsw.ef_search", str(self.ef_search or EF_SEARCH_BASE)),
                ("hnsw.iterative_scan", self.iterative_scan),
                ("hnsw.max_scan_tuples", str(self.max_scan_tuples)),
            ]
        if self.strategy == "ivfflat":
            # IVFFlat supports only relaxed_order iterative scans.
            mode = "relaxed_order" if self.iterative_scan != "off" else "off"
            return [("ivfflat.probes", str(self.probes)), ("ivfflat.iterative_scan", mode)]
        return []

    def shortfall(self, got: int, want: int, *, fallback: bool) -> str:
        """What a scan that handed fusion ``got`` of ``want`` documents says: a note, or the warning."""
        if fallback:
            return f"index_scan_budget: {self.strategy} returned {got} of {want} documents; rescanned exactly"
        return (
            f"the {self.strategy} index returned {got} of {want} documents before its scan budget "
            f"ran out; raise max_scan_tuples (now {self.max_scan_tuples}) or allow exact_fallback"
        )

    def echo(self) -> dict[str, Any]:
        """The strategy and scan settings a result echoes in ``params``."""
        return {
            "vector_strategy": self.strategy,
            "ef_search": self.ef_search if self.strategy == "hnsw" else None,
            "iterative_scan": self.iterative_scan if self.strategy in ("hnsw", "ivfflat") else None,
            "max_scan_tuples": self.max_scan_tuples if self.strategy == "hnsw" else None,
            "probes": self.probes if self.strategy == "ivfflat" else None,
        }
