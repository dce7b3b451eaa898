"""The impact plan: exact top ``depth`` documents by reading each term's postings only as deep as theta needs.

A chunk's exact score is read from the forward table (one index probe); a
term's postings are read in decreasing weight from the impact index.  Read
depths: if every term t is read down to a weight f_t and the f_t sum to at
most theta, a chunk never read scores below theta (all its weights are below
their f_t): it cannot make the top.  The terms' impact quantiles (``wq``, from
the snapshot) give f_t for "the top ``LEVEL_BASE * 2^i`` postings" before
reading anything.  The cheapest choice is taken among: the ``j`` terms of
smallest maximum weight left unread (f_t = max weight, MaxScore's
non-essential terms) and the others read to level ``i``.  Then one level
deeper (reading is cheap, probing is not), and the unread terms shallowly
(``SKIP_LEVEL``), which only lowers the f_t (ranklock.search.bm25.bounds).
Every chunk read gets an upper bound: its weights read plus f_t for each term
it was not seen in; the rest is ranklock.search.bm25.pruned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from .admission import constrained
from .admitted import AdmittedPlan
from .plan import Admission, Budget, Statistics, base_params
from .pruned import admission, admit_params, pruned_sql

if TYPE_CHECKING:
    from psycopg import sql

    from ..spec import SearchSpec
    from .plan import Bm25Plan

__all__ = ["ImpactPlan"]


@dataclass(frozen=True)
class ImpactPlan:
    """The impact plan (module docstring); ``admit``: how it checks a hard constraint on what it reads."""

    name: ClassVar[str | None] = "impact"

    stats: Statistics
    budget: Budget
    postings: int
    terms: int
    admit: Admission | None = None

    def params(self) -> dict[str, Any]:
        return {
            "bm25_postings": self.postings,
            "bm25_terms": self.terms,
            "bm25_plan": self.name,
            **base_params(self.stats, self.budget),
            **admit_params(self.admit),
        }

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:  # noqa: ARG002 (the Bm25Plan protocol: every row it reads is checked in its CTEs)
        return pruned_sql(spec, self.admit, dense=False)

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> Bm25Plan:
        """Under a filter or ``as_of``: score what the constraint admits, or prune and check (pruned.admission)."""
        if not constrained(spec):
            return self
        admit = admission(
            spec, admitted_chunks, dense=False, terms=self.terms, postings=self.postings, chunks=self.stats.chunks
        )
        return AdmittedPlan(self) if admit is None else dataclasses.replace(self, admit=admit)

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:  # noqa: ARG002 (the Bm25Plan protocol)
        return None

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> ImpactPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self
