"""The SQL every BM25 plan is built from: the query's terms, a chunk's exact score, a segment union, the top.

Weights are float8, computed by one expression (ranklock.snapshot.lexical_stats.weight_sql:
by the builder for the postings and the forward table, by the query for a
chunk's tsvector), and a score is their float8 sum in one fixed order,
ascending term id: every plan adds the same weights in the same order, so
every plan gives the same last bit and the plans differ only in which chunks
they score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from ...snapshot.lexical_stats import weight_sql
from ...snapshot.segments import union_sql
from ..spec import shard_ids

if TYPE_CHECKING:
    from ...store.tables import SegmentKind
    from ..spec import SearchSpec

__all__ = [
    "QDF_COLUMNS",
    "QT_COLUMNS",
    "doc_best",
    "forward",
    "forward_score",
    "k1_b_avgdl",
    "postings",
    "query_terms",
    "rows_of",
    "score",
    "top",
    "union",
]


def union(spec: SearchSpec, kind: SegmentKind, columns: str) -> sql.Composable:
    """One kind of BM25 table over the snapshot's segments, each row tagged with its segment (``seg``)."""
    return union_sql(spec.layout, kind, sql.SQL(columns))


def k1_b_avgdl() -> tuple[sql.Composable, sql.Composable, sql.Composable]:
    return sql.SQL("%(k1)s::float8"), sql.SQL("%(b)s::float8"), sql.SQL("%(bm25_avgdl)s::float8")


def query_terms(spec: SearchSpec) -> sql.Composable:
    """CTEs ``qlex``, ``qseg``, ``qdf``, ``qt`` and ``qids``: the query's terms, in every segment that has them.

    ``qlex``: each lexeme of the query, how often the query holds it (``qtf``,
    rule bm25/2, ranklock.snapshot.rules; 1 under bm25/1) and its place in
    lexeme byte order (``ord``), the one order every score is summed in.
    ``qdf``: the snapshot's df of each (its segments' summed, its dead chunks
    subtracted) and its idf, by the builder's very expression.  ``qt``: one
    row per (segment, term): the segment's term id and impact quantiles
    ``wq`` (its own weights), and ``scale``: a weight ``w`` of that segment's
    postings adds at most ``scale * w`` to a score under the snapshot's
    statistics (qtf times the idf ratio times the length factor);
    ``max_w`` is the most the term adds to a chunk of the segment, with a
    margin.  ``qids``: per segment, its term ids with their qtf and idf in
    ``ord`` order, for scoring a chunk from the forward table.
    """
    if spec.layout.on_shard:
        return _bound_query_terms()
    qtf = sql.SQL("q.qtf") if spec.rules.query_tf else sql.SQL("1")
    template = """qlex AS MATERIALIZED (
    SELECT q.lexeme, {qtf} AS qtf, row_number() OVER (ORDER BY q.lexeme COLLATE "C") AS ord
    FROM ranklock.query_term_freqs(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s) AS q
),
qseg AS MATERIALIZED (
    SELECT t.seg, t.term_id, t.lexeme, t.df, t.idf, t.max_w, t.wq FROM {terms} AS t
    WHERE t.lexeme = ANY (ARRAY(SELECT qlex.lexeme FROM qlex))
),
qdf AS MATERIALIZED (
    SELECT l.lexeme, l.qtf, l.ord, ln(1 + (%(bm25_chunks)s::float8 - x.df + 0.5) / (x.df + 0.5)) AS idf
    FROM qlex AS l JOIN (
        SELECT s.lexeme, sum(s.df) - coalesce(max(dt.chunks), 0) AS df FROM {stats} AS s
        LEFT JOIN ranklock.snapshot_dead_terms AS dt ON dt.snapshot_id = %(bm25_sid)s::bigint AND dt.lexeme = s.lexeme
        GROUP BY s.lexeme
    ) AS x ON x.lexeme = l.lexeme
),
qt AS MATERIALIZED (
    SELECT s.seg, s.term_id, d.ord, d.qtf, d.idf, s.df, s.wq, g.min_df, g.share,
           d.qtf * (d.idf / s.idf) * g.lf AS scale,
           d.qtf * (d.idf / s.idf) * g.lf * s.max_w::float8 * 1.000001 AS max_w
    FROM qseg AS s JOIN qdf AS d ON d.lexeme = s.lexeme
    JOIN unnest(%(bm25_segs)s::bigint[], %(bm25_lf)s::float8[], %(bm25_min_df)s::int[], %(bm25_share)s::float8[])
      AS g(seg, lf, min_df, share)
      ON g.seg = s.seg
),
qids AS MATERIALIZED (
    SELECT seg, array_agg(term_id ORDER BY ord) AS ids, array_agg(qtf ORDER BY ord) AS qtfs,
           array_agg(idf ORDER BY ord) AS idfs
    FROM qt GROUP BY seg
)"""
    # A read routed to fewer segments still counts the df over all of the snapshot's.
    stats = (
        sql.SQL(
            "(SELECT t.lexeme, t.df FROM {} AS t WHERE t.lexeme = ANY (ARRAY(SELECT qlex.lexeme FROM qlex)))"
        ).format(union_sql(spec.layout.full(), "terms", sql.SQL("t.lexeme, t.df")))
        if spec.layout.routed
        else sql.SQL("qseg")
    )
    return sql.SQL(template).format(
        qtf=qtf, terms=union(spec, "terms", "t.term_id, t.lexeme, t.df, t.idf, t.max_w, t.wq"), stats=stats
    )


