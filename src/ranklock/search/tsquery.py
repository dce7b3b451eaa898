"""The query as a tsquery: which chunks match, for both lexical rankers (BM25's match plan, ts_rank_cd)."""

from __future__ import annotations

from psycopg import sql

__all__ = ["tsquery_sql"]


def tsquery_sql() -> sql.Composable:
    """``ranklock.query_tsquery`` of the bound query, in the collection's text-search configuration."""
    return sql.SQL("ranklock.query_tsquery(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s)")
