"""The plans of a snapshot distributed over a Citus cluster: each a statement Citus pushes down in steps.

Few postings are summed on every shard (:class:`ShardedSumPlan`, the full
plan's expression, the same bits); otherwise a global theta from every shard's
seeds bounds the impact or dense plan's candidates on every shard, in one
statement (:class:`ShardedImpactPlan`, :class:`ShardedDensePlan`), the query's
terms read once while the search is planned and bound (docs/scaling.md).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from psycopg import sql

from ...snapshot.lexical_stats import weight_sql
from ...snapshot.segments import dead_rows_sql
from ...store.tables import segment_table
from ..spec import where_sql
from . import costs
from .admission import constrained, unfiltered
from .bounds import dense_ctes, read_depths_ctes
from .dense import DenseBlocks
from .parts import k1_b_avgdl, query_terms
from .plan import Budget, Statistics, base_params

if TYPE_CHECKING:
    from ..spec import SearchSpec

__all__ = [
    "BoundTerms",
    "ShardedDensePlan",
    "ShardedImpactPlan",
    "ShardedSumPlan",
    "sharded_sum_sql",
]


@dataclass(frozen=True)
class ShardedSumPlan:
    """Few postings on shards: every posting of the query's terms summed on the shard holding its chunk."""

    name: ClassVar[str | None] = "sharded"

    stats: Statistics
    budget: Budget
    postings: int
    terms: int

    def params(self) -> dict[str, Any]:
        return {
            "bm25_postings": self.postings,
            "bm25_terms": self.terms,
            "bm25_plan": self.name,
            **base_params(self.stats, self.budget),
        }

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        return sharded_sum_sql(spec, where)

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> ShardedSumPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:  # noqa: ARG002 (the Bm25Plan protocol)
        return None

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> ShardedSumPlan:  # noqa: ARG002 (the Bm25Plan protocol)
        return self


@dataclass(frozen=True)
class BoundTerms:
    """The query's terms in every segment (``qt``'s rows), read once from the reference tables and bound.

    Each segment's term ids, frequencies and idfs as arrays for the exact
    score on the shards, and the whole of ``qt`` as JSON for the coordinator's
    steps.  JSON carries each float8 exactly (Python writes the shortest text
    that reads back to the same double, PostgreSQL reads it back correctly
    rounded).
    """

    #: Per segment, in the layout's order: (segment id, term ids, qtfs, idfs).
    segments: tuple[tuple[int, tuple[int, ...], tuple[int, ...], tuple[float, ...]], ...]
    qt: str

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]], segments: Sequence[int]) -> BoundTerms:
        per = []
        for seg in segments:
            mine = [r for r in rows if int(r["seg"]) == int(seg)]
            per.append(
                (
                    int(seg),
                    tuple(int(r["term_id"]) for r in mine),
                    tuple(int(r["qtf"]) for r in mine),
                    tuple(float(r["idf"]) for r in mine),
                )
            )
        return cls(tuple(per), json.dumps([{c: r[c] for c, _ in QT_COLUMNS} for r in rows]))

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for seg, ids, qtfs, idfs in self.segments:
            out[f"bm25_ids_{seg}"] = list(ids)
            out[f"bm25_qtfs_{seg}"] = list(qtfs)
            out[f"bm25_idfs_{seg}"] = list(idfs)
        out["bm25_qt"] = self.qt
        return out


@dataclass(frozen=True)
class ShardedImpactPlan:
    """Many postings on shards: a global theta from every shard's seeds, the impact plan's read depths, then each
    shard scores only what can reach theta (:func:`sharded_pruned_sql`)."""

    name: ClassVar[str | None] = "sharded_impact"
    dense: ClassVar[bool] = False

    stats: Statistics
    budget: Budget
    postings: int
    terms: int
    bound: BoundTerms | None = None

    def params(self) -> dict[str, Any]:
        return _pruned_params(self.name, self.postings, self.terms, self.stats, self.budget, None, self.bound)

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:  # noqa: ARG002 (the Bm25Plan protocol)
        return sharded_pruned_sql(spec, dense=False)

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> ShardedImpactPlan:
        return dataclasses.replace(self, budget=_seed_reads(self.budget, spec, self.stats, admitted_chunks))

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:
        return sharded_terms_sql(spec)

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> ShardedImpactPlan:
        return dataclasses.replace(self, bound=BoundTerms.of(rows, self.stats.segments))


