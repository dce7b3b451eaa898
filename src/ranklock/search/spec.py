"""What one search statement is built from: a frozen :class:`SearchSpec` and its branches.

A *branch* is one ranker over the snapshot's chunks (BM25, the vector index,
...) that hands fusion its top ``depth`` documents, one chunk each, with a
rank and a raw score: the :class:`Branch` protocol.  Fusion
(ranklock.search.fusion) is written once over any number of them; the
registry (ranklock.search.branches) says which exist and in which order.

A spec is computed by pure steps and never changed in place: each step that
learns something (the completeness count, an exact rescan) returns a new spec
(:meth:`SearchSpec.with_branches`) holding new branches, so what built a
statement is exactly what the statement shows.  The parts every branch shares
live in the spec (the table, ``k``, ``depth``, RRF's ``rrf_k``, the filter and
``as_of``, the snapshot's ranking rules); what one branch knows lives in the
branch.  A branch's CTEs end in one named ``cte`` with the columns fusion
reads::

    doc_id, chunk, <signal.raw_column>, rank, rrf

``rank`` is a competition rank (ties share it) and ``rrf`` the document's
fusion weight (ranklock.search.rrf), so a tie stays a tie.

It is a leaf of the search: nothing here imports the modules that read it.

    >>> [b.name for b in spec.branches]       # doctest: +SKIP
    ['lexical', 'semantic']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from psycopg import sql

from ..snapshot.rules import CURRENT_RULES, RankingRules
from ..snapshot.segments import Layout, chunks_sql, filter_rows_sql, live_sql

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..embed.base import Embedder
    from ..settings import SearchParams
    from .context import Contexts as Memos

__all__ = [
    "Branch",
    "BranchContext",
    "FallsShort",
    "Scope",
    "SearchSpec",
    "Signal",
    "shard_ids",
    "time_predicate",
    "where_sql",
]


@dataclass(frozen=True)
class Scope:
    """Documents and chunks satisfying the hard constraints and ``as_of``, and the snapshot's chunks."""

    documents: int
    chunks: int
    #: Every chunk of the snapshot (the denominator of a filter's selectivity).
    total_chunks: int = 0


@dataclass(frozen=True)
class Signal:
    """How a branch's signals show in a hit, the statement and the query log.

    ``rank_key`` and ``raw_key`` name them in a hit's JSON (``lexical_rank``,
    ``lexical_score``); ``raw_column`` is the raw score's column in the
    branch's CTE and ``raw_type`` its SQL type (for the NULL column of a
    branch that does not run).  ``raw_name`` is what people call the raw score
    (the page's ``BM25``, ``distance``) and ``raw_format`` how the CLI prints it.
    """

    rank_key: str
    raw_key: str
    raw_column: str
    raw_type: str
    raw_name: str = "score"
    raw_format: str = "{:.3f}"


class Branch(Protocol):
    """One ranker of the search, as one frozen value; see the module docstring."""

    #: Its name in the request's mode, the query log and ``Hit.signals`` (ranklock.search.results.BranchSignal).
    name: ClassVar[str]
    #: Its alias in the fused statement (``l``) and the name of its last CTE (``lex``).
    alias: ClassVar[str]
    cte: ClassVar[str]
    signal: ClassVar[Signal]
    #: It ranks every document the hard constraints admit (a vector scan), not only those it matches.
    ranks_every_document: ClassVar[bool]
    #: Its scan can come back with fewer than ``depth`` documents it should have had (an index
    #: budget); the statement then reports how many it handed to fusion (``<cte>_docs``).
    can_fall_short: ClassVar[bool]
    #: The keys of :meth:`echo` in a result's ``params``, each None in a result this branch did not serve.
    echo_keys: ClassVar[tuple[str, ...]]

    def ctes(self, spec: SearchSpec) -> sql.Composable:
        """Its CTEs, ending with ``cte`` (see the module docstring)."""
        ...

    def shard_hits(self, spec: SearchSpec) -> sql.Composable:
        """On a Citus cluster, its top list on one shard (``spec.layout.on_shard``), the one-node scan's.

        Rows (branch, seg, row_id, doc_id, chunk, score): ``branch`` its name,
        ``score`` its raw score; its top ``depth`` documents on the shard, one
        chunk each, unless its scan cannot rank them (an ANN index: its top
        chunks).  Its :meth:`ctes` then read every shard's rows of ``shard_rows``
        (ranklock.search.sharded).
        """
        ...

    def params(self, spec: SearchSpec) -> Mapping[str, Any]:
        """The values its CTEs bind, beyond the spec's."""
        ...

    def settings(self) -> list[tuple[str, str]]:
        """Transaction-local settings its scan needs (``hnsw.ef_search``, ...)."""
        ...

    def constrained(self, scope: Scope, sp: SearchParams, spec: SearchSpec) -> Branch:
        """This branch once the hard constraints were counted (``scope``): the plan it runs."""
        ...

    @property
    def approximate(self) -> bool:
        """Its order is approximate (an ANN index): the result cannot certify the top."""
        ...

    def echo(self) -> dict[str, Any]:
        """What of its plan a result echoes in ``params``, under :attr:`echo_keys` in that order."""
        ...


