"""Value counts: how many documents and chunks hold each value of a typed field, per segment, made by the writer.

A search under a filter on one typed field counts the documents it admits from these
(ranklock.search.scope): each segment's counts (``counts_<segment>``), summed, less those of the
snapshot's dead rows (``valuecounts_<snapshot>``).  A segment never changes, nor does a
snapshot's set of dead rows, so neither do their counts: the build that writes a segment makes
its counts of every typed field, and the snapshot's finish makes its dead rows' (and any a
segment lacks: a field that a later write brought).  A write costs the counts of what it wrote,
never a scan of the segments it left unchanged, and a search only reads.

Which fields a table counts is recorded beside the segment (``segments.stats.counts``) and the
snapshot (``snapshots.stats.dead_counts``): ``{"year": "values", "title_words": "unbounded"}``,
"unbounded" for a field with more than :data:`MAX_VALUE_COUNTS` distinct values in the
segment, where summing values costs more than counting rows.  A search reads the counts only
where every part records the field as "values"; otherwise it counts rows (the same number).
A purge rewrites the counts of what it touched (ranklock.snapshot.purge).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..store import locks
from ..store.database import Database
from ..store.tables import segment_table, snapshot_table

__all__ = ["MAX_VALUE_COUNTS", "build_dead_counts", "build_segment_counts", "complete_counts"]

#: Fields with more distinct values than this in a segment are counted with SQL, not from value counts:
#: at that many rows a sum over the counts costs about what counting the filter table's rows does.
MAX_VALUE_COUNTS = 50_000


def _field_columns(conn: psycopg.Connection[Any], chunks: sql.Identifier, names: Sequence[str]) -> dict[str, str]:
    """The SQL type of each of ``names`` in the chunk table ``chunks`` (a field it lacks is left out)."""
    rows = conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY (%s)",
        [chunks.as_string(None), list(names)],
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _count_into(
    conn: psycopg.Connection[Any],
    table: sql.Identifier,
    name: str,
    sql_type: str,
    rows: sql.Composable,
    docs: sql.Composable,
    *,
    bounded: bool,
) -> str:
    """Write ``name``'s counts of ``rows`` (aliased c) into ``table``; "values", or "unbounded" when too many."""
    col = sql.Identifier(name)
    conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(table, col, sql.SQL(sql_type)))
    conn.execute(sql.SQL('DELETE FROM {} WHERE "#field" = %s').format(table), [name])
    if not bounded:
        distinct = conn.execute(
            sql.SQL("SELECT count(*) FROM (SELECT DISTINCT c.{col} FROM {rows} LIMIT %s) AS d").format(
                col=col, rows=rows
            ),
            [MAX_VALUE_COUNTS + 1],
        ).fetchone()
        if distinct is None or int(distinct[0]) > MAX_VALUE_COUNTS:
            return "unbounded"
    # A document's fields are the same on all its chunks, so distinct documents per value sum to the
    # distinct documents of any set of values.
    conn.execute(
        sql.SQL(
            'INSERT INTO {table} ("#field", {col}, "#docs", "#chunks") '
            "SELECT %s, c.{col}, {docs}, count(*) FROM {rows} GROUP BY c.{col}"
        ).format(table=table, col=col, docs=docs, rows=rows),
        [name],
    )
    return "values"


def _create(conn: psycopg.Connection[Any], table: sql.Identifier) -> None:
    conn.execute(
        sql.SQL('CREATE TABLE IF NOT EXISTS {} ("#field" text NOT NULL, "#docs" bigint, "#chunks" bigint)').format(
            table
        )
    )