#: The columns of ``qt`` (:func:`query_terms`), as a shard reads them bound (ranklock.search.bm25.sharded).
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
#: The columns of ``qdf``, as a shard reads them bound.
QDF_COLUMNS = (("lexeme", "text"), ("qtf", "int"), ("ord", "bigint"), ("idf", "float8"))


def _bound_query_terms() -> sql.Composable:
    """CTEs ``qdf``, ``qt`` and ``qids`` on one shard: the coordinator's, bound as JSON (ranklock.search.bm25.sharded).

    A shard has neither the snapshot's dead-term counts nor every segment's
    df: the coordinator computed them once, by :func:`query_terms`.
    """

    def recordset(name: str, columns: tuple[tuple[str, str], ...]) -> sql.Composable:
        cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in columns)
        return sql.SQL("SELECT * FROM jsonb_to_recordset({}::jsonb) AS q({})").format(sql.Placeholder(name), cols)

    return sql.SQL(
        """qdf AS MATERIALIZED ({qdf}),
qt AS MATERIALIZED ({qt}),
qids AS MATERIALIZED (
    SELECT seg, array_agg(term_id ORDER BY ord) AS ids, array_agg(qtf ORDER BY ord) AS qtfs,
           array_agg(idf ORDER BY ord) AS idfs
    FROM qt GROUP BY seg
)"""
    ).format(qdf=recordset("bm25_qdf", QDF_COLUMNS), qt=recordset("bm25_qt", QT_COLUMNS))


def score(alias: str = "c") -> sql.Composable:
    """The BM25 score of chunk ``alias`` from its tsvector, over the query's terms (CTE ``qdf``).

    Term contributions (``qtf * w``) are summed in lexeme order (``ord``), the
    one order every plan uses, so the result does not depend on the order
    rows arrive in.
    """
    k1, b, avgdl = k1_b_avgdl()
    a = sql.Identifier(alias)
    weight = weight_sql(sql.SQL("d.idf"), sql.SQL("x.tf"), sql.SQL("{}.doc_len").format(a), k1, b, avgdl)
    return sql.SQL(
        "(SELECT coalesce(sum(d.qtf * {weight} ORDER BY d.ord), 0) "
        "FROM unnest({a}.tsv) AS u JOIN qdf AS d ON d.lexeme = u.lexeme "
        "CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1) AS tf) AS x)"
    ).format(weight=weight, a=a)


