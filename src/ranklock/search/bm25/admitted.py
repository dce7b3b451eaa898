"""The admitted plan: under a hard constraint, every admitted chunk holding a query term scored, nothing else read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from psycopg import sql

from ..spec import where_sql
from .parts import forward, forward_score, query_terms, rows_of, top

if TYPE_CHECKING:
    from ..spec import SearchSpec
    from .plan import Bm25Plan

__all__ = ["AdmittedPlan"]


@dataclass(frozen=True)
class AdmittedPlan:
    """What a pruned plan becomes when the constraint admits few enough chunks to score them all (pruned.choose_way).

    ``source`` is the impact or dense plan it replaced: its parameters are
    still bound (the statement shows what was chosen against what).
    """

    name: ClassVar[str | None] = "admitted"

    source: Bm25Plan

    def params(self) -> dict[str, Any]:
        return {**self.source.params(), "bm25_plan": self.name}

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:  # noqa: ARG002 (the Bm25Plan protocol: its CTE adm is the constraint)
        return sql.SQL(
            """WITH {qt},
adm AS MATERIALIZED (SELECT c.seg, c.row_id FROM {rows} AS c WHERE {where}),
scored AS MATERIALIZED (
    -- && keeps the chunks holding a query term.
    SELECT f.seg, f.row_id, {score} AS score FROM {forward} AS f JOIN qids AS q ON q.seg = f.seg
    WHERE {adm} AND f.tids && q.ids
)
{top}"""
        ).format(
            qt=query_terms(spec),
            rows=spec.filter_rows,
            where=where_sql(spec),
            score=forward_score(),
            forward=forward(spec),
            adm=rows_of("adm"),
            top=top(spec),
        )

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> AdmittedPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:  # noqa: ARG002 (the Bm25Plan protocol)
        return None

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> AdmittedPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self
