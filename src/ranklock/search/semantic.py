"""The semantic branch: nearest chunks by cosine distance, exact or through an ANN index.

:func:`setup_semantic` fills the plan's vector fields from the query vector and
the snapshot's statistics; :func:`semantic_cte` is the branch's SQL;
:func:`apply_index_settings` sets the index's scan budget for one transaction.
Which strategy serves the branch (exact or the index) is decided by the
completeness count (ranklock.search.completeness.choose_strategy).
"""

from __future__ import annotations

import math
from typing import Any

import psycopg
from psycopg import sql

from ..collection import CollectionInfo
from ..settings import SearchParams
from .plan import SearchPlan, where_sql

__all__ = [
    "EF_SEARCH_BASE",
    "EF_SEARCH_MAX",
    "apply_index_settings",
    "choose_ef_search",
    "index_settings_sql",
    "semantic_cte",
    "setup_semantic",
]

#: hnsw.ef_search of an unfiltered query (and the least of any query): five times
#: the default fetch (depth 40), a candidate list several times the results it
#: must yield.  Measured on 1M generated chunks (issue 14): at 100, one query of
#: 50 ended its walk in the wrong part of the graph (recall@10 0); at 200 none
#: did (recall 0.992, ~5 ms more).
EF_SEARCH_BASE = 200
#: pgvector's largest hnsw.ef_search.
EF_SEARCH_MAX = 1000


def setup_semantic(plan: SearchPlan, coll: CollectionInfo, snap: dict[str, Any], qvec: Any) -> None:
    """Point the plan's vector branch at ``qvec``: strategy, over-fetch and chunks per document."""
    plan.qvec = qvec
    if coll.index_kind == "exact":
        plan.vector_strategy = "exact"
    else:
        plan.vector_strategy = coll.index_kind
    max_chunks = int((snap.get("stats") or {}).get("max_chunks_per_doc", 1) or 1)
    plan.sem_fetch = max(plan.depth, plan.depth * min(max_chunks, 4))
    plan.max_chunks_per_doc = max_chunks


def choose_ef_search(plan: SearchPlan, sp: SearchParams, matching_chunks: int, total_chunks: int) -> int:
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
    return int(min(EF_SEARCH_MAX, max(EF_SEARCH_BASE, math.ceil(plan.sem_fetch / selectivity))))


def semantic_cte(plan: SearchPlan, rrf: sql.Composable, window: sql.Composable) -> sql.Composable:
    """The vector branch's CTEs: candidates (exact scan or ANN index), best chunk per document, rank.

    ``rrf`` and ``window`` give each document its fusion weight (ranklock.search.fusion.rrf_weight_sql).
    """
    if plan.vector_strategy == "exact":
        # Every filtered chunk is scored: the sort is over a subquery's output,
        # by ``distance + 0``, an expression no ANN index can supply (an index
        # orders only by the bare ``embedding <=> const``): a scan and a top-N sort,
        # exact and complete by construction; ``+ 0`` changes no value.  The
        # sort keeps depth * max_chunks_per_doc chunks, which always hold the
        # best chunk of each of the top `depth` documents: at most
        # (depth - 1) * max_chunks chunks of better-ranked documents can
        # precede it.
        # (OFFSET 0 keeps the subquery whole, so each distance is computed once.)
        cand: sql.Composable = sql.SQL(
            "SELECT doc_id, chunk, dist FROM ("
            "SELECT c.doc_id, c.chunk, (c.embedding <=> %(qvec)s)::float8 AS dist FROM {table} AS c WHERE {where} "
            "OFFSET 0) AS e ORDER BY dist + 0, doc_id, chunk LIMIT %(sem_exact_fetch)s::bigint"
        ).format(table=plan.table, where=where_sql(plan))
    else:
        # ORDER BY the bare distance so the planner can use the ANN index; the
        # over-fetch leaves room for several chunks of one document.  Ties
        # are broken after the index returns, below.
        cand = sql.SQL(
            "SELECT c.doc_id, c.chunk, (c.embedding <=> %(qvec)s)::float8 AS dist FROM {table} AS c "
            "WHERE {where} ORDER BY c.embedding <=> %(qvec)s LIMIT %(sem_fetch)s::bigint"
        ).format(table=plan.table, where=where_sql(plan))
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
    ).format(cand=cand, rrf=rrf, window=window)


def apply_index_settings(conn: psycopg.Connection[Any], plan: SearchPlan, sp: SearchParams) -> None:
    """Set the vector index's scan settings (and jit, work_mem) for the caller's transaction only."""
    q, p = index_settings_sql(plan, sp)
    conn.execute(q, p)


def index_settings_sql(plan: SearchPlan, sp: SearchParams) -> tuple[sql.Composed, list[str]]:
    """The one statement :func:`apply_index_settings` runs (shared by the sync and async search)."""
    # Transaction-local (set_config(..., true)): a pooled connection never
    # carries one query's budget into the next.  JIT compilation costs tens of
    # milliseconds and only pays off for long analytic queries, never here.
    # All in one round trip.
    # work_mem: BM25 over very common terms aggregates 10^5-10^6 postings; at
    # the default 4 MB the hash aggregate spills to disk.
    settings: list[tuple[str, str]] = [("jit", "off"), ("work_mem", "64MB")]
    if plan.uses_semantic and plan.vector_strategy == "hnsw":
        settings += [
            ("hnsw.ef_search", str(plan.ef_search or EF_SEARCH_BASE)),
            ("hnsw.iterative_scan", sp.iterative_scan),
            ("hnsw.max_scan_tuples", str(sp.max_scan_tuples)),
        ]
    elif plan.uses_semantic and plan.vector_strategy == "ivfflat":
        # IVFFlat supports only relaxed_order iterative scans.
        mode = "relaxed_order" if sp.iterative_scan != "off" else "off"
        settings += [("ivfflat.probes", str(sp.probes)), ("ivfflat.iterative_scan", mode)]
    q = sql.SQL("SELECT {}").format(sql.SQL(", ").join(sql.SQL("set_config(%s, %s, true)") for _ in settings))
    return q, [x for pair in settings for x in pair]
