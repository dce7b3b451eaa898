"""The dense plan: queries of frequent words, each chunk bounded by the summed dense blocks of their weights.

Issue 14: at a million chunks, queries of frequent words left no impact bound
below theta and ~400k chunks were scored one by one.  Taken instead of the
impact plan when the snapshot has dense blocks (ranklock.snapshot.lexical_stats:
the weights of every term in at least 1/1024 of the chunks as pgvector
sparsevec blocks of 16,000 row ids, each made a dense float4 vector at query
time), 1 to ``DENSE_MAX_TERMS`` query terms have them (D) and the others (R)
have at most ``DENSE_REST_POSTINGS`` postings.  theta as the impact plan's
(seeds: a budget of ``DENSE_SEEDS`` shared by the terms).  Then every chunk
gets a tight bound: S(c), the float4 sum of its D weights (pgvector sums each
block in C, ~1 ms per term per million chunks), plus r(c), the exact sum of
its R weights (R's postings read whole).  Chunks in no R list are kept when
S > the cut, found as the set bits of ``binary_quantize(S - cut)`` and turned
into row ids only there; a chunk of R is looked up in S (its block cast to
real[] once).  S is only ever a bound, with a relative margin ``DENSE_REL``
(1e-5 covers the float4 rounding of up to 83 terms, see its comment) and an
absolute ``DENSE_ABS``: the ``DENSE_PROBE`` best bounds are scored exactly to
raise theta, and the survivors are scored exactly from the forward table, as
in the impact plan, so the top ``depth`` keeps the same bits.
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

__all__ = ["DenseBlocks", "DensePlan"]


@dataclass(frozen=True)
class DenseBlocks:
    """How the dense plan reads the blocks: its seed budget, its block size, its bounds' margins (costs)."""

    seeds: int
    block: int
    rest: int
    rel: float
    abs: float

    def params(self) -> dict[str, Any]:
        return {
            "bm25_dense_seeds": self.seeds,
            "bm25_dense_block": self.block,
            "bm25_dense_rest": self.rest,
            "bm25_dense_rel": self.rel,
            "bm25_dense_abs": self.abs,
        }


@dataclass(frozen=True)
class DensePlan:
    """The dense plan (module docstring); ``admit``: how it checks a hard constraint on what it reads."""

    name: ClassVar[str | None] = "dense"

    stats: Statistics
    #: Its probe budget is ``DENSE_PROBE``: the dense bounds are tight, few are needed.
    budget: Budget
    postings: int
    terms: int
    dense: DenseBlocks
    admit: Admission | None = None

    def params(self) -> dict[str, Any]:
        return {
            "bm25_postings": self.postings,
            "bm25_terms": self.terms,
            "bm25_plan": self.name,
            **base_params(self.stats, self.budget),
            **self.dense.params(),
            **admit_params(self.admit),
        }

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:  # noqa: ARG002 (the Bm25Plan protocol: every row it reads is checked in its CTEs)
        return pruned_sql(spec, self.admit, dense=True)

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> Bm25Plan:
        """Under a filter or ``as_of``: score what the constraint admits, or prune and check (pruned.admission)."""
        if not constrained(spec):
            return self
        admit = admission(
            spec, admitted_chunks, dense=True, terms=self.terms, postings=self.postings, chunks=self.stats.chunks
        )
        return AdmittedPlan(self) if admit is None else dataclasses.replace(self, admit=admit)

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:  # noqa: ARG002 (the Bm25Plan protocol)
        return None

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> DensePlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self
