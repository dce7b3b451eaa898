"""Fusion: the one search statement that joins the lexical and semantic branches by RRF.

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
documents survive a LIMIT.  Under rule rrf/2 (ranklock.snapshot.rules) a block
of n tied documents shares the weights of the n positions it spans
(:func:`rrf_weight_sql`), so it weighs what n documents weigh, not n first
places.  The hit's chunk is the one from the branch that
ranked the document higher (the lower chunk number when both ranked it equal).
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from .lexical import lexical_hits_sql
from .plan import SearchPlan, where_sql
from .semantic import semantic_cte

__all__ = ["BRANCHES_COLUMN", "build_search_sql", "rrf_weight_sql"]

#: Position of the ``branches`` column in the search statement's rows (see build_search_sql).
BRANCHES_COLUMN = 11


def _lexical_cte(plan: SearchPlan) -> sql.Composable:
    hits = lexical_hits_sql(plan, where_sql(plan))
    return sql.SQL(
        """lex_hits AS ({hits}),
lex_best AS (
    SELECT doc_id, chunk, score,
           row_number() OVER (PARTITION BY doc_id ORDER BY score DESC, chunk) AS rn
    FROM lex_hits
),
lex_top AS (
    SELECT doc_id, chunk, score,
           rank() OVER (ORDER BY score DESC) AS rank,
           row_number() OVER (ORDER BY score DESC, doc_id, chunk) AS pos
    FROM lex_best WHERE rn = 1
    ORDER BY score DESC, doc_id, chunk
    LIMIT %(depth)s::bigint
),
lex AS (SELECT doc_id, chunk, score, rank, {rrf} AS rrf FROM lex_top{window})"""
    ).format(hits=hits, rrf=rrf_weight_sql(plan), window=_tie_window(plan))


def rrf_weight_sql(plan: SearchPlan) -> sql.Composable:
    """A branch row's RRF weight, from its competition ``rank`` and its position ``pos`` in the branch.

    Rule rrf/2 (ranklock.snapshot.rules): the n documents tied at rank r share
    the positions r..r+n-1 they occupy in the branch's list, each weighing the
    mean of 1 / (rrf_k + p) over them, summed in position order (so the bits
    never depend on the order rows arrive in).  A block cut by the branch's
    depth shares the positions it holds.  A document alone at its rank (pos =
    rank) gets 1 / (rrf_k + rank), bit for bit rule rrf/1's weight.
    """
    if not plan.rules.shared_ties:
        return sql.SQL("1.0::float8 / (%(rrf_k)s::bigint + rank)")
    return sql.SQL("sum(1.0::float8 / (%(rrf_k)s::bigint + pos)) OVER tie / count(*) OVER tie")


def _tie_window(plan: SearchPlan) -> sql.Composable:
    if not plan.rules.shared_ties:
        return sql.SQL("")
    return sql.SQL(
        " WINDOW tie AS (PARTITION BY rank ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
    )


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
        ctes.append(semantic_cte(plan, rrf_weight_sql(plan), _tie_window(plan)))

    if plan.uses_lexical and plan.uses_semantic:
        fused = sql.SQL(
            """fused AS (
    SELECT coalesce(l.doc_id, s.doc_id) AS doc_id,
           CASE WHEN s.rank IS NULL OR l.rank < s.rank THEN l.chunk
                WHEN l.rank IS NULL OR s.rank < l.rank THEN s.chunk
                ELSE least(l.chunk, s.chunk) END AS chunk,
           coalesce(l.rrf, 0) + coalesce(s.rrf, 0) AS score,
           l.rank AS lexical_rank, l.score AS lexical_score,
           s.rank AS semantic_rank, s.dist AS semantic_distance
    FROM lex AS l FULL OUTER JOIN sem AS s ON s.doc_id = l.doc_id
)"""
        )
    elif plan.uses_lexical:
        fused = sql.SQL(
            """fused AS (
    SELECT l.doc_id, l.chunk, l.rrf AS score,
           l.rank AS lexical_rank, l.score AS lexical_score,
           NULL::bigint AS semantic_rank, NULL::float8 AS semantic_distance
    FROM lex AS l
)"""
        )
    else:
        fused = sql.SQL(
            """fused AS (
    SELECT s.doc_id, s.chunk, s.rrf AS score,
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
                "'lexical', (SELECT coalesce(json_agg(json_build_array(doc_id, chunk, rank, score) ORDER BY rank, doc_id, chunk), "
                "'[]'::json) FROM lex)"
            )
        )
    if plan.uses_semantic:
        parts.append(
            sql.SQL(
                "'semantic', (SELECT coalesce(json_agg(json_build_array(doc_id, chunk, rank, dist) ORDER BY rank, doc_id, chunk), "
                "'[]'::json) FROM sem)"
            )
        )
    return sql.SQL("(SELECT json_build_object({}))").format(sql.SQL(", ").join(parts))
