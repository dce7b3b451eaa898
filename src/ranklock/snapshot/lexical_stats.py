"""Lexical statistics of a snapshot, computed once when its chunks are built.

Per-chunk lengths are stored in the chunk table (``doc_len``); corpus-level
statistics (chunk count, average length) go into the snapshot's ``stats``.
"""

from __future__ import annotations

from psycopg import sql

from ..store.database import Database

__all__ = ["build_lexical_stats"]


def build_lexical_stats(db: Database, snapshot_id: int) -> None:
    from .build import chunk_table

    row = db.fetchone(
        sql.SQL(
            "SELECT count(*) AS n, coalesce(avg(doc_len), 0)::float8 AS avgdl, "
            "count(DISTINCT doc_id) AS docs, coalesce(max(chunk) + 1, 0) AS max_chunks FROM {}"
        ).format(chunk_table(snapshot_id))
    )
    assert row is not None
    db.execute(
        "UPDATE ranklock.snapshots SET stats = stats || jsonb_build_object("
        "'chunks', %s::bigint, 'avgdl', %s::float8, 'documents', %s::bigint, 'max_chunks_per_doc', %s::int) "
        "WHERE id = %s",
        [row["n"], row["avgdl"], row["docs"], row["max_chunks"], snapshot_id],
    )
