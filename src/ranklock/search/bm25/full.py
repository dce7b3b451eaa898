"""The full plan: few postings (at most ``FULL_SCAN_POSTINGS`` for all the query's terms), every one summed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from psycopg import sql

from .parts import query_terms, top
from .plan import Budget, Statistics, base_params
from .summed import summed_ctes

if TYPE_CHECKING:
    from ..spec import SearchSpec

__all__ = ["FullPlan"]


@dataclass(frozen=True)
class FullPlan:
    """Every posting of the query's terms summed as float8, the float top summed again in term order; nothing pruned.

    Its last bit would depend on the order rows arrive in, so only the float
    top ``depth * max_chunks_per_doc`` chunks passing the constraints (and
    anything within 1e-9 of the last of them) keep a score, summed exactly in
    lexeme order.  A constraint changes nothing: it is checked on the summed
    chunks.
    """

    name: ClassVar[str | None] = "full"

    stats: Statistics
    budget: Budget
    #: The query's terms' postings, together, and how many terms it has (what chose the plan).
    postings: int
    terms: int

    def params(self) -> dict[str, Any]:
        return {
            "bm25_postings": self.postings,
            "bm25_terms": self.terms,
            "bm25_plan": self.name,
            **base_params(self.stats, self.budget),
        }

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:  # noqa: ARG002 (the Bm25Plan protocol: the summed chunks are checked in its CTEs)
        # Few postings: sum them all; nothing to prune.
        return sql.SQL("WITH {qt},\n{summed}\n{top}").format(
            qt=query_terms(spec),
            summed=summed_ctes(spec, None, when=sql.SQL("TRUE"), impact=False),
            top=top(spec),
        )

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> FullPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:  # noqa: ARG002 (the Bm25Plan protocol)
        return None

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> FullPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self