def build_segment_counts(db: Database, segment_id: int, fields: Sequence[str]) -> dict[str, str]:
    """Count each of ``fields``' values in segment ``segment_id`` (those it lacks a record of); its record.

    Idempotent: a field already recorded is left as it is.  For a segment placed on a Citus cluster
    the counts are the coordinator's own table, counted over the shards once (each groups its own
    rows; a document's chunks share a shard), so a filtered search reads them there as on one node.
    """
    chunks = segment_table("chunks", segment_id)
    table = segment_table("counts", segment_id)
    with db.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.SEGMENT_COUNTS, segment_id])
        row = conn.execute(
            "SELECT stats -> 'counts', stats -> 'shards', chunks, max_chunks FROM ranklock.segments "
            "WHERE id = %s::bigint FOR KEY SHARE",
            [segment_id],
        ).fetchone()
        if row is None:
            return {}
        done: dict[str, str] = dict(row[0] or {})
        todo = [f for f in fields if f not in done]
        if not todo:
            return done
        types = _field_columns(conn, chunks, todo)
        _create(conn, table)
        # With one chunk per document, count(*) is the document count and the field's btree answers alone.
        docs = sql.SQL("count(*)") if int(row[3]) <= 1 else sql.SQL("count(DISTINCT c.doc_id)")
        source = sql.SQL("{} AS c").format(chunks)
        for name in todo:
            if name in types:
                # A segment of at most MAX_VALUE_COUNTS chunks has at most that many values.
                done[name] = _count_into(
                    conn, table, name, types[name], source, docs, bounded=int(row[2]) <= MAX_VALUE_COUNTS
                )
        conn.execute(
            "UPDATE ranklock.segments SET stats = stats || jsonb_build_object('counts', %s::jsonb) WHERE id = %s",
            [Jsonb(done), segment_id],
        )
    return done


def build_dead_counts(db: Database, snapshot_id: int, chunks: sql.Composable, fields: Sequence[str]) -> dict[str, str]:
    """Count each of ``fields``' values among snapshot ``snapshot_id``'s dead rows (``chunks``: its segments' rows).

    Only for a snapshot with dead rows; its record (``stats.dead_counts``).
    """
    table = snapshot_table(snapshot_id)
    dead = sql.SQL(
        "{} AS c JOIN ranklock.snapshot_dead_rows AS x ON x.snapshot_id = {} AND x.seg = c.seg AND x.row_id = c.row_id"
    ).format(chunks, sql.Literal(snapshot_id))
    with db.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.VALUE_COUNTS, snapshot_id])
        row = conn.execute(
            "SELECT stats -> 'dead_counts', (SELECT g.id FROM ranklock.snapshot_segments ss JOIN ranklock.segments g "
            "ON g.id = ss.segment_id WHERE ss.snapshot_id = s.id ORDER BY g.id LIMIT 1) "
            "FROM ranklock.snapshots s WHERE s.id = %s FOR KEY SHARE",
            [snapshot_id],
        ).fetchone()
        if row is None or row[1] is None:
            return {}
        done: dict[str, str] = dict(row[0] or {})
        todo = [f for f in fields if f not in done]
        if not todo:
            return done
        # Every chunk table of a collection has the same columns: one segment's tell their types.
        types = _field_columns(conn, segment_table("chunks", int(row[1])), todo)
        _create(conn, table)
        # A document id dead in two segments is two dead documents.
        docs = sql.SQL("count(DISTINCT (c.seg, c.doc_id))")
        for name in todo:
            if name in types:
                # The dead rows are rows of the segments, whose own counts bounded their values already.
                done[name] = _count_into(conn, table, name, types[name], dead, docs, bounded=True)
        conn.execute(
            "UPDATE ranklock.snapshots SET stats = stats || jsonb_build_object('dead_counts', %s::jsonb) WHERE id = %s",
            [Jsonb(done), snapshot_id],
        )
    return done


def complete_counts(db: Database, snapshot_id: int, fields: Sequence[str]) -> None:
    """Every count snapshot ``snapshot_id``'s searches can read: each segment's of ``fields``, and its dead rows'.

    A segment written before a field existed (a later write brought it) gets that field's counts here,
    once; a segment that has them all costs one catalog read.
    """
    from .segments import chunks_sql, read_layout

    if not fields:
        return
    layout = read_layout(db, snapshot_id).full()
    for g in layout.segments:
        if g.chunks > 0 and any(f not in (g.counts or {}) for f in fields):
            build_segment_counts(db, g.id, fields)
    if layout.dead_rows:
        build_dead_counts(db, snapshot_id, chunks_sql(layout), fields)
