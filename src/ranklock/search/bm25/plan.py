"""What every BM25 plan is and binds: the plan protocol, the snapshot's statistics, the budget, the admission.

A plan is one frozen value (:class:`Bm25Plan`): it owns its parameters (the
values its SQL binds, echoed by ``search_sql``), its SQL (:meth:`Bm25Plan.hits_sql`)
and how it meets a hard constraint (:meth:`Bm25Plan.constrained`, which returns
the plan that then runs).  ranklock.search.bm25.choose picks one; nothing
else names a plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from psycopg import sql

    from ..spec import SearchSpec

__all__ = ["Admission", "Bm25Plan", "Budget", "LexicalQuery", "Statistics"]


class LexicalQuery(Protocol):
    """What BM25's plan choice reads of the lexical branch (ranklock.search.lexical.LexicalBranch)."""

    @property
    def query(self) -> str: ...
    @property
    def language(self) -> str: ...
    @property
    def accent(self) -> str: ...
    @property
    def syntax(self) -> str: ...
    @property
    def ranker(self) -> str: ...
    @property
    def k1(self) -> float: ...
    @property
    def b(self) -> float: ...


@dataclass(frozen=True)
class Statistics:
    """The snapshot's BM25 statistics a plan scores and prunes with: fixed when the plan is chosen, then bound.

    ``chunks`` and ``avgdl`` are the snapshot's live chunks and their average
    length (exact integers divided once, so the same documents give the same
    bits however they were cut into segments); per segment read, in the
    layout's order: its id, ``length_factors`` (a segment's weights were
    computed with its own average length: under the snapshot's, a length part
    grows at most by this factor), ``min_df`` (the df from which its terms have
    dense blocks) and ``shares`` (its part of the chunks read: its part of a
    seed budget).
    """

    chunks: int
    avgdl: float
    snapshot_id: int
    segments: tuple[int, ...]
    length_factors: tuple[float, ...]
    min_df: tuple[int, ...]
    shares: tuple[float, ...]
    level_base: int
    #: The snapshot's most chunks of a document (at least 1).
    max_chunks: int


@dataclass(frozen=True)
class Budget:
    """The cost constants (ranklock.search.bm25.costs) a plan was chosen under: bound, so ``search_sql`` shows them.

    ``seed_reads`` is how deep the sharded pruned plans read each term for
    seeds: ``seed`` postings, more under a constraint that rejects some.
    """

    seed: int
    seed_reads: float
    full: int
    probe: int
    deeper: int
    skip_level: int


@dataclass(frozen=True)
class Admission:
    """How a pruned plan checks a hard constraint on the rows it reads (ranklock.search.bm25.pruned.choose_way).

    ``way`` is ``set`` (each row looked up in the admitted rows, listed once:
    the segments' filter tables only) or ``probe`` (the rows read checked in
    one ordered pass of the filter rows); ``share`` is the share of the
    snapshot's chunks the constraint admits (how much deeper the seeds read).
    """

    way: str
    share: float


def base_params(stats: Statistics, budget: Budget) -> dict[str, Any]:
    """The values every plan binds: the snapshot's statistics and the budget, in the order ``search_sql`` shows."""
    return {
        "bm25_chunks": stats.chunks,
        "bm25_avgdl": stats.avgdl,
        "bm25_sid": stats.snapshot_id,
        "bm25_segs": list(stats.segments),
        "bm25_lf": list(stats.length_factors),
        "bm25_min_df": list(stats.min_df),
        "bm25_share": list(stats.shares),
        "bm25_seed": budget.seed,
        "bm25_seed_reads": budget.seed_reads,
        "bm25_full": budget.full,
        "bm25_probe": budget.probe,
        "bm25_deeper": budget.deeper,
        "bm25_skip_level": budget.skip_level,
        "bm25_level_base": stats.level_base,
        "bm25_max_chunks": stats.max_chunks,
    }


class Bm25Plan(Protocol):
    """One way to find the chunks that can make the lexical top ``depth``, as one frozen value."""

    @property
    def name(self) -> str | None:
        """The plan's name in its parameters (``bm25_plan``), or None for the match plan, which binds none."""
        ...

    def params(self) -> dict[str, Any]:
        """The values its SQL binds (``bm25_*``), in a fixed order."""
        ...

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        """Rows (doc_id, chunk, score) of the chunks that can make the lexical top ``depth``, passing ``where``."""
        ...

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> Bm25Plan:
        """The plan that runs once the hard constraints were counted (``admitted_chunks`` chunks pass them)."""
        ...

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:
        """The query's terms the plan binds, read once while the search is planned; None: its statement reads them."""
        ...

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> Bm25Plan:
        """The plan with the rows of :meth:`terms_sql` bound."""
        ...
