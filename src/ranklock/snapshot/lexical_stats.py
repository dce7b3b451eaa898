"""Lexical statistics of a segment, computed once when its chunks are built.

Per-chunk lengths are stored in the chunk table (``doc_len``); the segment's
chunk count, total length and most chunks of a document go into its catalog
row (``ranklock.segments``, ranklock.snapshot.segments), and a snapshot's
statistics are its segments' summed, dead chunks subtracted.

A segment's BM25 tables are written here once and never modified, like its
chunk table, from that chunk table alone.  Their weights ``w`` use the
segment's *own* statistics (its chunk count, document frequencies and average
length): they order its postings and bound what a term can add, but a score
is always computed at query time from the term frequency ``tf`` and the
chunk's length with the *snapshot's* statistics (:func:`weight_sql`, the one
expression both sides use), so a chunk scores the same bits in whatever
segment it is, and however the corpus was cut.  A weight under other
statistics is bounded by one under the segment's:
``w_S <= w_g * (idf_S / idf_g) * max(1, avgdl_S / avgdl_g)`` (the idf is a
factor; the length part grows with the average length, and at most in
proportion to it), which is what the query side prunes with.

``ranklock_data.terms_<id>``
    ``(term_id, lexeme, df, idf, max_w, wq)``: one row per lexeme of the
    segment; ``idf`` is Robertson/Sparck Jones with +1 inside the log
    (never negative); ``max_w`` is the largest weight of the term's postings;
    ``wq[k]`` is the weight of its ``LEVEL_BASE * 2^(k-1)``-th posting in
    impact order (only ranks up to ``df``): how deep a query must read the
    term to get below a given weight, known before reading it.  Term ids
    follow lexeme byte order.
``ranklock_data.forward_<id>``
    ``(row_id, doc_no, tids, tfs, len)``: each chunk's terms (``tids``,
    sorted), their frequencies (``tfs``) and the chunk's length, and a dense
    document number that orders like ``doc_id``.  One index probe scores a
    chunk exactly for any query.
``ranklock_data.postings_<id>``
    ``(term_id, w, row_id, tf, len)``: one row per (lexeme, chunk), ``w`` the
    term's BM25 contribution to that chunk under the segment's statistics,
    indexed on ``(term_id, w DESC, row_id)`` (with ``tf`` and ``len``): a
    term's postings can be read in decreasing impact, which is what lets a
    query skip the long tail of a frequent term (see ranklock.search.bm25).

``ranklock_data.dense_<id>``
    ``(term_id, blk, v)``: the weights of the terms in at least
    ``DENSE_SHARE`` of the chunks (``df >= min_df``) in blocks of
    ``DENSE_BLOCK`` row ids: one row per (term, block), a pgvector sparsevec
    whose element ``row_id % block`` (0-based) is the chunk's weight rounded
    to float4; no row where the block has none of the term's postings.  The
    query turns each block into a dense float4 vector and pgvector's C code
    sums a query's terms over every chunk in milliseconds, an upper bound used
    to prune (never to score: see ranklock.search.bm25, plan "dense").
    Storage: 8 bytes a posting plus a row per block, against ~90 bytes a
    posting for the postings themselves (heap tuple and impact-index entry,
    measured at 1M chunks): 215 MB against 3.25 GB of postings at 1M
    generated chunks, and about half the postings' size at worst (a block of
    one posting); segments built before issue 22 stored the terms in 1/64 of
    the chunks as vectors, 4 bytes a row id (857 MB there).  Why the share: the query pays a
    block of a term 15-25 us (the block made a 64 kB vector and added: ~1.3 ms
    per term per million chunks, measured at 1M), and the dense plan pays a
    posting of a term without blocks 1-2 us (read whole, summed per chunk, its
    chunk looked up in the sum of the others), so a term costs the same either
    way at about 15 postings a block: ``df ~ N / 1024``, the share.  Above it
    blocks are cheaper, below it the postings.  At 1M chunks the long
    questions' p95 was the same at N / 1024, N / 512 and N / 256 and a third
    higher at N / 64 (docs/benchmarks.md).  Terms in more than about half the
    chunks sum slower as sparsevec than as vectors (4.4 against 2.8 ms at 1M:
    8 bytes a posting against 4 a row id); one column holds one type.
    Optional: absent (older snapshots, or built with ``dense=False``), the
    query side keeps its other plans.

Dropping or reaping a segment drops these with it: their names come from
ranklock.store.tables, which lists every table a segment owns.

Example::

    >>> build_lexical_stats(db, 12)        # idempotent: a second call does nothing
    >>> build_lexical_stats(db, 12)["dense"]["terms"]   # statistics built before dense blocks get them added
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from psycopg import sql

from ..errors import SnapshotError
from ..settings import BM25_B, BM25_K1
from ..store.database import Database
from ..store.tables import segment_table, segment_table_name

__all__ = [
    "BM25_STATS_VERSION",
    "DENSE_BLOCK",
    "DENSE_SHARE",
    "LEVEL_BASE",
    "build_lexical_stats",
    "dense_min_df",
    "dense_table",
    "forward_table",
    "postings_table",
    "terms_table",
    "weight_sql",
]

#: Version of the BM25 statistics layout; recorded in the segment's stats.
#: 3 added the forward table and the per-term impact quantiles (``wq``);
#: 4 (segments) keeps term frequencies and lengths, so scores use the snapshot's statistics.
BM25_STATS_VERSION = 4
#: Rank of a term's first impact quantile; the next ones double it (a power of two).
LEVEL_BASE = 256
#: Terms in at least this share of the chunks get dense blocks (see the module docstring for why).
DENSE_SHARE = 1 / 1024
#: Row ids per dense block: pgvector's largest vector has 16,000 dimensions.
DENSE_BLOCK = 16000


def terms_table(segment_id: int) -> sql.Identifier:
    return segment_table("terms", segment_id)


def postings_table(segment_id: int) -> sql.Identifier:
    return segment_table("postings", segment_id)


def forward_table(segment_id: int) -> sql.Identifier:
    return segment_table("forward", segment_id)


def dense_table(segment_id: int) -> sql.Identifier:
    return segment_table("dense", segment_id)


def weight_sql(
    idf: sql.Composable,
    tf: sql.Composable,
    length: sql.Composable,
    k1: sql.Composable,
    b: sql.Composable,
    avgdl: sql.Composable,
) -> sql.Composable:
    """A term's BM25 weight in a chunk: the one expression the builder and every query plan evaluate.

    ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl))`` in float8,
    with ``tf`` cast from its integer count and ``len`` an integer: the same
    operations on the same values give the same bits everywhere.
    """
    return sql.SQL(
        "({idf} * {tf}::float8 * ({k1} + 1) / ({tf}::float8 + {k1} * (1 - {b} + {b} * {len} / {avgdl})))"
    ).format(idf=idf, tf=tf, k1=k1, b=b, len=length, avgdl=avgdl)


def dense_min_df(chunks: int, share: float) -> int:
    """The smallest df that gets dense blocks in a segment of ``chunks`` chunks (at least 1)."""
    return max(1, math.ceil(chunks * share))


def _build_dense(
    conn: Any, segment_id: int, chunks: sql.Identifier, n: int, share: float, block: int
) -> dict[str, Any]:
    """(Re)create the segment's dense blocks in ``conn``'s transaction; return the ``dense`` stats entry."""
    terms, postings, dense = terms_table(segment_id), postings_table(segment_id), dense_table(segment_id)
    min_df = dense_min_df(n, share)
    row = conn.execute(sql.SQL("SELECT coalesce(max(row_id) + 1, 0) FROM {}").format(chunks)).fetchone()
    rows = int(row[0]) if row else 0
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(dense))
    # sparsevec, not vector: a block stores the term's postings in it (8 bytes
    # each), not 4 bytes for every row id, so a term costs less stored this way
    # than its postings do.  Without a dimension: the last block is only as
    # long as the row ids need.  EXTERNAL: float weights do not compress, and
    # trying costs every read.
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (term_id int NOT NULL, blk int NOT NULL, v sparsevec NOT NULL, PRIMARY KEY (term_id, blk))"
        ).format(dense)
    )
    conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN v SET STORAGE EXTERNAL").format(dense))
    # Built through sparsevec's text form: "{pos:weight,...}/dims", 1-based,
    # each float8 weight rounded to the nearest float4 (the query side's margin
    # covers that rounding).  A block where the term has no posting has no row:
    # the query reads it as zeros.  (Segments built before sparsevec blocks hold
    # vectors; the query casts either to vector, so both search alike.)
    conn.execute(
        sql.SQL(
            "INSERT INTO {dense} "
            "SELECT e.term_id, e.blk, ('{{' || string_agg(e.pos::text || ':' || e.w::float4::text, ',' ORDER BY e.pos) "
            "       || '}}/' || max(e.dims)::text)::sparsevec "
            "FROM (SELECT p.term_id, (p.row_id / %(block)s::bigint)::int AS blk, "
            "             (p.row_id %% %(block)s::bigint)::int + 1 AS pos, p.w, "
            "             least(%(block)s::bigint, %(rows)s::bigint - (p.row_id / %(block)s::bigint) * %(block)s::bigint) AS dims "
            "      FROM {postings} AS p JOIN {terms} AS t ON t.term_id = p.term_id "
            "      WHERE t.df >= %(min_df)s::int) AS e "
            "GROUP BY e.term_id, e.blk"
        ).format(dense=dense, postings=postings, terms=terms),
        {"block": block, "rows": rows, "min_df": min_df},
    )
    got = conn.execute(sql.SQL("SELECT count(DISTINCT term_id), count(*) FROM {}").format(dense)).fetchone()
    return {
        "share": share,
        "min_df": min_df,
        "block": block,
        "rows": rows,
        "terms": int(got[0]) if got else 0,
        "blocks": int(got[1]) if got else 0,
    }


def build_lexical_stats(
    db: Database,
    segment_id: int,
    *,
    k1: float = BM25_K1,
    b: float = BM25_B,
    force: bool = False,
    level_base: int | None = None,
    dense: bool = True,
    dense_share: float = DENSE_SHARE,
    dense_block: int = DENSE_BLOCK,
) -> dict[str, Any]:
    """Compute a segment's BM25 tables from its chunk table; return the ``bm25`` entry of its stats.

    Idempotent: when the tables exist and were built with the same k1, b and
    level base, nothing is recomputed.  It reads nothing but the chunk table's
    ``tsv`` and ``doc_len``, so it also rebuilds the tables of a segment of an
    older layout (``ranklock snapshot lexical-stats COLLECTION ID``).  With
    ``dense`` (the default), current statistics without dense blocks (or with
    another share or block size) get them added, nothing else rewritten.
    ``dense_share`` and ``dense_block`` exist for tests.
    """
    level_base = LEVEL_BASE if level_base is None else level_base
    if level_base < 1 or level_base & (level_base - 1):
        raise ValueError(f"level_base must be a power of two, not {level_base}")
    if not 0 < dense_share <= 1:
        raise ValueError(f"dense_share must be in (0, 1], not {dense_share}")
    if not 1 <= dense_block <= DENSE_BLOCK:
        raise ValueError(f"dense_block must be 1..{DENSE_BLOCK} (pgvector's largest vector), not {dense_block}")
    chunks = segment_table("chunks", segment_id)
    terms, postings, forward = terms_table(segment_id), postings_table(segment_id), forward_table(segment_id)
    row = db.fetchone(
        sql.SQL("SELECT count(*) AS n, coalesce(avg(doc_len), 0)::float8 AS avgdl FROM {}").format(chunks)
    )
    if row is None:  # an aggregate always returns one row
        raise RuntimeError("aggregate returned no row")
    n, avgdl = int(row["n"]), float(row["avgdl"]) or 1.0

    current = db.fetchone(
        "SELECT stats -> 'bm25' AS bm25, stats -> 'shards' AS shards FROM ranklock.segments WHERE id = %s::bigint",
        [segment_id],
    )
    have = current["bm25"] if current else None
    exists = db.fetchone("SELECT to_regclass(%s) IS NOT NULL AS postings", [postings.as_string(None)])
    same = bool(not force and have and exists and exists["postings"] and have.get("k1") == k1 and have.get("b") == b)
    if same and have and have.get("version") == BM25_STATS_VERSION and have.get("level_base") == level_base:
        built = have.get("dense")
        if not dense or (built and (built["share"], built["block"]) == (dense_share, dense_block)):
            return dict(have)
        _refuse_placed(segment_id, current)
        # Current statistics without (these) dense blocks: add them, rewrite nothing else.
        with db.connection() as conn:
            with conn.transaction():
                _pin_segment(conn, segment_id)
                conn.execute("SET LOCAL work_mem = '256MB'")
                entry = {**have, "dense": _build_dense(conn, segment_id, chunks, n, dense_share, dense_block)}
                _record(conn, segment_id, entry)
            conn.execute(sql.SQL("ANALYZE {}").format(dense_table(segment_id)))
        return entry

    _refuse_placed(segment_id, current)
    weight = weight_sql(
        sql.SQL("t.idf"),
        sql.SQL("u.tf"),
        sql.SQL("f.len"),
        sql.SQL("%(k1)s::float8"),
        sql.SQL("%(b)s::float8"),
        sql.SQL("%(avgdl)s::float8"),
    )
    with db.connection() as conn:
        with conn.transaction():
            _pin_segment(conn, segment_id)
            conn.execute("SET LOCAL work_mem = '256MB'")
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}, {}").format(forward, terms, postings))
            # ts_stat counts, per lexeme, the chunks holding it (ndoc): the df.
            # It is C code over the tsvectors, far faster than unnest + GROUP BY.
            stat_query = sql.SQL("SELECT tsv FROM {}").format(chunks).as_string(conn)
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {terms} AS "
                    'SELECT (row_number() OVER (ORDER BY word COLLATE "C"))::int AS term_id, '
                    "       word AS lexeme, ndoc::int AS df, "
                    "       ln(1 + (%(n)s::float8 - ndoc + 0.5) / (ndoc + 0.5)) AS idf, "
                    "       0::float8 AS max_w "
                    "FROM ts_stat(%(q)s)"
                ).format(terms=terms),
                {"n": n, "q": stat_query},
            )
            conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (term_id), ADD UNIQUE (lexeme)").format(terms))
            # The forward table: each chunk's (term, frequency) pairs, sorted by
            # term, and its length.  tf is the lexeme's number of positions, as
            # in doc_len, so both count the same occurrences.  doc_no numbers
            # documents in doc_id order (row_id order is (doc_id, chunk) order).
            # One join of every (chunk, lexeme) pair with the terms, then one
            # GROUP BY: a hash join whose cost grows with the postings, where a
            # lookup per lexeme per chunk cost an index probe each (4 s of 9 for
            # a 5 MB document).  A chunk without lexemes has no row.
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {forward} AS "
                    'SELECT c.row_id, (dense_rank() OVER (ORDER BY c.doc_id COLLATE "C"))::int AS doc_no, '
                    "       array_agg(t.term_id ORDER BY t.term_id) AS tids, "
                    "       array_agg(x.tf::int ORDER BY t.term_id) AS tfs, c.doc_len AS len "
                    "FROM {chunks} AS c CROSS JOIN LATERAL unnest(c.tsv) AS u "
                    "CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) AS x "
                    "JOIN {terms} AS t ON t.lexeme = u.lexeme "
                    "GROUP BY c.row_id, c.doc_id, c.doc_len ORDER BY c.row_id"
                ).format(forward=forward, chunks=chunks, terms=terms),
            )
            conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (row_id)").format(forward))
            # One posting per (lexeme, chunk), the forward table's pairs turned
            # around, with the weight under the segment's own statistics.
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {postings} AS "
                    "SELECT u.term_id, {weight} AS w, f.row_id, u.tf, f.len "
                    "FROM {forward} AS f CROSS JOIN LATERAL unnest(f.tids, f.tfs) AS u(term_id, tf) "
                    "JOIN {terms} AS t ON t.term_id = u.term_id "
                    "ORDER BY 1, 2 DESC, 3"
                ).format(postings=postings, forward=forward, terms=terms, weight=weight),
                {"k1": k1, "b": b, "avgdl": avgdl},
            )
            conn.execute(
                sql.SQL("CREATE INDEX {} ON {} (term_id, w DESC, row_id) INCLUDE (tf, len)").format(
                    sql.Identifier(segment_table_name("postings", segment_id) + "_impact"), postings
                )
            )
            conn.execute(
                sql.SQL(
                    "UPDATE {terms} AS t SET max_w = m.w FROM (SELECT term_id, max(w) AS w FROM {postings} "
                    "GROUP BY term_id) AS m WHERE m.term_id = t.term_id"
                ).format(terms=terms, postings=postings)
            )
            # Impact quantiles: the weight at ranks base, 2*base, 4*base, ... of
            # each term's postings in (w DESC, row_id) order, read off the index.
            conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN wq float8[] NOT NULL DEFAULT '{{}}'").format(terms))
            conn.execute("SET LOCAL enable_sort = off")  # the impact index is already in window order
            conn.execute(
                sql.SQL(
                    "UPDATE {terms} AS t SET wq = q.wq FROM ("
                    "  SELECT term_id, array_agg(w ORDER BY rn) AS wq FROM ("
                    "    SELECT term_id, w, row_number() OVER (PARTITION BY term_id ORDER BY w DESC, row_id) AS rn "
                    "    FROM {postings}) AS s "
                    "  WHERE rn >= %(base)s::bigint AND (rn & (rn - 1)) = 0 GROUP BY term_id"
                    ") AS q WHERE q.term_id = t.term_id"
                ).format(terms=terms, postings=postings),
                {"base": level_base},
            )
            counts = conn.execute(
                sql.SQL("SELECT (SELECT count(*) FROM {}) AS terms, (SELECT count(*) FROM {}) AS postings").format(
                    terms, postings
                )
            ).fetchone()
            if counts is None:
                raise RuntimeError("count returned no row")
            entry = {
                "version": BM25_STATS_VERSION,
                "k1": k1,
                "b": b,
                "idf": "ln(1 + (N - df + 0.5) / (df + 0.5))",
                "unit": "chunk",
                "N": n,
                "avgdl": avgdl,
                "terms": int(counts[0]),
                "postings": int(counts[1]),
                "level_base": level_base,
            }
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(dense_table(segment_id)))
            if dense:
                entry["dense"] = _build_dense(conn, segment_id, chunks, n, dense_share, dense_block)
            _record(conn, segment_id, entry)
        # Outside the transaction: VACUUM sets the visibility map, without
        # which the impact index could not answer by index-only scans.
        for table in (postings, forward, terms):
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
        if dense:
            conn.execute(sql.SQL("ANALYZE {}").format(dense_table(segment_id)))
    return entry


def _refuse_placed(segment_id: int, current: Mapping[str, Any] | None) -> None:
    """A segment distributed over a Citus cluster cannot have its BM25 tables rewritten on the coordinator."""
    if current and current["shards"]:
        raise SnapshotError(
            f"segment {segment_id} is distributed over a Citus cluster and its BM25 statistics are built before "
            "it is placed; they cannot be rebuilt in place. Rewrite the segments with `ranklock snapshot merge "
            "COLLECTION --all` (Python: engine.merge(name, everything=True); a new segment gets new statistics)."
        )


def _pin_segment(conn: Any, segment_id: int) -> None:
    """Lock the segment row (FOR KEY SHARE) before touching any of its tables, or say it is gone.

    A drop in progress (it holds the row FOR UPDATE) finishes first, and then
    we must not create tables for a segment that is gone, since nothing
    would ever drop them; a drop that comes later waits for us.
    """
    if (
        conn.execute("SELECT 1 FROM ranklock.segments WHERE id = %s::bigint FOR KEY SHARE", [segment_id]).fetchone()
        is None
    ):
        raise SnapshotError(
            f"segment {segment_id} was dropped while its lexical statistics were being built; "
            "nothing was written. Build them for an existing snapshot (see `ranklock snapshot list`)."
        )


def _record(conn: Any, segment_id: int, entry: dict[str, Any]) -> None:
    """Store ``entry`` as the segment's ``stats.bm25``."""
    from psycopg.types.json import Jsonb

    conn.execute(
        "UPDATE ranklock.segments SET stats = stats || jsonb_build_object('bm25', %s::jsonb) WHERE id = %s::bigint",
        [Jsonb(entry), segment_id],
    )
