"""The plan of one search: what to search, how, and with which bound values.

:class:`SearchPlan` is what every part of the search reads: the lexical and
semantic branches, fusion, the completeness count and the query log.  It is
a leaf: nothing here imports the modules that read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from ..snapshot.rules import CURRENT_RULES, RankingRules

__all__ = ["MODES", "SearchPlan", "time_predicate", "where_sql"]

MODES = ("hybrid", "lexical", "semantic")


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
    #: hnsw.ef_search for this query (ranklock.search.semantic.choose_ef_search); None: not an HNSW scan.
    ef_search: int | None = None
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
    #: The snapshot's ranking rules (ranklock.snapshot.rules): query-term frequency, tie blocks in RRF.
    rules: RankingRules = CURRENT_RULES

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


def where_sql(plan: SearchPlan) -> sql.Composable:
    """The predicate both branches and the count use: the compiled filter and ``as_of``."""
    return sql.SQL("({}) AND ({})").format(plan.filter_sql, time_predicate(plan))
