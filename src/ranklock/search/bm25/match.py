"""The match plan: websearch syntax, or k1 and b other than the snapshot's, scores every chunk the tsquery matches.

Websearch decides the match with its phrases and exclusions; the score uses
its positive terms, from each matching chunk's tsvector (the weights the
postings would hold, turned around), summed in lexeme order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from psycopg import sql

from ..spec import shard_ids
from ..tsquery import tsquery_sql
from .parts import query_terms, score
from .plan import Budget, Statistics, base_params

if TYPE_CHECKING:
    from ..spec import SearchSpec

__all__ = ["MatchPlan"]


@dataclass(frozen=True)
class MatchPlan:
    """Every chunk matching the query's tsquery (GIN index), scored from its tsvector; binds no plan name."""

    name: ClassVar[str | None] = None

    stats: Statistics
    budget: Budget

    def params(self) -> dict[str, Any]:
        return base_params(self.stats, self.budget)

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        return sql.SQL(
            "WITH {qt} SELECT c.doc_id, c.chunk, {score} AS score{ids} FROM {table} AS c "
            "WHERE c.tsv @@ {tsq} AND {where}"
        ).format(
            qt=query_terms(spec),
            score=score(),
            ids=shard_ids(spec, "c"),
            table=spec.table,
            tsq=tsquery_sql(),
            where=where,
        )

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> MatchPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:  # noqa: ARG002 (the Bm25Plan protocol)
        return None

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> MatchPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self
