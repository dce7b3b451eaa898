"""How deep each term is read, and the upper bound of every chunk read: the impact and dense plans' middle.

Margins (1e-9 relative on theta, 1e-6 on maximum weights) only ever keep
more chunks, so float rounding in the bounds cannot drop a document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from .parts import postings, union

if TYPE_CHECKING:
    from ..spec import SearchSpec

__all__ = ["dense_ctes", "impact_ctes", "read_depths_ctes", "rest_sql"]


def read_depths_ctes() -> sql.Composable:
    """CTEs ``ranked`` to ``thr`` (seg, term_id, scale, f, fq): how deep each term of each segment is read (step 2).

    From the query's terms (``qt``) and ``theta`` alone.
    """
    return sql.SQL(
        """ranked AS MATERIALIZED (
    SELECT qt.seg, qt.term_id, qt.df, qt.max_w, qt.wq, qt.scale,
           row_number() OVER (PARTITION BY qt.seg ORDER BY qt.max_w, qt.term_id) AS pos
    FROM qt
),
sizes AS MATERIALIZED (
    SELECT seg, count(*)::int AS n, coalesce(max(cardinality(wq)), 0) AS levels FROM qt GROUP BY seg
),
opts AS (
    -- Terms 1..j (smallest maxima) unread, the others read to level i: the
    -- top base * 2^i postings, everything when the term has no more.  A term
    -- adds at most scale times a weight of its segment, so its bound is
    -- scale times the weight it is read to.
    SELECT z.seg, j.j, i.i,
           sum(CASE WHEN r.pos <= j.j THEN r.max_w
                    WHEN r.df <= %(bm25_level_base)s::bigint * 2 ^ i.i THEN 0
                    ELSE r.scale * r.wq[i.i + 1] END) AS fsum,
           sum(CASE WHEN r.pos <= j.j THEN 0 ELSE least(r.df, %(bm25_level_base)s::bigint * 2 ^ i.i) END) AS cost
    FROM sizes AS z
    CROSS JOIN LATERAL generate_series(0, z.n) AS j(j)
    CROSS JOIN LATERAL generate_series(0, z.levels) AS i(i)
    JOIN ranked AS r ON r.seg = z.seg
    WHERE (SELECT theta FROM theta) > 0
    GROUP BY z.seg, j.j, i.i
),
pick AS MATERIALIZED (
    SELECT DISTINCT ON (o.seg) o.seg, o.j, least(o.i + %(bm25_deeper)s::int, z.levels) AS i
    FROM opts AS o JOIN sizes AS z ON z.seg = o.seg CROSS JOIN theta AS th
    WHERE o.fsum <= th.cut OR o.fsum = 0
    ORDER BY o.seg, o.cost, o.i, o.j DESC
),
thr AS MATERIALIZED (
    -- f: every posting of the term with w >= f is read; one not read has w < f, and adds less than scale * f.
    SELECT r.seg, r.term_id, r.scale, t.f, r.scale * t.f AS fq
    FROM ranked AS r JOIN pick AS pk ON pk.seg = r.seg
    CROSS JOIN LATERAL (
        SELECT CASE WHEN r.pos <= pk.j THEN least(pk.i, %(bm25_skip_level)s::int) ELSE pk.i END AS lvl) AS l
    CROSS JOIN LATERAL (
        SELECT CASE WHEN r.df <= %(bm25_level_base)s::bigint * 2 ^ l.lvl THEN 0::float8 ELSE r.wq[l.lvl + 1] END AS f) AS t
)"""
    )


def impact_ctes(spec: SearchSpec, name: str) -> sql.Composable:
    """The impact plan's CTEs from read depths to ``name`` (seg, row_id, bound): steps 2 and 3, per segment.

    A chunk lives in one segment, so its bound only involves its segment's
    read depths: each segment picks its own (the cheapest whose unread bound
    stays under the one theta).
    """
    return sql.SQL(
        """{depths},
{name} AS MATERIALIZED (
    -- Upper bound of each chunk read: its contributions read, plus scale * f for the terms it was not seen in.
    SELECT thr.seg, e.row_id, fs.fsum + sum(thr.scale * e.w - thr.fq) AS bound
    FROM thr CROSS JOIN LATERAL (
        SELECT p.row_id, p.w FROM {postings} AS p
        WHERE p.seg = thr.seg AND p.term_id = thr.term_id AND p.w >= thr.f) AS e
    JOIN (SELECT seg, sum(fq) AS fsum FROM thr GROUP BY seg) AS fs ON fs.seg = thr.seg
    GROUP BY thr.seg, e.row_id, fs.fsum
    HAVING fs.fsum + sum(thr.scale * e.w - thr.fq) >= (SELECT cut FROM theta)
)"""
    ).format(depths=read_depths_ctes(), postings=postings(spec), name=sql.Identifier(name))


def rest_sql(spec: SearchSpec) -> sql.Composable:
    """The dense plan's ``rest`` rows (seg, row_id, r): each chunk's bound from the query's terms without blocks."""
    return sql.SQL(
        """SELECT qt.seg, p.row_id, sum(qt.scale * p.w) AS r FROM qt CROSS JOIN LATERAL (
        SELECT x.row_id, x.w FROM {postings} AS x WHERE x.seg = qt.seg AND x.term_id = qt.term_id) AS p
    WHERE qt.df < qt.min_df AND (SELECT theta FROM theta) > 0
    GROUP BY qt.seg, p.row_id"""
    ).format(postings=postings(spec))


