"""Every posting of the query's terms summed: the full plan, and the pruned plans' fallback when theta is 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from ...snapshot.lexical_stats import weight_sql
from .admission import admits, checked_rows, constrained, unfiltered
from .parts import forward, forward_score, k1_b_avgdl, postings, rows_of

if TYPE_CHECKING:
    from ..spec import SearchSpec
    from .plan import Admission

__all__ = ["summed_ctes"]


def summed_ctes(spec: SearchSpec, admit: Admission | None, *, when: sql.Composable, impact: bool) -> sql.Composable:
    """CTEs ``summed``, ``summed_cut`` and ``scored``: every posting of the query's terms summed (when ``when``).

    The full plan (not ``impact``) sums every posting exactly, in lexeme order
    (``ORDER BY qt.ord``: the same operations in the same order as the forward
    table's score, so the same bits), and its survivors keep that score: reading
    the forward table again would cost a correlated subquery per chunk (7 of
    the 16 ms of a SciFact search).  The impact plan's fallback sums only to
    find the cut, and scores its survivors from the forward table.
    """
    k1, b, avgdl = k1_b_avgdl()
    weight = weight_sql(sql.SQL("qt.idf"), sql.SQL("p.tf"), sql.SQL("p.len"), k1, b, avgdl)
    parts = {
        "weight": weight,
        "postings": postings(spec),
        "when": when,
        "summed_top": _summed_top(spec, admit),
        # Filtered: only chunks passing it are worth scoring exactly.
        "summed_where": sql.SQL("")
        if unfiltered(spec)
        else sql.SQL("AND {}").format(admits(spec, admit, "summed", checked="summed_ok")),
        "summed_ok": sql.SQL("summed_ok AS MATERIALIZED ({}),\n").format(checked_rows(spec, "summed"))
        if constrained(spec) and (admit is None or admit.way != "set")
        else sql.SQL(""),
    }
    # One posting read for both: exact and in lexeme order for the full plan, order-free for the fallback.
    comment, order = (
        ("-- Every chunk with a posting, its exact score: contributions summed in lexeme order ...", " ORDER BY qt.ord")
        if not impact
        else (
            "-- Every chunk with a posting, its exact contributions summed as float8\n"
            "    -- (fast, but the last bit depends on the order rows arrive in) ...",
            "",
        )
    )
    summed = (
        """summed AS MATERIALIZED (
    """
        + comment
        + """
    SELECT qt.seg, p.row_id, sum(qt.qtf * {weight}"""
        + order
        + """) AS s FROM qt CROSS JOIN LATERAL (
        SELECT x.row_id, x.tf, x.len FROM {postings} AS x WHERE x.seg = qt.seg AND x.term_id = qt.term_id) AS p
    WHERE {when}
    GROUP BY qt.seg, p.row_id
),
{summed_ok}summed_cut AS MATERIALIZED (
    -- ... so only the float top (and anything within the margin of its last)
    -- is scored exactly; no chunk outside can beat it.
    SELECT CASE WHEN count(*) < %(depth)s::bigint * %(bm25_max_chunks)s::bigint THEN '-Infinity'::float8
                ELSE min(s) - 1e-9 * (1 + abs(min(s))) END AS cut
    FROM ({summed_top}) AS t
),"""
    )
    if not impact:
        return sql.SQL(
            summed
            + """
scored AS MATERIALIZED (
    -- The chunks that can reach the top, with the exact scores summed above.
    SELECT summed.seg, summed.row_id, summed.s AS score FROM summed
    WHERE summed.s >= (SELECT cut FROM summed_cut) {summed_where}
)"""
        ).format(**parts)
    return sql.SQL(
        summed
        + """
survivors AS MATERIALIZED (
    SELECT cand.seg, cand.row_id FROM cand WHERE cand.bound >= (SELECT cut FROM theta2)
    UNION SELECT summed.seg, summed.row_id FROM summed WHERE summed.s >= (SELECT cut FROM summed_cut) {summed_where}
),
scored AS MATERIALIZED (
    -- Scored exactly from the forward table, in lexeme order: the same last bit as every other plan.
    SELECT f.seg, f.row_id, {score} AS score FROM {forward} AS f JOIN qids AS q ON q.seg = f.seg
    WHERE {rows}
)"""
    ).format(**parts, score=forward_score(), forward=forward(spec), rows=rows_of("survivors"))


def _summed_top(spec: SearchSpec, admit: Admission | None) -> sql.Composable:
    """The float sums of the top ``depth * max_chunks_per_doc`` summed chunks passing the constraints."""
    check = (
        sql.SQL("") if unfiltered(spec) else sql.SQL(" WHERE {}").format(admits(spec, admit, "m", checked="summed_ok"))
    )
    return sql.SQL(
        "SELECT m.s FROM summed AS m{admits} ORDER BY m.s DESC LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(admits=check)
