"""The hybrid search statement: lexical branch, semantic branch, RRF fusion.

One SQL statement, composed with :mod:`psycopg.sql`, every value bound as a
named parameter.  Ties break by ``doc_id`` (byte order, ``COLLATE "C"``) and
then chunk number at every step: in the per-document window, at each branch's
LIMIT and in the outer ORDER BY, so equal scores can never reorder between
runs.  The same filter predicate is placed in both branches.

Each branch first keeps one chunk per document (its best), then ranks
documents; fusion is Reciprocal Rank Fusion, ``sum 1 / (rrf_k + rank)`` with
ranks counted from 1.  Branch ranks are competition ranks (``rank()``):
documents with identical raw scores share a rank, so a tie stays a tie after
fusion instead of becoming a preference for the smaller doc id; the doc id
only decides the (stable, meaningless) order inside the tie and which tied
documents survive a LIMIT.  The hit's chunk is the one from the branch that
ranked the document higher (the lower chunk number when both ranked it equal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

__all__ = ["BRANCHES_COLUMN", "SearchPlan", "build_search_sql", "time_predicate"]

MODES = ("hybrid", "lexical", "semantic")
#: Position of the ``branches`` column in the search statement's rows (see build_search_sql).
BRANCHES_COLUMN = 11


@dataclass
class SearchPlan:
    table: sql.Composable
    mode: str
    k: int
    depth: int
    rrf_k: int
    query: str
    language: str
    accent: str
    syntax: str = "natural"
    lexical_ranker: str = "bm25"
    k1: float = 1.2
    b: float = 0.75
    #: "hnsw"/"ivfflat": index scan with over-fetch; "exact": full scan of the filtered set.
    vector_strategy: str = "exact"
    sem_fetch: int = 40
    #: Most chunks any document of the snapshot has (from the snapshot's stats).
    max_chunks_per_doc: int = 1
    qvec: Any = None
    filter_sql: sql.Composable = field(default_factory=lambda: sql.SQL("TRUE"))
    filter_params: dict[str, Any] = field(default_factory=dict)
    as_of: Any = None
    lexical_branch: bool = True
    bm25_sql: Any = None  # set by ranklock.search.bm25.prepare_bm25 from the snapshot's statistics
    #: Bound values the lexical branch's SQL needs beyond the query (BM25 statistics).
    lexical_params: dict[str, Any] = field(default_factory=dict)
    #: Also return each branch's candidates (for the query log), in the same statement.
    capture_branches: bool = False

    @property
    def uses_lexical(self) -> bool:
        return self.mode in ("hybrid", "lexical") and self.lexical_branch

    @property
    def uses_semantic(self) -> bool:
        return self.mode in ("hybrid", "semantic")


def time_predicate(plan: SearchPlan, alias: str = "c") -> sql.Composable:
    """Documents in force at ``as_of``; no time restriction when ``as_of`` is None."""
    if plan.as_of is None:
        return sql.SQL("TRUE")
    a = sql.Identifier(alias)
    return sql.SQL(
        "({a}.effective_from IS NULL OR {a}.effective_from <= %(as_of)s) "
        "AND ({a}.effective_to IS NULL OR {a}.effective_to > %(as_of)s)"
    ).format(a=a)


def _where(plan: SearchPlan) -> sql.Composable:
    return sql.SQL("({}) AND ({})").format(plan.filter_sql, time_predicate(plan))


def _lexical_cte(plan: SearchPlan) -> sql.Composable:
    from .lexical import lexical_hits_sql

    hits = lexical_hits_sql(plan, _where(plan))
    return sql.SQL(
        """lex_hits AS ({hits}),
lex_best AS (
    SELECT doc_id, chunk, score,
           row_number() OVER (PARTITION BY doc_id ORDER BY score DESC, chunk) AS rn
    FROM lex_hits
),
lex AS (
    SELECT doc_id, chunk, score,
           rank() OVER (ORDER BY score DESC) AS rank
    FROM lex_best WHERE rn = 1
    ORDER BY score DESC, doc_id, chunk
    LIMIT %(depth)s::bigint
)"""
    ).format(hits=hits)


def _semantic_cte(plan: SearchPlan) -> sql.Composable:
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
        ).format(table=plan.table, where=_where(plan))
    else:
        # ORDER BY the bare distance so the planner can use the ANN index; the
        # over-fetch leaves room for several chunks of one document.  Ties
        # are broken after the index returns, below.
        cand = sql.SQL(
            "SELECT c.doc_id, c.chunk, (c.embedding <=> %(qvec)s)::float8 AS dist FROM {table} AS c "
            "WHERE {where} ORDER BY c.embedding <=> %(qvec)s LIMIT %(sem_fetch)s::bigint"
        ).format(table=plan.table, where=_where(plan))
    return sql.SQL(
        """sem_cand AS MATERIALIZED ({cand}),
