"""The lexical branch: which chunks match the query, and their raw scores.

``ts_rank_cd`` is PostgreSQL's cover-density ranking.  (BM25 is built in
ranklock.search.bm25 once its statistics exist in the snapshot.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

if TYPE_CHECKING:
    from .hybrid import SearchPlan

__all__ = ["lexical_hits_sql", "tsquery_sql"]


def tsquery_sql() -> sql.Composable:
    return sql.SQL("ranklock.query_tsquery(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s)")


def lexical_hits_sql(plan: SearchPlan, where: sql.Composable) -> sql.Composable:
    """Rows (doc_id, chunk, score) of every matching chunk passing ``where``."""
    if plan.lexical_ranker == "bm25" and plan.bm25_sql is not None:
        out: sql.Composable = plan.bm25_sql(plan, where)
        return out
    return sql.SQL(
        "SELECT c.doc_id, c.chunk, ts_rank_cd(c.tsv, q.tsq)::float8 AS score "
        "FROM {table} AS c, (SELECT {tsq} AS tsq) AS q "
        "WHERE c.tsv @@ q.tsq AND {where}"
    ).format(table=plan.table, tsq=tsquery_sql(), where=where)
