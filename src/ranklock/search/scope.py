"""The scope of a search: how many documents and chunks its hard constraints admit.

Every search first counts the documents that satisfy its filter and ``as_of``
(``matching_count``) with the very predicate every branch uses.  The count
decides how the branches run (the vector branch's exact scan, BM25's admitted
plan) and whether the result is complete (ranklock.search.completeness).

A predicate on one typed field is counted from per-value counts: each
segment's, made once per (segment, field) in a small table of the segment's
own (``counts_<id>``), summed, less those of the snapshot's dead rows
(``valuecounts_<id>``, made once per (snapshot, field) from its dead rows
alone).  Segments never change, nor do a snapshot's dead rows, so neither do
their counts, and a write costs the next filtered search the counts of what it
wrote (its new segment, the new snapshot's dead rows), never a scan of the
segments it left unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ..snapshot.segments import Layout, SegmentInfo, chunks_sql
from ..store import locks
from ..store.steps import Block, Fetch, Steps
from ..store.tables import segment_table, snapshot_table
from .spec import Scope, SearchSpec, where_sql

__all__ = ["Scope", "count_matching_sql", "scope_steps"]


def count_matching_sql(spec: SearchSpec, snap_stats: dict[str, Any]) -> tuple[sql.Composed, dict[str, Any]]:
    """The count statement: the same predicate (filter, ``as_of``, live rows) every branch uses."""
    # With one chunk per document, count(*) is the document count and the
    # planner can answer from the field's index alone (an index-only scan);
    # count(DISTINCT) would visit and sort every row.
    one_chunk = int(snap_stats.get("max_chunks_per_doc", 2) or 2) <= 1
    docs = sql.SQL("count(*)") if one_chunk else sql.SQL("count(DISTINCT c.doc_id)")
    q = sql.SQL("SELECT {docs} AS documents, count(*) AS chunks FROM {table} AS c WHERE {where}").format(
        docs=docs, table=spec.filter_rows, where=where_sql(spec)
    )
    params = dict(spec.filter_params)
    if spec.as_of is not None:
        params["as_of"] = spec.as_of
    return q, params


_FIELD_REF = re.compile(r'"c"\."([a-z][a-z0-9_]*)"')
#: Fields with more distinct values than this in a segment are counted with SQL, not from value counts.
MAX_VALUE_COUNTS = 50_000
#: Memo of value counts known usable (True) or not (False), keyed (database, "segment" or "dead", segment
#: or snapshot id, field): a segment never changes, nor does a snapshot's set of dead rows, so neither do
#: their counts.  A purge, which edits both, drops the tables; a search that then finds one gone forgets
#: the memo (:func:`_forget`) and counts rows.
_READY: dict[tuple[str, str, int, str], bool] = {}


@dataclass(frozen=True)
class _Counts:
    """One counts table to make: whose (a segment or a snapshot's dead rows), and from which rows."""

    #: "segment" (counts of every row of one segment) or "dead" (of a snapshot's dead rows).
    owner: str
    id: int
    table: sql.Identifier
    lock: int
    #: The catalog row pinned while the table is made (so a drop cannot remove its owner meanwhile).
    pin: str
    #: The rows counted, aliased c, with doc_id and the field's column.
    rows: sql.Composable
    #: How a value's documents are counted (a document id dead in two segments is two dead documents).
    docs: sql.Composable
    #: A segment whose chunk table has the field (every chunk table of a collection has the same columns).
    segment: int
    #: Its values may be too many for counts to pay: that segment's statistics tell how many there are.
    unbounded: bool


def _segment_counts(g: SegmentInfo) -> _Counts:
    # With one chunk per document, count(*) is the document count and the field's btree answers alone.
    docs = sql.SQL("count(*)") if g.max_chunks <= 1 else sql.SQL("count(DISTINCT c.doc_id)")
    return _Counts(
        "segment",
        g.id,
        segment_table("counts", g.id),
        locks.SEGMENT_COUNTS,
        "SELECT 1 FROM ranklock.segments WHERE id = %s FOR KEY SHARE SKIP LOCKED",
        sql.SQL("{} AS c").format(segment_table("chunks", g.id)),
        docs,
        g.id,
        # A segment of at most MAX_VALUE_COUNTS chunks has at most that many values.
        g.chunks > MAX_VALUE_COUNTS,
    )


def _dead_counts(layout: Layout) -> _Counts:
    dead = sql.SQL(
        "{} AS c JOIN ranklock.snapshot_dead_rows AS x ON x.snapshot_id = {} AND x.seg = c.seg AND x.row_id = c.row_id"
    ).format(chunks_sql(layout), sql.Literal(layout.snapshot_id))
    return _Counts(
        "dead",
        layout.snapshot_id,
        snapshot_table(layout.snapshot_id),
        locks.VALUE_COUNTS,
        "SELECT 1 FROM ranklock.snapshots WHERE id = %s FOR KEY SHARE SKIP LOCKED",
        dead,
        sql.SQL("count(DISTINCT (c.seg, c.doc_id))"),
        layout.segments[0].id,
        # The dead rows are rows of the segments, whose own counts bounded their values already.
        False,
    )


def _parts(layout: Layout) -> list[_Counts]:
    """The counts a snapshot's are summed from: each non-empty segment's, minus its dead rows'.

    Over the whole snapshot: a read routed to fewer segments counts the same
    documents (routing only skips segments no matching document is in).
    """
    full = layout.full()
    parts = [_segment_counts(g) for g in full.segments if g.chunks > 0]
    return parts + ([_dead_counts(full)] if full.dead_rows else [])


def _counts_ready(dsn: str, parts: list[_Counts], name: str, *, build: bool) -> Steps[bool]:
    """Whether every part's counts of ``name`` exist and are usable; ``build`` makes those missing.

    So a write costs the first filtered search after it the counts of its new
    segment (and of the new snapshot's dead rows) only: every other segment's
    were made once, by the first search that needed them.  Read only
    (``build=False``, ``search_sql``), nothing is made or remembered.
    """
    for part in parts:
        key = (dsn, part.owner, part.id, name)
        usable = _READY.get(key)
        if usable is None:
            usable = yield Block(_make_counts(part, name) if build else _read_counts(part, name))
            if usable is None:
                return False
            if build:
                # Remembered only once committed: what it counts never changes.
                _READY[key] = usable
        if not usable:
            return False
    return True


def _read_counts(part: _Counts, name: str) -> Steps[bool | None]:
    """Read only: whether the part's counts of ``name`` were made and are usable (None: not made)."""
    reg = yield Fetch("SELECT to_regclass(%s)", [part.table.as_string(None)], dicts=False)
    if not reg or reg[0][0] is None:
        return None
    rows = yield Fetch(
        sql.SQL('SELECT min("#docs") FROM {} WHERE "#field" = %s').format(part.table), [name], dicts=False
    )
    if not rows or rows[0][0] is None:
        return None
    return int(rows[0][0]) >= 0


def _make_counts(part: _Counts, name: str) -> Steps[bool | None]:
    """In one transaction: the part's counts of ``name`` made if missing; whether usable (None: its owner is gone).

    A marker row (the field, no value, 0 and 0) says they were made, even when
    no row holds the field: it adds nothing to any sum, and a count of -1 marks
    a field with too many values for a sum to beat counting rows.
    """
    yield Fetch("SELECT pg_advisory_xact_lock(%s, %s)", [part.lock, part.id])
    # Pin the owner's catalog row until commit, so a drop cannot delete it while the table is made
    # (nothing would ever drop a table made for an owner that is gone).  SKIP LOCKED: a drop in progress
    # holds the row, and waiting for it could deadlock with our lock on its chunk table; counting rows
    # instead gives the same number.
    alive = yield Fetch(part.pin, [part.id])
    if not alive:
        return None
    yield Fetch(
        sql.SQL('CREATE TABLE IF NOT EXISTS {} ("#field" text NOT NULL, "#docs" bigint, "#chunks" bigint)').format(
            part.table
        )
    )
    known = yield from _read_counts(part, name)
    if known is not None:
        return known
    # The field's type, and its distinct values in the segment's statistics where they could be many.
    source = segment_table("chunks", part.segment)
    info = yield Fetch(
        "SELECT format_type(a.atttypid, a.atttypmod), s.n_distinct, c.reltuples "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "LEFT JOIN pg_stats s ON s.schemaname = 'ranklock_data' AND s.tablename = c.relname "
        "AND s.attname = a.attname WHERE a.attrelid = %s::regclass AND a.attname = %s",
        [source.as_string(None), name],
        dicts=False,
    )
    if not info:
        return False
    sql_type, n_distinct, reltuples = info[0]
    col = sql.Identifier(name)
    yield Fetch(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(part.table, col, sql.SQL(sql_type)))
    marker = sql.SQL('INSERT INTO {} ("#field", "#docs", "#chunks") VALUES (%s, %s, 0)').format(part.table)
    if part.unbounded:
        distinct = None if n_distinct is None else (n_distinct if n_distinct >= 0 else -n_distinct * reltuples)
        if distinct is None or distinct > MAX_VALUE_COUNTS:
            # No statistics, or too many values for a sum to beat counting rows.
            yield Fetch(marker, [name, -1])
            return False
    # A document's fields are the same on all its chunks, so distinct documents
    # per value sum to the distinct documents of any set of values.
    yield Fetch(marker, [name, 0])
    yield Fetch(
        sql.SQL(
            'INSERT INTO {table} ("#field", {col}, "#docs", "#chunks") '
            "SELECT %s, c.{col}, {docs}, count(*) FROM {rows} GROUP BY c.{col}"
        ).format(table=part.table, col=col, docs=part.docs, rows=part.rows),
        [name],
    )
    return True


def _counts_sum_sql(parts: list[_Counts], name: str, filter_sql: sql.Composable) -> sql.Composable:
    """The documents and chunks of the parts' counts whose value passes the filter: segments added, dead rows taken off."""
    col = sql.Identifier(name)
    arms = [
        sql.SQL(
            'SELECT t.{col}, {sign} * t."#docs" AS "#docs", {sign} * t."#chunks" AS "#chunks" FROM {table} AS t '
            'WHERE t."#field" = %(rl_count_field)s'
        ).format(col=col, sign=sql.SQL("-1" if p.owner == "dead" else "1"), table=p.table)
        for p in parts
    ]
    return sql.SQL(
        'SELECT coalesce(sum(c."#docs"), 0), coalesce(sum(c."#chunks"), 0) FROM ({}) AS c WHERE ({})'
    ).format(sql.SQL(" UNION ALL ").join(arms), filter_sql)


def _forget(dsn: str, parts: list[_Counts], name: str) -> None:
    for part in parts:
        _READY.pop((dsn, part.owner, part.id, name), None)


def _one_row(q: sql.Composable, p: dict[str, Any], *, jit_off: bool = False) -> Steps[tuple[Any, ...]]:
    if jit_off:
        # JIT compilation costs tens of milliseconds, more than this count.
        yield Fetch("SELECT set_config('jit', 'off', true)")
    rows = yield Fetch(q, p, dicts=False)
    return tuple(rows[0])  # an aggregate always returns one row


def _scope(
    dsn: str,
    spec: SearchSpec,
    snap: dict[str, Any],
    timeout: float | None = None,
    *,
    build_counts: bool = True,
) -> Steps[Scope]:
    stats = snap.get("stats") or {}
    if spec.unconstrained and "documents" in stats and "chunks" in stats:
        # No hard constraint: every document of the snapshot matches, and the
        # snapshot recorded how many there are when it was built.
        return Scope(int(stats["documents"]), int(stats["chunks"]))
    # The compiled predicate reads its fields as "c"."name" (values are
    # always placeholders), so this is exactly the set of columns it reads.
    fields = set(_FIELD_REF.findall(spec.filter_sql.as_string(None)))
    if spec.as_of is None and len(fields) == 1:
        (name,) = fields
        parts = _parts(spec.layout)
        try:
            ready = yield from _counts_ready(dsn, parts, name, build=build_counts)
        except psycopg.Error:
            # A read-only role or replica cannot create the counts tables;
            # counting rows gives the same number, only slower.
            if build_counts:
                for part in parts:
                    _READY.setdefault((dsn, part.owner, part.id, name), False)
            ready = False
        if ready:
            q = _counts_sum_sql(parts, name, spec.filter_sql)
            p = {**spec.filter_params, "rl_count_field": name}
            try:
                row = yield Block(_one_row(q, p), timeout=timeout)
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
                # A purge dropped counts this process had seen made: recount them by the next search.
                _forget(dsn, parts, name)
            else:
                return Scope(int(row[0]), int(row[1]))
    q, p = count_matching_sql(spec, stats)
    row = yield Block(_one_row(q, p, jit_off=True), timeout=timeout)
    return Scope(int(row[0]), int(row[1]))


def scope_steps(
    dsn: str,
    spec: SearchSpec,
    snap: dict[str, Any],
    *,
    timeout: float | None = None,
    build_counts: bool = True,
) -> Steps[Scope]:
    """Count the matching set, before the statement is built, on a connection of its own.

    Snapshot tables are immutable, so the count sees exactly the rows the
    search transaction will see.  ``timeout`` (seconds) limits its statements
    as the search's own are limited.  ``build_counts=False`` (``search_sql``)
    writes nothing: it uses value counts only if they exist, else counts rows,
    which gives the same numbers and so the same plan.  ``dsn`` names the
    database read, for the value-count memo.
    """
    scope: Scope = yield Block(_scope(dsn, spec, snap, timeout, build_counts=build_counts), transaction=False)
    stats = snap.get("stats") or {}
    total = int(stats.get("chunks") or snap.get("chunk_count") or scope.chunks)
    return Scope(scope.documents, scope.chunks, total)