def dense_ctes(spec: SearchSpec, name: str) -> sql.Composable:
    """The dense plan's CTEs: ``name`` (seg, row_id, bound) from the dense terms' summed blocks and the others' postings.

    Per segment: a chunk's bound is ``m * (r + S * (1 + DENSE_REL)) +
    DENSE_ABS``-like: S the float4 sum of qtf times its weights of the
    segment's dense terms (0 where a block has no row), r the float8 sum of
    its bounds of the other terms (their postings read whole), and ``m`` the
    largest factor by which a dense term's weight can grow under the
    snapshot's statistics.  A chunk without a posting of the other terms is
    kept when S exceeds the cut brought to S's scale, found as bits by
    binary_quantize without leaving C; only the set bits' positions are
    turned into row ids.  A chunk of the other terms is looked up in S only
    when r plus the dense terms' maximum contributions reaches the cut.
    """
    return sql.SQL(
        """dterms AS MATERIALIZED (
    -- Per segment: its dense query terms' largest growth factor, and their largest contributions summed.
    SELECT qt.seg, max(qt.scale / qt.qtf) AS m, sum(qt.max_w) AS dmax FROM qt
    WHERE qt.df >= qt.min_df GROUP BY qt.seg
),
qtfv AS MATERIALIZED (
    -- Each qtf of a repeated term as a vector of a block's length, made once: made per block, with
    -- array_fill and a cast of its array, it cost ~0.15 ms a block, more than summing the block.
    SELECT DISTINCT qt.qtf, array_fill(qt.qtf::real, ARRAY[%(bm25_dense_block)s::int])::vector AS v
    FROM qt WHERE qt.qtf > 1
),
blocks AS MATERIALIZED (
    -- S per segment and block of row ids, summed by pgvector (float4); a term the query repeats, times its qtf
    -- (a short last block by the start of the qtf vector).  Each block is stored as a sparsevec (its postings
    -- only) and made a dense vector once (OFFSET 0: the cast is not pasted into each use of d.v).
    SELECT qt.seg, d.blk, sum(CASE WHEN qt.qtf = 1 THEN d.v
                                   WHEN vector_dims(d.v) = %(bm25_dense_block)s::int THEN d.v * k.v
                                   ELSE d.v * subvector(k.v, 1, vector_dims(d.v)) END) AS s
    FROM qt LEFT JOIN qtfv AS k ON k.qtf = qt.qtf CROSS JOIN LATERAL (
        SELECT x.blk, x.v FROM {dense} AS x WHERE x.seg = qt.seg AND x.term_id = qt.term_id OFFSET 0) AS d
    WHERE qt.df >= qt.min_df AND (SELECT theta FROM theta) > 0
    GROUP BY qt.seg, d.blk
),
dcut AS MATERIALIZED (
    -- cut: the theta cut brought to S's scale, (cut - abs) / (1 + rel) / m as float4, and as a vector.
    SELECT dt.seg, dc.cut, array_fill(dc.cut, ARRAY[%(bm25_dense_block)s::int])::vector AS v, dt.m, dt.dmax
    FROM dterms AS dt CROSS JOIN LATERAL (
        SELECT ((th.cut - %(bm25_dense_abs)s::float8) / (1 + %(bm25_dense_rel)s::float8) / dt.m)::real AS cut
        FROM theta AS th) AS dc
),
bq AS MATERIALIZED (
    -- Bit i of a block: S > cut, the bound of a chunk without other postings can reach
    -- theta.  The difference of two floats is positive exactly when the first is larger:
    -- no rounding hides a chunk here.
    -- S rides along: joining bq back to blocks for it was a nested loop rescanning blocks
    -- (64 kB a row) once per block wherever the planner misjudged their number.
    SELECT b.seg, b.blk, vector_dims(b.s) AS n, b.s,
           binary_quantize(b.s - CASE WHEN vector_dims(b.s) = %(bm25_dense_block)s::int THEN dc.v
                                      ELSE subvector(dc.v, 1, vector_dims(b.s)) END) AS bits
    FROM blocks AS b JOIN dcut AS dc ON dc.seg = b.seg
),
rest AS MATERIALIZED (
    -- The other terms' postings, read whole (the plan is chosen only when they are few), as bounds.
    {rest}
),
hits AS (
    -- Positions of the set bits: the bit string split on '1', the pieces' lengths summed
    -- (octet_length: length() would count the UTF-8 characters of each piece).  S of each read
    -- from its block alone (subvector): turning a whole block into real[] cost ~0.15 ms, more than
    -- the few chunks of a block that need it.
    SELECT b.seg, b.blk::bigint * %(bm25_dense_block)s::bigint + p.pos - 1 AS row_id,
           (subvector(b.s, p.pos::int, 1)::real[])[1]::float8 AS s
    FROM bq AS b CROSS JOIN LATERAL (
        SELECT sum(octet_length(z.piece) + 1) OVER (ORDER BY z.k) AS pos
        FROM unnest(string_to_array(b.bits::text, '1')) WITH ORDINALITY AS z(piece, k)) AS p
    WHERE bit_count(b.bits) > 0 AND p.pos <= b.n
),
{name} AS MATERIALIZED (
    -- A chunk both in rest and among the hits keeps its larger bound, rest's (r >= 0).
    SELECT x.seg, x.row_id, max(x.bound) AS bound FROM (
        SELECT y.seg, y.row_id, y.bound FROM (
            SELECT r.seg, r.row_id,
                   r.r + coalesce((subvector(b.s, mod(r.row_id, %(bm25_dense_block)s::bigint)::int + 1, 1)::real[])[1],
                                  0)::float8
                         * coalesce(dc.m, 0) * (1 + %(bm25_dense_rel)s::float8) + %(bm25_dense_abs)s::float8 AS bound
            FROM rest AS r LEFT JOIN dcut AS dc ON dc.seg = r.seg
            LEFT JOIN bq AS b ON b.seg = r.seg AND b.blk = (r.row_id / %(bm25_dense_block)s::bigint)::int
            WHERE r.r + coalesce(dc.dmax, 0) >= (SELECT cut FROM theta)) AS y
        WHERE y.bound >= (SELECT cut FROM theta)
        UNION ALL
        SELECT h.seg, h.row_id, h.s * dc.m * (1 + %(bm25_dense_rel)s::float8) + %(bm25_dense_abs)s::float8
        FROM hits AS h JOIN dcut AS dc ON dc.seg = h.seg
    ) AS x
    GROUP BY x.seg, x.row_id
    HAVING max(x.bound) >= (SELECT cut FROM theta)
)"""
    ).format(
        dense=union(spec, "dense", "t.term_id, t.blk, t.v::vector AS v"),
        rest=rest_sql(spec),
        name=sql.Identifier(name),
    )