@dataclass(frozen=True)
class ShardedDensePlan:
    """The dense plan's bounds on shards: its blocks are reference tables, summed on the coordinator; each shard
    scores only what can reach the global theta (:func:`sharded_pruned_sql`)."""

    name: ClassVar[str | None] = "sharded_dense"
    dense: ClassVar[bool] = True

    stats: Statistics
    budget: Budget
    postings: int
    terms: int
    blocks: DenseBlocks
    bound: BoundTerms | None = None

    def params(self) -> dict[str, Any]:
        return _pruned_params(self.name, self.postings, self.terms, self.stats, self.budget, self.blocks, self.bound)

    def hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:  # noqa: ARG002 (the Bm25Plan protocol)
        return sharded_pruned_sql(spec, dense=True)

    def constrained(self, spec: SearchSpec, admitted_chunks: int) -> ShardedDensePlan:
        return dataclasses.replace(self, budget=_seed_reads(self.budget, spec, self.stats, admitted_chunks))

    def terms_sql(self, spec: SearchSpec) -> sql.Composable | None:
        return sharded_terms_sql(spec)

    def with_terms(self, rows: Sequence[Mapping[str, Any]]) -> ShardedDensePlan:
        return dataclasses.replace(self, bound=BoundTerms.of(rows, self.stats.segments))


def _pruned_params(
    name: str | None,
    postings: int,
    terms: int,
    stats: Statistics,
    budget: Budget,
    blocks: DenseBlocks | None,
    bound: BoundTerms | None,
) -> dict[str, Any]:
    out = {"bm25_postings": postings, "bm25_terms": terms, "bm25_plan": name, **base_params(stats, budget)}
    if blocks is not None:
        out.update(blocks.params())
    if bound is not None:
        out.update(bound.params())
    return out


def _seed_reads(budget: Budget, spec: SearchSpec, stats: Statistics, admitted_chunks: int) -> Budget:
    """Under a constraint the seeds are read down to a weight, not until enough pass: as many more as it rejects."""
    if not constrained(spec):
        return budget
    reads = costs.SEED_PER_TERM * max(1, stats.chunks) / max(1, admitted_chunks)
    return dataclasses.replace(budget, seed_reads=reads)


