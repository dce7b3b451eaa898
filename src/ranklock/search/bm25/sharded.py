"""The plan of a snapshot distributed over a Citus cluster: each shard runs the one-node plan once.

The one-node plan (full, impact, dense, admitted or match, chosen by the same
rules from the query's postings over the whole snapshot) is composed once for
a shard's tables (ranklock.search.sharded runs it on every shard, the query
phase) with the snapshot's global statistics bound: the chunk count and
average length are the plan's own parameters; the query's terms, each with
its snapshot-wide df and idf and, per segment, its term id, impact quantiles
and bounds (``qt``, ``qdf``: ranklock.search.bm25.parts.query_terms), are
read once on the coordinator while the search is planned, from the reference
``terms`` tables and the snapshot's dead-term counts, and bound as JSON.  So
every shard scores a chunk with the bits one node gives it, and prunes with a
theta that is a real score of its own documents: a valid bound for its own top
``depth``, which holds every document of the global top that it holds.  The
coordinator merges the shards' lists by the one-node order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg import sql

from .parts import QDF_COLUMNS, QT_COLUMNS, query_terms

if TYPE_CHECKING:
    from ..spec import SearchSpec
    from .plan import Bm25Plan

__all__ = ["BoundTerms", "ShardedPlan", "terms_sql"]


@dataclass(frozen=True)
class BoundTerms:
    """The query's terms as the coordinator read them (``qt`` and ``qdf`` as JSON arrays), bound for every shard.

    JSON carries each float8 exactly: PostgreSQL writes the shortest text that
    reads back to the same double, and reads it back correctly rounded.
    """

    qt: str
    qdf: str

    def params(self) -> dict[str, Any]:
        return {"bm25_qt": self.qt, "bm25_qdf": self.qdf}


@dataclass(frozen=True)
class ShardedPlan:
    """The one-node plan ``inner``, run once on every shard with the snapshot's statistics bound (module docstring)."""

    inner: Bm25Plan
    #: The query's terms, bound once read (:meth:`with_terms`); a statement cannot be composed before.
    terms: BoundTerms | None = None

    @property
    def name(self) -> str | None:
        """The plan each shard runs: its statement is the one-node plan's."""
        return self.inner.name

    def params(self) -> dict[str, Any]:
        return {**self.inner.params(), **(self.terms.params() if self.terms is not None else {})}

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        """The one-node plan's statement over one shard's tables (``spec.layout.on_shard``)."""
        if not spec.layout.on_shard:
            raise ValueError("a sharded plan is composed for one shard's tables (ranklock.search.sharded)")
        if self.terms is None:
            raise ValueError("a sharded plan needs the query's terms bound first (with_terms)")
        return self.inner.hits_sql(spec, where)

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> ShardedPlan:
        """Every shard meets the constraint as one node would: the inner plan's way, chosen once for all."""
        return dataclasses.replace(self, inner=self.inner.constrained(spec, admitted_chunks))

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:
        return terms_sql(spec)

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> ShardedPlan:
        return dataclasses.replace(self, terms=BoundTerms(str(rows[0]["qt"]), str(rows[0]["qdf"])))


def terms_sql(spec: SearchSpec) -> sql.Composable:
    """One row: the query's ``qt`` and ``qdf`` as JSON text, read on the coordinator (the reference terms tables)."""

    def agg(cte: str, columns: tuple[tuple[str, str], ...], order: str) -> sql.Composable:
        cols = sql.SQL(", ").join(sql.Identifier(c) for c, _ in columns)
        return sql.SQL(
            "(SELECT coalesce(json_agg(x ORDER BY {order}), '[]') FROM (SELECT {cols} FROM {cte}) AS x)::text"
        ).format(order=sql.SQL(order), cols=cols, cte=sql.Identifier(cte))

    return sql.SQL("WITH {qt} SELECT {qt_json} AS qt, {qdf_json} AS qdf").format(
        qt=query_terms(spec),
        qt_json=agg("qt", QT_COLUMNS, "x.seg, x.ord"),
        qdf_json=agg("qdf", QDF_COLUMNS, "x.ord"),
    )
