"""A segment's filter table: what a hard constraint reads of each chunk, and nothing else.

``ranklock_data.fields_<id>`` holds, per chunk of the segment, its row id,
its ``doc_id`` and ``chunk``, its effective dates and its typed fields: every
column the compiled filter, ``as_of``, a count of documents and the lexical
branch's hits read
(ranklock.search.filters, ranklock.search.spec, ranklock.search.scope), by
the same names as in the chunk table, so either serves the same SQL.
Each typed field has the index the chunk table has for it (btree; GIN for
``keyword[]``), a btree one with the row id included, so a range on one field
yields the row ids it admits from the index alone.

Why a table of its own: a chunk row is wide (its vector is stored inline, 1.5
kB at 384 dimensions, and its tsvector), a few rows a page, so a constraint
that admits 30,000 of a million chunks read 30,000 pages of the chunk table
to say which, about 13 us a chunk (docs/benchmarks.md, issue 14).  A row here
is ~100 bytes, about 80 a page, and the table of a million chunks fits in
shared buffers.  The BM25 plans and the completeness count check a
constraint here (ranklock.search.bm25, ranklock.search.scope); the vector
branch, which reads the vectors anyway, checks it on the chunk table.

Written once from the segment's chunk table, never changed (a purge deletes
its rows with the chunk's).  A segment without one (built before it, or
distributed over a Citus cluster, whose statements join co-located tables
only) is read through its chunk table, which has the same columns:
``ranklock snapshot lexical-stats`` builds the tables of older one-node
segments.

Example::

    >>> build_filter_table(db, 12)      # idempotent
    {'version': 1, 'rows': 1000000}
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..store.database import Database
from ..store.tables import CHUNK_COLUMNS, field_index_name, segment_table, segment_table_name

__all__ = ["FILTER_TABLE_VERSION", "build_filter_table"]

#: Version of the filter table's layout, recorded in the segment's stats (``stats.filter``).
FILTER_TABLE_VERSION = 1
#: The chunk columns a constraint reads besides the typed fields (``as_of``'s).
_DATES = ("effective_from", "effective_to")


def build_filter_table(db: Database, segment_id: int) -> dict[str, Any] | None:
    """Write segment ``segment_id``'s filter table from its chunk table; return its ``stats.filter`` entry.

    Idempotent: a segment that has one keeps it.  None for a segment placed on
    a Citus cluster (its chunk table serves instead).
    """
    chunks = segment_table("chunks", segment_id)
    table = segment_table("fields", segment_id)
    name = segment_table_name("fields", segment_id)
    with db.connection() as conn:
        with conn.transaction():
            row = conn.execute(
                "SELECT stats -> 'filter' AS filter, stats -> 'shards' AS shards FROM ranklock.segments "
                "WHERE id = %s::bigint FOR KEY SHARE",
                [segment_id],
            ).fetchone()
            if row is None or row[1]:
                return None  # gone, or placed: nothing to build
            if row[0] and row[0].get("version") == FILTER_TABLE_VERSION:
                return dict(row[0])
            own = {c.name for c in CHUNK_COLUMNS}
            fields = conn.execute(
                "SELECT a.attname, t.typcategory = 'A' FROM pg_attribute AS a JOIN pg_type AS t ON t.oid = a.atttypid "
                "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                [chunks.as_string(None)],
            ).fetchall()
            typed = [(str(r[0]), bool(r[1])) for r in fields if r[0] not in own]
            cols = [sql.Identifier(c) for c in ("doc_id", "chunk", *_DATES, *(f for f, _ in typed))]
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            conn.execute(
                sql.SQL("CREATE TABLE {table} AS SELECT c.row_id, {cols} FROM {chunks} AS c ORDER BY c.row_id").format(
                    table=table,
                    cols=sql.SQL(", ").join(sql.SQL("c.{}").format(c) for c in cols),
                    chunks=chunks,
                )
            )
            conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (row_id)").format(table))
            for field, array in typed:
                index = sql.Identifier(field_index_name(name, field))
                if array:
                    conn.execute(
                        sql.SQL("CREATE INDEX {} ON {} USING gin ({})").format(index, table, sql.Identifier(field))
                    )
                else:
                    conn.execute(
                        sql.SQL("CREATE INDEX {} ON {} ({}) INCLUDE (row_id)").format(
                            index, table, sql.Identifier(field)
                        )
                    )
            n = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
            entry = {"version": FILTER_TABLE_VERSION, "rows": int(n[0]) if n else 0}
            conn.execute(
                "UPDATE ranklock.segments SET stats = stats || jsonb_build_object('filter', %s::jsonb) "
                "WHERE id = %s::bigint",
                [Jsonb(entry), segment_id],
            )
        # Outside the transaction: VACUUM sets the visibility map, without which no index-only scan.
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
    return entry