sem_best AS (
    SELECT doc_id, chunk, dist,
           row_number() OVER (PARTITION BY doc_id ORDER BY dist, chunk) AS rn
    FROM sem_cand
),
sem AS (
    SELECT doc_id, chunk, dist,
           rank() OVER (ORDER BY dist) AS rank
    FROM sem_best WHERE rn = 1
    ORDER BY dist, doc_id, chunk
    LIMIT %(depth)s::bigint
)"""
    ).format(cand=cand)


def build_search_sql(plan: SearchPlan) -> tuple[sql.Composed, dict[str, Any]]:
    params: dict[str, Any] = {
        "depth": plan.depth,
        "rrf_k": plan.rrf_k,
        "k": plan.k,
    }
    params.update(plan.filter_params)
    if plan.as_of is not None:
        params["as_of"] = plan.as_of
    ctes: list[sql.Composable] = []
    if plan.uses_lexical:
        params.update({"q": plan.query, "cfg": plan.language, "accent": plan.accent, "syntax": plan.syntax})
        if plan.lexical_ranker == "bm25":
            params.update({"k1": plan.k1, "b": plan.b})
            params.update(plan.lexical_params)
        ctes.append(_lexical_cte(plan))
    if plan.uses_semantic:
        params["qvec"] = plan.qvec
        if plan.vector_strategy != "exact":
            params["sem_fetch"] = plan.sem_fetch
        else:
            params["sem_exact_fetch"] = plan.depth * max(1, plan.max_chunks_per_doc)
        ctes.append(_semantic_cte(plan))

    if plan.uses_lexical and plan.uses_semantic:
        fused = sql.SQL(
            """fused AS (
    SELECT coalesce(l.doc_id, s.doc_id) AS doc_id,
           CASE WHEN s.rank IS NULL OR l.rank < s.rank THEN l.chunk
                WHEN l.rank IS NULL OR s.rank < l.rank THEN s.chunk
                ELSE least(l.chunk, s.chunk) END AS chunk,
           coalesce(1.0::float8 / (%(rrf_k)s::bigint + l.rank), 0) + coalesce(1.0::float8 / (%(rrf_k)s::bigint + s.rank), 0) AS score,
           l.rank AS lexical_rank, l.score AS lexical_score,
           s.rank AS semantic_rank, s.dist AS semantic_distance
    FROM lex AS l FULL OUTER JOIN sem AS s ON s.doc_id = l.doc_id
)"""
        )
    elif plan.uses_lexical:
        fused = sql.SQL(
            """fused AS (
    SELECT l.doc_id, l.chunk, 1.0::float8 / (%(rrf_k)s::bigint + l.rank) AS score,
           l.rank AS lexical_rank, l.score AS lexical_score,
           NULL::bigint AS semantic_rank, NULL::float8 AS semantic_distance
    FROM lex AS l
)"""
        )
    else:
        fused = sql.SQL(
            """fused AS (
    SELECT s.doc_id, s.chunk, 1.0::float8 / (%(rrf_k)s::bigint + s.rank) AS score,
           NULL::bigint AS lexical_rank, NULL::float8 AS lexical_score,
           s.rank AS semantic_rank, s.dist AS semantic_distance
    FROM sem AS s
)"""
        )
    ctes.append(fused)
    query = sql.SQL(
        """WITH {ctes}
SELECT row_number() OVER (ORDER BY f.score DESC, f.doc_id, f.chunk) AS rank,
       f.doc_id, f.chunk, f.score, f.lexical_rank, f.lexical_score, f.semantic_rank, f.semantic_distance,
       c.char_start, c.char_end, c.text, {branches} AS branches, {sem_docs} AS sem_docs
FROM fused AS f JOIN {table} AS c ON c.doc_id = f.doc_id AND c.chunk = f.chunk
ORDER BY f.score DESC, f.doc_id, f.chunk
LIMIT %(k)s::bigint"""
    ).format(
        ctes=sql.SQL(",\n").join(ctes),
        table=plan.table,
        # How many documents the vector branch handed to fusion: the
        # completeness check compares it with min(depth, matching documents)
        # to detect an index scan that came back short.
        sem_docs=sql.SQL("(SELECT count(*) FROM sem)") if plan.uses_semantic else sql.SQL("NULL::bigint"),
        branches=_branches_column(plan),
    )
    return query, params


def _branches_column(plan: SearchPlan) -> sql.Composable:
    """Each branch's candidates as JSON ``{"lexical": [[doc_id, chunk, rank, score], …], "semantic": …}``.

    Computed in the search statement itself, from the very CTEs fusion reads
    (an uncorrelated subquery: evaluated once, not per row), so logging costs
    no second search.  Raw scores keep their SQL types, so they read back
    equal to the hits' lexical_score / semantic_distance.
    """
    if not plan.capture_branches:
        return sql.SQL("NULL::json")
    parts: list[sql.Composable] = []
    if plan.uses_lexical:
        parts.append(
            sql.SQL(
                "'lexical', (SELECT coalesce(json_agg(json_build_array(doc_id, chunk, rank, score) ORDER BY rank), "
                "'[]'::json) FROM lex)"
            )
        )
    if plan.uses_semantic:
        parts.append(
            sql.SQL(
                "'semantic', (SELECT coalesce(json_agg(json_build_array(doc_id, chunk, rank, dist) ORDER BY rank), "
                "'[]'::json) FROM sem)"
            )
        )
    return sql.SQL("(SELECT json_build_object({}))").format(sql.SQL(", ").join(parts))
