"""The lexical branch: which chunks match the query, and their raw scores.

Two rankers, both computed inside PostgreSQL:

``bm25`` (default)
    Okapi BM25 over the snapshot's precomputed term statistics; see
    ranklock.search.bm25.  The engine points the plan at the snapshot's
    statistics (``plan.bm25_sql``) before the SQL is built.
``ts_rank_cd``
    PostgreSQL's cover-density ranking of every chunk matching the tsquery.

Example::

    >>> lexical_hits_sql(plan, sql.SQL("TRUE"))   # a Composable for the lex_hits CTE
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from ..errors import QueryError

if TYPE_CHECKING:
    from .plan import SearchPlan

__all__ = ["LEXICAL_RANKERS", "QUERY_SYNTAXES", "lexical_hits_sql", "tsquery_sql"]

LEXICAL_RANKERS = ("bm25", "ts_rank_cd")
QUERY_SYNTAXES = ("natural", "websearch")


def tsquery_sql() -> sql.Composable:
    return sql.SQL("ranklock.query_tsquery(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s)")


def lexical_hits_sql(plan: SearchPlan, where: sql.Composable) -> sql.Composable:
    """Rows (doc_id, chunk, score) of every chunk that can rank in the branch, passing ``where``."""
    if plan.lexical_ranker not in LEXICAL_RANKERS:
        raise QueryError(f"unknown lexical ranker {plan.lexical_ranker!r}; use one of {', '.join(LEXICAL_RANKERS)}.")
    if plan.syntax not in QUERY_SYNTAXES:
        raise QueryError(f"unknown query syntax {plan.syntax!r}; use one of {', '.join(QUERY_SYNTAXES)}.")
    if plan.lexical_ranker == "bm25":
        if plan.bm25_sql is None:
            # Never fall back silently to another ranker: the result would
            # claim BM25 and be something else.
            raise QueryError(
                "BM25 was asked but the plan carries no BM25 statistics; build the plan through "
                "Engine.search, or pass lexical_ranker='ts_rank_cd'."
            )
        out: sql.Composable = plan.bm25_sql(plan, where)
        return out
    return sql.SQL(
        "SELECT c.doc_id, c.chunk, ts_rank_cd(c.tsv, q.tsq)::float8 AS score "
        "FROM {table} AS c, (SELECT {tsq} AS tsq) AS q "
        "WHERE c.tsv @@ q.tsq AND {where}"
    ).format(table=plan.table, tsq=tsquery_sql(), where=where)
