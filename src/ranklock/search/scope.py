"""The scope of a search: how many documents and chunks its hard constraints admit.

Every search first counts the documents that satisfy its filter and ``as_of``
(``matching_count``) with the very predicate every branch uses.  The count
decides how the branches run (the vector branch's exact scan, BM25's admitted
plan) and whether the result is complete (ranklock.search.completeness).

A predicate on one typed field is counted from the value counts the writer made
(ranklock.snapshot.value_counts): each segment's, summed, less those of the
snapshot's dead rows; any other constraint, or a field some part has no counts
of, by counting rows.  Either way one statement, which only reads: it travels
with the search's other reads (ranklock.store.steps.gather).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import sql

from ..snapshot.segments import Layout
from ..store.steps import Batch, Fetch, Steps
from ..store.tables import segment_table, snapshot_table
from .sharded import compose, fan_out_sql, on_one_shard
from .spec import Scope, SearchSpec, where_sql

__all__ = ["Scope", "count_matching_sql", "scope_steps"]


def count_matching_sql(spec: SearchSpec, snap_stats: Mapping[str, Any]) -> tuple[sql.Composed, dict[str, Any]]:
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


def _counted(layout: Layout, stats: Mapping[str, Any], name: str) -> bool:
    """Whether every part of the whole snapshot (each non-empty segment, its dead rows) counts ``name``'s values."""
    full = layout.full()
    parts_ok = all((g.counts or {}).get(name) == "values" for g in full.segments if g.chunks > 0)
    dead_ok = not full.dead_rows or (stats.get("dead_counts") or {}).get(name) == "values"
    return parts_ok and dead_ok


def _counts_sum_sql(layout: Layout, name: str, filter_sql: sql.Composable) -> sql.Composable:
    """The documents and chunks of the value counts whose value passes the filter: segments added, dead rows taken off.

    Over the whole snapshot: a read routed to fewer segments counts the same documents (routing
    only skips segments no matching document is in).
    """
    full = layout.full()
    tables = [("1", segment_table("counts", g.id)) for g in full.segments if g.chunks > 0]
    if full.dead_rows:
        tables.append(("-1", snapshot_table(full.snapshot_id)))
    col = sql.Identifier(name)
    arms = [
        sql.SQL(
            'SELECT t.{col}, {sign} * t."#docs" AS "#docs", {sign} * t."#chunks" AS "#chunks" FROM {table} AS t '
            'WHERE t."#field" = %(rl_count_field)s'
        ).format(col=col, sign=sql.SQL(sign), table=table)
        for sign, table in tables
    ]
    return sql.SQL(
        'SELECT coalesce(sum(c."#docs"), 0), coalesce(sum(c."#chunks"), 0) FROM ({}) AS c WHERE ({})'
    ).format(sql.SQL(" UNION ALL ").join(arms), filter_sql)


def scope_steps(spec: SearchSpec, snap: Mapping[str, Any]) -> Steps[Scope]:
    """What the hard constraints admit: the snapshot's own totals, the value counts, or a count of rows.

    Snapshot tables are immutable, so the count sees exactly the rows the search statement will
    see.  No hard constraint: no read at all (the snapshot recorded its totals when it was built).
    """
    stats = snap.get("stats") or {}
    total = int(stats.get("chunks") or snap.get("chunk_count") or 0)
    if spec.unconstrained and "documents" in stats and "chunks" in stats:
        return Scope(int(stats["documents"]), int(stats["chunks"]), int(stats["chunks"]))
    fields = spec.filter_fields
    if spec.as_of is None and len(fields) == 1 and _counted(spec.layout, stats, fields[0]):
        q = _counts_sum_sql(spec.layout, fields[0], spec.filter_sql)
        rows = yield Fetch(q, {**spec.filter_params, "rl_count_field": fields[0]}, dicts=False)
    elif spec.layout.distributed:
        # On a Citus cluster each shard counts its own rows (its dead rows are its own), the coordinator adds:
        # one Citus task a shard, as the search's query phase (ranklock.search.sharded).  A document's chunks
        # share a shard, so its distinct count is the shards' sum.
        q, p = count_matching_sql(on_one_shard(spec), stats)
        call, params = fan_out_sql(spec, compose(spec, q, p))
        summed = sql.SQL(
            "SELECT coalesce(sum((h ->> 'documents')::bigint), 0), coalesce(sum((h ->> 'chunks')::bigint), 0) "
            "FROM {} AS r, jsonb_array_elements(r) AS h"
        ).format(call)
        _, rows = yield Batch((Fetch("SELECT set_config('jit', 'off', true)"), Fetch(summed, params, dicts=False)))
    else:
        q, p = count_matching_sql(spec, stats)
        # JIT compilation costs tens of milliseconds, more than this count (set for the batch it travels in).
        _, rows = yield Batch((Fetch("SELECT set_config('jit', 'off', true)"), Fetch(q, p, dicts=False)))
    documents, chunks = int(rows[0][0]), int(rows[0][1])  # an aggregate always returns one row
    return Scope(documents, chunks, total or chunks)