def forward_score(alias: str = "f", ids: str = "q") -> sql.Composable:
    """The BM25 score of forward-table row ``alias`` over the query's terms of its segment (``qids`` row ``ids``).

    The weights are computed from the chunk's term frequencies and length
    with the snapshot's statistics, by the builder's expression, and summed
    in lexeme order: the same bits as :func:`score` and every other plan,
    in whatever segment the chunk is.  Each query term's place in the chunk
    is searched once (``OFFSET 0`` keeps the planner from pasting the search
    into both uses of ``tf`` in the expression) and the terms the chunk lacks
    are dropped before the weights: the same additions in the same order as
    summing their NULLs, at two thirds of the cost.
    """
    k1, b, avgdl = k1_b_avgdl()
    f = sql.Identifier(alias)
    weight = weight_sql(
        sql.SQL("x.idf"), sql.SQL("{f}.tfs[x.at]").format(f=f), sql.SQL("{}.len").format(f), k1, b, avgdl
    )
    return sql.SQL(
        "(SELECT coalesce(sum(x.qtf * {weight} ORDER BY x.n), 0) FROM ("
        "SELECT y.qtf, y.idf, y.n, array_position({f}.tids, y.tid) AS at "
        "FROM unnest({q}.ids, {q}.qtfs, {q}.idfs) WITH ORDINALITY AS y(tid, qtf, idf, n) OFFSET 0) AS x "
        "WHERE x.at IS NOT NULL)"
    ).format(weight=weight, f=f, q=sql.Identifier(ids))


def forward(spec: SearchSpec) -> sql.Composable:
    return union(spec, "forward", "t.row_id, t.doc_no, t.tids, t.tfs, t.len")


def postings(spec: SearchSpec) -> sql.Composable:
    return union(spec, "postings", "t.term_id, t.w, t.row_id, t.tf, t.len")


def rows_of(cte: str, alias: str = "f") -> sql.Composable:
    """``f.row_id = ANY (ARRAY(<cte's row ids of f's segment>))``: one ordered pass over each segment's table ``f``.

    = ANY of an array: the index scan visits the rows in row_id order instead
    of one random probe each, which the planner would pick for a CTE it
    thinks small.  ``f.seg`` is a constant in each arm of the union, so each
    arm gets the row ids of its own segment only.
    """
    c, f = sql.Identifier(cte), sql.Identifier(alias)
    return sql.SQL("{f}.row_id = ANY (ARRAY(SELECT {c}.row_id FROM {c} WHERE {c}.seg = {f}.seg))").format(c=c, f=f)


def doc_best(spec: SearchSpec, rows: str) -> sql.Composable:
    """(seg, doc, best): each document's exact best score over the chunks in CTE ``rows``, all admitted.

    doc_no orders like doc_id within a segment, and a live document lives in
    one: the chunk rows need not be read.  (Dead rows were masked by
    joining the union of chunk tables once: it probed every segment's index
    for each chunk, 4 probes a seed at 4 segments.)
    """
    return sql.SQL(
        "SELECT f.seg, f.doc_no AS doc, max({score}) AS best FROM {forward} AS f JOIN qids AS q ON q.seg = f.seg "
        "WHERE {rows} GROUP BY f.seg, f.doc_no"
    ).format(score=forward_score(), forward=forward(spec), rows=rows_of(rows))


def top(spec: SearchSpec) -> sql.Composable:
    """The top ``depth * max_chunks_per_doc`` scored chunks, ties by (doc_id, chunk); every one is admitted.

    They hold the best chunk of every top-``depth`` document.  Chunks tied
    with the last of them are all read before the doc-id tie-break cuts:
    row ids order like (doc_id, chunk) within a segment, never across.  Every
    plan scores admitted chunks only (ranklock.search.bm25.admission), so the top scores
    come first (and ties with the last), then only those rows are read for
    their ids, from the narrow filter table where the segments have one.
    """
    return sql.SQL(
        "SELECT c.doc_id, c.chunk, s.score{ids} FROM ("
        "SELECT seg, row_id, score FROM scored WHERE score >= coalesce((SELECT score FROM scored ORDER BY score "
        "DESC LIMIT 1 OFFSET (%(depth)s::bigint * %(bm25_max_chunks)s::bigint - 1)), '-Infinity'::float8)"
        ") AS s JOIN {table} AS c ON c.seg = s.seg AND c.row_id = s.row_id "
        "ORDER BY s.score DESC, c.doc_id, c.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(table=spec.filter_rows, ids=shard_ids(spec, "s"))