class FallsShort(Branch, Protocol):
    """A branch whose scan can come back short (``can_fall_short``): how to rescan it, what to say."""

    #: The key of a result's ``params`` that holds the note of its exact rescan (None: none ran).
    fallback_key: ClassVar[str]

    def exact(self) -> Branch:
        """The same branch scanned exactly (complete by construction)."""
        ...

    def shortfall(self, got: int, want: int, *, fallback: bool) -> str:
        """What a scan that handed fusion ``got`` of ``want`` documents says: the note of a rescan, or the warning."""
        ...


@dataclass(frozen=True)
class SearchSpec:
    """The shared part of one search statement, and its branches in fusion order."""

    #: The snapshot's segments and dead rows (ranklock.snapshot.segments).
    layout: Layout
    mode: str
    k: int
    #: Documents each branch hands to fusion.
    depth: int
    rrf_k: int
    #: The normalised query text.
    query: str
    language: str
    accent: str
    #: Most chunks any document of the snapshot has (from the snapshot's stats).
    max_chunks_per_doc: int = 1
    as_of: datetime | None = None
    filter_sql: sql.Composable = field(default_factory=lambda: sql.SQL("TRUE"))
    filter_params: Mapping[str, Any] = field(default_factory=dict)
    #: The typed fields the filter reads (ranklock.search.filters.CompiledFilter.fields).
    filter_fields: tuple[str, ...] = ()
    #: The snapshot's ranking rules (ranklock.snapshot.rules): query-term frequency, tie blocks in RRF.
    rules: RankingRules = CURRENT_RULES
    #: The branches that run, in the registry's order (ranklock.search.branches).
    branches: tuple[Branch, ...] = ()
    #: Also return each branch's candidates (for the query log), in the same statement.
    capture_branches: bool = False

    @property
    def table(self) -> sql.Composable:
        """The snapshot's chunk rows: its segments' chunk tables as one relation, with ``seg``; mask with
        :func:`where_sql` (or :func:`live_sql`), which drops the dead rows."""
        return chunks_sql(self.layout)

    @property
    def filter_rows(self) -> sql.Composable:
        """What a hard constraint is checked on, with ``seg``, ``row_id``, ``doc_id`` and ``chunk``: the segments'
        narrow filter tables where they have them (ranklock.snapshot.filter_table), else their chunk tables."""
        return filter_rows_sql(self.layout)

    def branch(self, name: str) -> Branch | None:
        """The branch called ``name``, or None when it does not run."""
        return next((b for b in self.branches if b.name == name), None)

    def uses(self, name: str) -> bool:
        return self.branch(name) is not None

    def with_branches(self, branches: tuple[Branch, ...]) -> SearchSpec:
        return dataclasses.replace(self, branches=branches)

    @property
    def unconstrained(self) -> bool:
        """No hard constraint: no filter and no ``as_of``."""
        return self.as_of is None and not self.filter_params and self.filter_sql.as_string(None) == "TRUE"


def time_predicate(spec: SearchSpec, alias: str = "c") -> sql.Composable:
    """Documents in force at ``as_of``; no time restriction when ``as_of`` is None."""
    if spec.as_of is None:
        return sql.SQL("TRUE")
    a = sql.Identifier(alias)
    return sql.SQL(
        "({a}.effective_from IS NULL OR {a}.effective_from <= %(as_of)s) "
        "AND ({a}.effective_to IS NULL OR {a}.effective_to > %(as_of)s)"
    ).format(a=a)


def shard_ids(spec: SearchSpec, alias: str) -> sql.Composable:
    """``, alias.seg, alias.row_id`` in a statement for one shard (a hit carries them to the fetch), else nothing."""
    if not spec.layout.on_shard:
        return sql.SQL("")
    return sql.SQL(", {a}.seg, {a}.row_id").format(a=sql.Identifier(alias))


def where_sql(spec: SearchSpec, alias: str = "c") -> sql.Composable:
    """The predicate every branch and the count use: the compiled filter, ``as_of``, and the row is live."""
    return sql.SQL("({}) AND ({}) AND ({})").format(
        spec.filter_sql, time_predicate(spec, alias), live_sql(spec.layout, alias)
    )


@dataclass
class BranchContext:
    """What preparing a branch may read: the request, its collection and snapshot, the shared spec.

    ``memo`` holds what this process already read that the snapshot or the model fixes (a query's
    lexical probe, a text's vector: ranklock.search.context.Contexts); ``writes`` collects what the
    search writes once it has answered (a new query vector for the embedding cache).
    """

    coll: CollectionInfo
    snap: dict[str, Any]
    spec: SearchSpec
    params: SearchParams
    #: The query as the caller wrote it (error messages quote it).
    request_query: str
    #: The collection's embedder, checked against its weights (the facade owns the loaded models).
    embedder: Callable[[CollectionInfo], Embedder]
    #: Store a new query vector in the embedding cache (``search_sql`` writes nothing).
    store_vector: bool = True
    memo: Memos | None = None
    #: The versions of the rows the context was read at (ranklock.search.context.Guard): what keys a probe.
    version: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    writes: list[Any] = field(default_factory=list)
    #: What the search says of how it read (a read retried on a new connection), before the branches' warnings.
    notes: list[str] = field(default_factory=list)
