"""Lexical statistics of a snapshot, computed once when its chunks are built.

Per-chunk lengths are stored in the chunk table (``doc_len``); corpus-level
statistics (chunk count, average length) go into the snapshot's ``stats``.

BM25 needs, beside those, each term's document frequency.  They live in two
tables per snapshot, written here once and never modified, like the chunk
table itself, so the statistics a reader scores with can never drift:

``ranklock_data.terms_<id>``
    ``(term_id, lexeme, df, idf, max_w)``: one row per lexeme of the
    snapshot; ``idf`` is Robertson/Sparck Jones with +1 inside the log
    (never negative); ``max_w`` is the largest weight of the term's postings.
``ranklock_data.postings_<id>``
    ``(term_id, w, row_id)``: one row per (lexeme, chunk), ``w`` the term's
    BM25 contribution to that chunk under the snapshot's k1 and b, indexed
    on ``(term_id, w DESC, row_id)``: a term's postings can be read in
    decreasing impact, which is what lets a query skip the long tail of a
    frequent term (see ranklock.search.bm25).  ``w`` is float8, computed by
    the same expression the query side uses, so a score summed from postings
    and one computed from a chunk's tsvector differ at most by the rounding
    of a different summation order.

Dropping a snapshot drops these with it (ranklock.snapshot.ops drops every
``ranklock_data`` table named ``*_<id>``).

Example::

    >>> build_lexical_stats(db, 12)        # idempotent: a second call does nothing
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from ..store.database import Database

__all__ = [
    "BM25_STATS_VERSION",
    "DEFAULT_B",
    "DEFAULT_K1",
    "build_lexical_stats",
    "postings_table",
    "terms_table",
]

#: Version of the BM25 statistics layout; recorded in the snapshot's stats.
BM25_STATS_VERSION = 2
DEFAULT_K1 = 1.2
DEFAULT_B = 0.75


def terms_table(snapshot_id: int) -> sql.Identifier:
    return sql.Identifier("ranklock_data", f"terms_{snapshot_id}")


def postings_table(snapshot_id: int) -> sql.Identifier:
    return sql.Identifier("ranklock_data", f"postings_{snapshot_id}")


def build_lexical_stats(
    db: Database, snapshot_id: int, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B, force: bool = False
) -> dict[str, Any]:
    """Compute a snapshot's lexical statistics and BM25 tables; return the ``bm25`` stats entry.

    Idempotent: when the tables exist and were built with the same k1 and b,
    nothing is recomputed.  It also works on a snapshot built before BM25
    existed, since it reads nothing but the chunk table's ``tsv`` and
    ``doc_len``.
    """
    from .build import chunk_table

    chunks = chunk_table(snapshot_id)
    terms, postings = terms_table(snapshot_id), postings_table(snapshot_id)
    row = db.fetchone(
        sql.SQL(
            "SELECT count(*) AS n, coalesce(avg(doc_len), 0)::float8 AS avgdl, "
            "count(DISTINCT doc_id) AS docs, coalesce(max(chunk) + 1, 0) AS max_chunks FROM {}"
        ).format(chunks)
    )
    if row is None:  # an aggregate always returns one row
        raise RuntimeError("aggregate returned no row")
    db.execute(
        "UPDATE ranklock.snapshots SET stats = stats || jsonb_build_object("
        "'chunks', %s::bigint, 'avgdl', %s::float8, 'documents', %s::bigint, 'max_chunks_per_doc', %s::int) "
        "WHERE id = %s",
        [row["n"], row["avgdl"], row["docs"], row["max_chunks"], snapshot_id],
    )
    n, avgdl = int(row["n"]), float(row["avgdl"]) or 1.0

    current = db.fetchone("SELECT stats -> 'bm25' AS bm25 FROM ranklock.snapshots WHERE id = %s", [snapshot_id])
    have = current["bm25"] if current else None
    exists = db.fetchone("SELECT to_regclass(%s) IS NOT NULL AS t", [f"ranklock_data.postings_{snapshot_id}"])
    if (
        not force
        and have
        and exists
        and exists["t"]
        and have.get("version") == BM25_STATS_VERSION
        and have.get("k1") == k1
        and have.get("b") == b
    ):
        return dict(have)

    with db.connection() as conn:
        with conn.transaction():
            conn.execute("SET LOCAL work_mem = '256MB'")
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(terms, postings))
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
            # One posting per (lexeme, chunk).  tf is the lexeme's number of
            # positions, as in doc_len, so both count the same occurrences.
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {postings} AS "
                    "SELECT t.term_id, "
                    "       (t.idf * x.tf * (%(k1)s::float8 + 1) "
                    "        / (x.tf + %(k1)s::float8 * (1 - %(b)s::float8 + %(b)s::float8 * c.doc_len / %(avgdl)s::float8)))"
                    "       AS w, "
                    "       c.row_id "
                    "FROM {chunks} AS c "
                    "CROSS JOIN LATERAL unnest(c.tsv) AS u "
                    "CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) AS x "
                    "JOIN {terms} AS t ON t.lexeme = u.lexeme "
                    "ORDER BY t.term_id, w DESC, c.row_id"
                ).format(postings=postings, chunks=chunks, terms=terms),
                {"k1": k1, "b": b, "avgdl": avgdl},
            )
            conn.execute(
                sql.SQL("CREATE INDEX {} ON {} (term_id, w DESC, row_id)").format(
                    sql.Identifier(f"postings_{snapshot_id}_impact"), postings
                )
            )
            conn.execute(
                sql.SQL(
                    "UPDATE {terms} AS t SET max_w = m.w FROM "
                    "(SELECT term_id, max(w) AS w FROM {postings} GROUP BY term_id) AS m WHERE m.term_id = t.term_id"
                ).format(terms=terms, postings=postings)
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
            }
            from psycopg.types.json import Jsonb

            conn.execute(
                "UPDATE ranklock.snapshots SET stats = stats || jsonb_build_object('bm25', %s::jsonb) WHERE id = %s",
                [Jsonb(entry), snapshot_id],
            )
        # Outside the transaction: VACUUM sets the visibility map, without
        # which the impact index could not answer by index-only scans.
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(postings))
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(terms))
    return entry