def sharded_sum_sql(spec: SearchSpec, where: sql.Composable) -> sql.Composable:
    """The sharded plan: per segment, every posting of the query's terms summed on the shard holding its chunk.

    One arm per segment, each a statement Citus pushes down whole: the
    postings grouped by their distribution column (``doc_id``) and joined to
    the co-located chunk table on it, so every task sums its own chunks'
    postings in lexeme order (the full plan's expression: the same bits),
    applies the filter and keeps its top ``depth * max_chunks`` by the total
    order; the coordinator merges the tasks' lists by the same order.  The
    query's term ids are also an array the shard's impact index is probed
    with (a join with the broadcast ``qt`` alone read every posting of the
    shard: the planner cannot see how few rows ``qt`` holds).  A segment placed by its partition value is one shard: its arm names it
    (``shard_key = '<value>'``), and a search routed to one tenant runs on
    that tenant's node alone.  Taken for few postings (:func:`sharded_pruned_sql` otherwise).
    """
    return sql.SQL(
        "WITH {qt}\nSELECT h.doc_id, h.chunk, h.score FROM ({arms}) AS h "
        "ORDER BY h.score DESC, h.doc_id, h.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(qt=query_terms(spec), arms=sql.SQL("\nUNION ALL\n").join(summed_arms(spec, where)))


def summed_arms(spec: SearchSpec, where: sql.Composable, *, when: sql.Composable | None = None) -> list[sql.Composable]:
    """The sharded plan's arm of each segment (:func:`sharded_sum_sql`), run only ``when`` (if given)."""
    k1, b, avgdl = k1_b_avgdl()
    weight = weight_sql(sql.SQL("qt.idf"), sql.SQL("p.tf"), sql.SQL("p.len"), k1, b, avgdl)
    return [
        sql.SQL(
            """(SELECT c.doc_id, c.chunk, s.score FROM (
        SELECT p.{dist}, p.row_id, sum(qt.qtf * {weight} ORDER BY qt.ord) AS score
        FROM {postings} AS p JOIN qt ON qt.seg = {seg} AND qt.term_id = p.term_id
        WHERE p.term_id = ANY (ARRAY(SELECT qt.term_id FROM qt WHERE qt.seg = {seg})) AND {pkey} AND {when}
        GROUP BY p.{dist}, p.row_id) AS s
    JOIN (SELECT {seg} AS seg, t.* FROM {chunks} AS t WHERE {tkey}) AS c ON c.{dist} = s.{dist} AND c.row_id = s.row_id
    WHERE {where}
    ORDER BY s.score DESC, c.doc_id, c.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint)"""
        ).format(
            dist=sql.Identifier(g.distribution or "doc_id"),
            weight=weight,
            postings=segment_table("postings", g.id),
            seg=sql.SQL("{}::bigint").format(sql.Literal(g.id)),
            pkey=g.key_sql("p"),
            when=sql.SQL("TRUE") if when is None else when,
            chunks=segment_table("chunks", g.id),
            tkey=g.key_sql("t"),
            where=where,
        )
        for g in spec.layout.segments
    ]


def sharded_pruned_sql(spec: SearchSpec, *, dense: bool) -> sql.Composable:
    """The impact or dense plan on shards: a global theta first, then every shard scores only what can reach it.

    One statement, which Citus runs as a few steps (docs/scaling.md):

    1. Seeds, on every shard: each term's postings down to the weight of its
       ``bm25_seed_reads``-th posting in impact order (read off the terms'
       quantiles: a range of the impact index, as ``LATERAL ... LIMIT`` over
       the query's terms cannot be pushed down), scored exactly from the
       forward table, filtered, each shard's best ``depth`` documents.
    2. theta, on the coordinator: the ``depth``-th best of those (a real score
       of real documents, so a lower bound of the branch's last).
    3. The candidates.  Impact (``dense`` false): each term's read depth by the
       impact plan's own rule (:func:`ranklock.search.bm25.bounds.read_depths_ctes`, on the coordinator),
       then on every shard each term's postings down to its depth and each
       chunk's bound.  Dense: the dense plan's bounds themselves
       (:func:`ranklock.search.bm25.bounds.dense_ctes`): the blocks are reference tables, summed on the
       coordinator, the other terms' postings read on the shards.
    4. Every shard: its candidates reaching theta scored exactly and filtered,
       its top ``depth * max_chunks``; the coordinator merges.

    The exact score is the forward table's, by the one expression every plan
    uses, with the query's term ids, frequencies and idfs bound as arrays
    (``bm25_ids_<segment>``: Citus pushes down no subquery correlated with a
    relation of the coordinator), so each chunk gets the bits it gets on one
    node.  When the seeds cannot bound theta (fewer than ``depth`` documents
    pass the filter), theta is 0: the impact plan reads every posting of the
    terms and scores every chunk read; the dense plan sums them (the sharded
    plan's arms, run only then).
    """
    nothing_to_check = unfiltered(spec)
    # The dead rows in one CTE of the statement: Citus sends them to the workers once (508 kB at 200k
    # chunks with 10 % replaced), where each use of the catalog's rows was sent again (7 times a search).
    dead = spec.layout.dead_rows > 0
    where = where_sql(spec, dead="dead_rows" if dead else None)
    seed_docs: list[sql.Composable] = []
    arms: list[sql.Composable] = []
    for g in spec.layout.segments:
        seg, dist = sql.SQL("{}::bigint").format(sql.Literal(g.id)), sql.Identifier(g.distribution or "doc_id")
        chunks, tkey = segment_table("chunks", g.id), g.key_sql("t")
        # The filter reads the chunk row (co-located with the forward row); nothing to read unfiltered.
        rows = (
            sql.SQL("")
            if nothing_to_check
            else sql.SQL(
                " JOIN (SELECT {seg} AS seg, t.* FROM {chunks} AS t WHERE {tkey}) AS c "
                "ON c.{dist} = f.{dist} AND c.row_id = f.row_id"
            ).format(seg=seg, chunks=chunks, tkey=tkey, dist=dist)
        )
        parts = {
            "seg": seg,
            "dist": dist,
            "postings": segment_table("postings", g.id),
            "forward": segment_table("forward", g.id),
            "chunks": chunks,
            "xkey": g.key_sql("x"),
            "fkey": g.key_sql("f"),
            "tkey": tkey,
            "score": bound_forward_score(g.id),
            "where": where,
            "rows": rows,
        }
        seed_docs.append(
            sql.SQL(
                "(SELECT max({score}) AS best FROM {forward} AS f{rows} "
                "WHERE (f.{dist}, f.row_id) IN (SELECT e.{dist}, e.row_id FROM seedw CROSS JOIN LATERAL ("
                "SELECT x.{dist}, x.row_id FROM {postings} AS x WHERE x.term_id = seedw.term_id AND x.w >= seedw.f "
                "AND {xkey}) AS e WHERE seedw.seg = {seg}) AND {fkey} "
                "AND {where} GROUP BY f.{dist}, f.doc_id ORDER BY best DESC LIMIT %(depth)s::bigint)"
            ).format(**parts)
        )
        candidates = (
            # An array of row ids, so each shard probes its forward rows (and their chunks) by index: as a
            # semi-join with the broadcast candidates the planner scanned the whole chunk table of the shard.
            sql.SQL(
                "f.row_id = ANY (ARRAY(SELECT k.row_id FROM cand AS k "
                "WHERE k.seg = {seg} AND k.bound >= (SELECT cut FROM theta)))"
            )
            if dense
            else sql.SQL(
                """(f.{dist}, f.row_id) IN (
            SELECT e.{dist}, e.row_id FROM thr_all AS thr CROSS JOIN LATERAL (
                SELECT x.{dist}, x.row_id, x.w FROM {postings} AS x
                WHERE x.term_id = thr.term_id AND x.w >= thr.f AND {xkey}) AS e
            WHERE thr.seg = {seg}
            GROUP BY e.{dist}, e.row_id
            HAVING (SELECT fs.fsum FROM fs WHERE fs.seg = {seg}) + sum(thr.scale * e.w - thr.fq) >= (SELECT cut FROM theta))"""
            )
        ).format(**parts)
        arms.append(
            sql.SQL(
                """(SELECT c.doc_id, c.chunk, s.score FROM (
        SELECT f.{dist}, f.row_id, {score} AS score FROM {forward} AS f WHERE {candidates} AND {fkey}) AS s
    JOIN (SELECT {seg} AS seg, t.* FROM {chunks} AS t WHERE {tkey}) AS c ON c.{dist} = s.{dist} AND c.row_id = s.row_id
    WHERE {where}
    ORDER BY s.score DESC, c.doc_id, c.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint)"""
            ).format(candidates=candidates, **parts)
        )
    if dense:
        middle = dense_ctes(spec, "cand")
        arms += summed_arms(spec, where, when=sql.SQL("(SELECT theta FROM theta) = 0"))
    else:
        middle = sql.SQL(
            """{depths},
thr_all AS MATERIALIZED (
    -- theta 0 (the seeds could not bound it): every term read whole, every chunk read scored.
    SELECT seg, term_id, scale, f, fq FROM thr
    UNION ALL SELECT qt.seg, qt.term_id, qt.scale, 0::float8, 0::float8 FROM qt WHERE (SELECT theta FROM theta) = 0
),
fs AS MATERIALIZED (SELECT seg, sum(fq) AS fsum FROM thr_all GROUP BY seg)"""
        ).format(depths=read_depths_ctes())
    return sql.SQL(
        """WITH {qt},{dead}
seedw AS MATERIALIZED (
    -- Per segment and term: the weight its seeds are read down to, its bm25_seed_reads-th posting's
    -- (the quantile at or past it; everything when the term has no more, or no quantile).
    SELECT qt.seg, qt.term_id,
           CASE WHEN qt.df <= r.n OR cardinality(qt.wq) = 0 THEN 0::float8
                ELSE qt.wq[least(cardinality(qt.wq), greatest(1, ceil(log(2::numeric, (r.n / %(bm25_level_base)s::float8)::numeric))::int + 1))]
           END AS f
    FROM qt CROSS JOIN LATERAL (SELECT greatest(1, ceil(%(bm25_seed_reads)s::float8 * qt.share))::float8 AS n) AS r
),
seed_docs AS MATERIALIZED ({seed_docs}),
theta AS MATERIALIZED (
    -- Fewer than depth seed documents pass the filter: theta = 0.
    SELECT th.theta, th.theta - 1e-9 * (1 + th.theta) AS cut FROM (
        SELECT coalesce((SELECT best FROM seed_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s::bigint - 1)), 0)
               AS theta) AS th
),
{middle}
SELECT h.doc_id, h.chunk, h.score FROM ({arms}) AS h
ORDER BY h.score DESC, h.doc_id, h.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"""
    ).format(
        qt=bound_terms(),
        seed_docs=sql.SQL("\nUNION ALL\n").join(seed_docs),
        dead=sql.SQL("\ndead_rows AS MATERIALIZED ({}),").format(dead_rows_sql(spec.layout)) if dead else sql.SQL(""),
        middle=middle,
        arms=sql.SQL("\nUNION ALL\n").join(arms),
    )


def bound_forward_score(segment_id: int) -> sql.Composable:
    """:func:`ranklock.search.bm25.parts.forward_score` of forward row ``f`` of one segment, its query terms bound as arrays (sharded plans)."""
    names = {k: sql.Placeholder(f"bm25_{k}_{int(segment_id)}") for k in ("ids", "qtfs", "idfs")}
    k1, b, avgdl = k1_b_avgdl()
    weight = weight_sql(sql.SQL("x.idf"), sql.SQL("f.tfs[x.at]"), sql.SQL("f.len"), k1, b, avgdl)
    return sql.SQL(
        "(SELECT coalesce(sum(x.qtf * {weight} ORDER BY x.n), 0) FROM ("
        "SELECT y.qtf, y.idf, y.n, array_position(f.tids, y.tid) AS at "
        "FROM unnest({ids}::int[], {qtfs}::int[], {idfs}::float8[]) WITH ORDINALITY AS y(tid, qtf, idf, n) OFFSET 0) AS x "
        "WHERE x.at IS NOT NULL)"
    ).format(weight=weight, **names)


#: The columns of ``qt`` (:func:`ranklock.search.bm25.parts.query_terms`), as a sharded plan binds them.
QT_COLUMNS = (
    ("seg", "bigint"),
    ("term_id", "int"),
    ("ord", "bigint"),
    ("qtf", "int"),
    ("idf", "float8"),
    ("df", "bigint"),
    ("wq", "float8[]"),
    ("min_df", "int"),
    ("share", "float8"),
    ("scale", "float8"),
    ("max_w", "float8"),
)


def sharded_terms_sql(spec: SearchSpec) -> sql.Composable:
    """The query's terms in every segment (``qt``'s rows), in lexeme order: what a sharded plan binds."""
    cols = sql.SQL(", ").join(sql.SQL("qt.{}").format(sql.Identifier(c)) for c, _ in QT_COLUMNS)
    return sql.SQL("WITH {qt} SELECT {cols} FROM qt ORDER BY qt.seg, qt.ord").format(qt=query_terms(spec), cols=cols)


def bound_terms() -> sql.Composable:
    """CTE ``qt`` of a sharded plan, from the terms :meth:`ShardedImpactPlan.with_terms` bound."""
    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in QT_COLUMNS)
    return sql.SQL("qt AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%(bm25_qt)s::jsonb) AS q({cols}))").format(
        cols=cols
    )
