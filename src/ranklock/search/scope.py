"""The scope of a search: how many documents and chunks its hard constraints admit.

Every search first counts the documents that satisfy its filter and ``as_of``
(``matching_count``) with the very predicate every branch uses.  The count
decides how the branches run (the vector branch's exact scan, BM25's admitted
plan) and whether the result is complete (ranklock.search.completeness).

A predicate on one typed field is counted from the snapshot's per-value
counts, made once per (snapshot, field) in a small table of the snapshot's
own (``valuecounts_<id>``): a snapshot never changes, so neither do they.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from ..snapshot.segments import chunks_sql, live_sql
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
        docs=docs, table=spec.table, where=where_sql(spec)
    )
    params = dict(spec.filter_params)
    if spec.as_of is not None:
        params["as_of"] = spec.as_of
    return q, params


_FIELD_REF = re.compile(r'"c"\."([a-z][a-z0-9_]*)"')
#: Fields with more distinct values than this are counted with SQL, not from value counts.
MAX_VALUE_COUNTS = 50_000
#: (database, snapshot id, field) -> value counts usable; a snapshot never changes, so neither does this.
_READY: dict[tuple[str, int, str], bool] = {}


def _counts_table(snapshot_id: int) -> sql.Identifier:
    # The snapshot's own table (ranklock.store.tables), so dropping or reaping the snapshot drops it too.
    return snapshot_table(snapshot_id)


def _value_counts_ready(dsn: str, spec: SearchSpec, sid: int, name: str, one_chunk: bool) -> Steps[bool]:
    """Make sure the snapshot's per-value counts of ``name`` exist; False when the field has too many values.

    A snapshot never changes, so how many documents hold each value of a
    field is computed once (an index-only GROUP BY) and every later count of
    a predicate on that field alone is a sum over its distinct values.
    """
    key = (dsn, sid, name)
    if key in _READY:
        return _READY[key]
    known = yield Block(_make_value_counts(key, spec, sid, name, one_chunk))
    if known is not None:
        return bool(known)
    # Remembered only once committed: snapshots never change, so neither do their counts.
    _READY[key] = True
    return True


def _make_value_counts(
    key: tuple[str, int, str], spec: SearchSpec, sid: int, name: str, one_chunk: bool
) -> Steps[bool | None]:
    """In one transaction: the counts table of ``name`` made; None when just built, else whether usable."""
    table = _counts_table(sid)
    yield Fetch("SELECT pg_advisory_xact_lock(%s, %s)", [locks.VALUE_COUNTS, sid])
    # Pin the snapshot row until commit, so a drop cannot delete it while the
    # counts table is made; nothing would ever drop a table created for a
    # snapshot that is gone.  SKIP LOCKED: a drop in progress holds the row,
    # and waiting for it could deadlock with our lock on its chunk table;
    # counting rows instead gives the same number.
    alive = yield Fetch("SELECT 1 FROM ranklock.snapshots WHERE id = %s FOR KEY SHARE SKIP LOCKED", [sid])
    if not alive:
        return False
    yield Fetch(
        sql.SQL('CREATE TABLE IF NOT EXISTS {} ("#field" text NOT NULL, "#docs" bigint, "#chunks" bigint)').format(
            table
        )
    )
    rows = yield Fetch(sql.SQL('SELECT min("#docs") FROM {} WHERE "#field" = %s').format(table), [name], dicts=False)
    if rows and rows[0][0] is not None:
        _READY[key] = int(rows[0][0]) >= 0
        return _READY[key]
    # Counted over the whole snapshot (a routed read sees fewer segments), once for every later search.
    full = spec.layout.full()
    # The field's type and statistics, from the largest segment's table (they all have the same columns).
    largest = max(full.segments, key=lambda g: g.chunks)
    info = yield Fetch(
        "SELECT format_type(a.atttypid, a.atttypmod), s.n_distinct, c.reltuples "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "LEFT JOIN pg_stats s ON s.schemaname = 'ranklock_data' AND s.tablename = c.relname "
        "AND s.attname = a.attname WHERE a.attrelid = %s::regclass AND a.attname = %s",
        [segment_table("chunks", largest.id).as_string(None), name],
        dicts=False,
    )
    if not info:
        return False
    sql_type, n_distinct, reltuples = info[0]
    distinct = None if n_distinct is None else (n_distinct if n_distinct >= 0 else -n_distinct * reltuples)
    col = sql.Identifier(name)
    yield Fetch(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(table, col, sql.SQL(sql_type)))
    if distinct is None or distinct > MAX_VALUE_COUNTS:
        # No statistics, or too many values for a sum to beat counting rows.
        yield Fetch(sql.SQL('INSERT INTO {} ("#field", "#docs") VALUES (%s, -1)').format(table), [name])
        _READY[key] = False
        return False
    # A document's fields are the same on all its chunks, so distinct
    # documents per value sum to the distinct documents of any set of
    # values.  With one chunk per document count(*) is that number and
    # the field's btree answers alone (an index-only scan).
    docs = sql.SQL("count(*)") if one_chunk else sql.SQL("count(DISTINCT c.doc_id)")
    q = sql.SQL(
        'INSERT INTO {table} ("#field", {col}, "#docs", "#chunks") '
        "SELECT %s, c.{col}, {docs}, count(*) FROM {chunks} AS c WHERE {live} GROUP BY c.{col}"
    ).format(table=table, col=col, chunks=chunks_sql(full), docs=docs, live=live_sql(full))
    yield Fetch(q, [name])
    return None


def _value_counts_exist(dsn: str, sid: int, name: str) -> Steps[bool]:
    """Read only: whether the snapshot's value counts of ``name`` were already made (and are usable).

    Creates nothing and remembers nothing: only the building path memoises.
    """
    key = (dsn, sid, name)
    if key in _READY:
        return _READY[key]
    table = _counts_table(sid)
    reg = yield Fetch("SELECT to_regclass(%s)", [table.as_string(None)], dicts=False)
    if not reg or reg[0][0] is None:
        return False
    rows = yield Fetch(sql.SQL('SELECT min("#docs") FROM {} WHERE "#field" = %s').format(table), [name], dicts=False)
    return bool(rows) and rows[0][0] is not None and int(rows[0][0]) >= 0


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
        one_chunk = int(stats.get("max_chunks_per_doc", 2) or 2) <= 1
        try:
            if build_counts:
                ready = yield from _value_counts_ready(dsn, spec, int(snap["id"]), name, one_chunk)
            else:
                ready = yield from _value_counts_exist(dsn, int(snap["id"]), name)
        except psycopg.Error:
            # A read-only role or replica cannot create the counts table;
            # counting rows gives the same number, only slower.
            if build_counts:
                _READY[(dsn, int(snap["id"]), name)] = False
            ready = False
        if ready:
            q = sql.SQL(
                'SELECT coalesce(sum(c."#docs"), 0), coalesce(sum(c."#chunks"), 0) FROM {} AS c '
                'WHERE c."#field" = %(rl_count_field)s AND ({})'
            ).format(_counts_table(int(snap["id"])), spec.filter_sql)
            p = {**spec.filter_params, "rl_count_field": name}
            row = yield Block(_one_row(q, p), timeout=timeout)
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
