"""Completeness: how many documents the hard constraints admit, how the vector
branch is served, and whether the result is the whole answer.

Every search first counts the documents that satisfy its filter and ``as_of``
(``matching_count``) with the very predicate both branches use.  The count
picks the vector branch's strategy:

* ``exact``: the filtered set has at most ``exact_threshold`` chunks (or the
  collection has no ANN index).  Every filtered chunk is scored, so the branch
  is complete by construction;
* ``hnsw`` / ``ivfflat``: an index scan with pgvector's iterative scan
  (``strict_order`` for HNSW), bounded by ``max_scan_tuples`` / probes.

An index scan can still come back short: the budget runs out before enough
filtered rows were found.  The statement reports how many documents the
vector branch handed to fusion; when that is fewer than ``min(depth,
matching_count)`` the branch is re-run exactly (``exact_fallback``, the
default) or the response says ``complete: false, truncation:
"index_scan_budget"``.  Nothing is dropped silently.

``complete`` is true when the response holds ``min(k, matching_count)``
documents that are certainly the top of the chosen ranking, or, in lexical
mode, every matching document that contains the query's words.  An ANN index
(HNSW, IVFFlat) orders approximately, so a vector branch it served gives
``complete: false, truncation: "approximate_index"`` even when the count is
full; only an exact scan certifies the top.  Truncation reasons, strongest
first: ``index_scan_budget``, ``fusion_depth``, ``approximate_index``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ..settings import SearchParams
from ..store import locks
from ..store.database import Database
from ..store.steps import Block, Fetch, Steps, run_steps
from ..store.tables import snapshot_table
from .plan import SearchPlan, time_predicate

__all__ = [
    "TRUNCATIONS",
    "Scope",
    "choose_strategy",
    "count_matching_sql",
    "judge",
    "prepare_plan",
    "prepare_plan_steps",
]

#: Why a response is not complete.
TRUNCATIONS = {
    "index_scan_budget": "the vector index stopped (ef_search / max_scan_tuples / probes) before it returned "
    "min(depth, matching_count) documents",
    "fusion_depth": "hybrid fusion saw at most `depth` documents per branch, fewer than k",
    "approximate_index": "the vector branch was served by an ANN index (hnsw / ivfflat) with enough documents, "
    "but its order is approximate: the true nearest documents are not guaranteed (raise exact_threshold above "
    "matching chunks for an exact scan)",
}


@dataclass(frozen=True)
class Scope:
    """Documents and chunks satisfying the hard constraints and ``as_of``."""

    documents: int
    chunks: int


def _unconstrained(plan: SearchPlan) -> bool:
    return plan.as_of is None and not plan.filter_params and plan.filter_sql.as_string(None) == "TRUE"


def count_matching_sql(plan: SearchPlan, snap_stats: dict[str, Any]) -> tuple[sql.Composed, dict[str, Any]]:
    """The count statement: the same predicate (filter and ``as_of``) both branches use."""
    # With one chunk per document, count(*) is the document count and the
    # planner can answer from the field's index alone (an index-only scan);
    # count(DISTINCT) would visit and sort every row.
    one_chunk = int(snap_stats.get("max_chunks_per_doc", 2) or 2) <= 1
    docs = sql.SQL("count(*)") if one_chunk else sql.SQL("count(DISTINCT c.doc_id)")
    q = sql.SQL("SELECT {docs} AS documents, count(*) AS chunks FROM {table} AS c WHERE ({f}) AND ({t})").format(
        docs=docs, table=plan.table, f=plan.filter_sql, t=time_predicate(plan)
    )
    params = dict(plan.filter_params)
    if plan.as_of is not None:
        params["as_of"] = plan.as_of
    return q, params


_FIELD_REF = re.compile(r'"c"\."([a-z][a-z0-9_]*)"')
#: Fields with more distinct values than this are counted with SQL, not from value counts.
MAX_VALUE_COUNTS = 50_000
#: (database, snapshot id, field) -> value counts usable; a snapshot never changes, so neither does this.
_READY: dict[tuple[str, int, str], bool] = {}


def _counts_table(snapshot_id: int) -> sql.Identifier:
    # A per-snapshot table (ranklock.store.tables), so dropping or reaping the snapshot drops it too.
    return snapshot_table("valuecounts", snapshot_id)


def _value_counts_ready(dsn: str, plan: SearchPlan, sid: int, name: str, one_chunk: bool) -> Steps[bool]:
    """Make sure the snapshot's per-value counts of ``name`` exist; False when the field has too many values.

    A snapshot never changes, so how many documents hold each value of a
    field is computed once (an index-only GROUP BY) and every later count of
    a predicate on that field alone is a sum over its distinct values.
    """
    key = (dsn, sid, name)
    if key in _READY:
        return _READY[key]
    known = yield Block(_make_value_counts(key, plan, sid, name, one_chunk))
    if known is not None:
        return bool(known)
    # Remembered only once committed: snapshots never change, so neither do their counts.
    _READY[key] = True
    return True


def _make_value_counts(
    key: tuple[str, int, str], plan: SearchPlan, sid: int, name: str, one_chunk: bool
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
    chunks = plan.table
    info = yield Fetch(
        "SELECT format_type(a.atttypid, a.atttypmod), s.n_distinct, c.reltuples "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "LEFT JOIN pg_stats s ON s.schemaname = 'ranklock_data' AND s.tablename = c.relname "
        "AND s.attname = a.attname WHERE a.attrelid = %s::regclass AND a.attname = %s",
        [chunks.as_string(None), name],
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
        "SELECT %s, c.{col}, {docs}, count(*) FROM {chunks} AS c GROUP BY c.{col}"
    ).format(table=table, col=col, chunks=chunks, docs=docs)
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
    plan: SearchPlan,
    snap: dict[str, Any],
    timeout: float | None = None,
    *,
    build_counts: bool = True,
) -> Steps[Scope]:
    stats = snap.get("stats") or {}
    if _unconstrained(plan) and "documents" in stats and "chunks" in stats:
        # No hard constraint: every document of the snapshot matches, and the
        # snapshot recorded how many there are when it was built.
        return Scope(int(stats["documents"]), int(stats["chunks"]))
    # The compiled predicate reads its fields as "c"."name" (values are
    # always placeholders), so this is exactly the set of columns it reads.
    fields = set(_FIELD_REF.findall(plan.filter_sql.as_string(None)))
    if plan.as_of is None and len(fields) == 1:
        (name,) = fields
        one_chunk = int(stats.get("max_chunks_per_doc", 2) or 2) <= 1
        try:
            if build_counts:
                ready = yield from _value_counts_ready(dsn, plan, int(snap["id"]), name, one_chunk)
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
            ).format(_counts_table(int(snap["id"])), plan.filter_sql)
            p = {**plan.filter_params, "rl_count_field": name}
            row = yield Block(_one_row(q, p), timeout=timeout)
            return Scope(int(row[0]), int(row[1]))
    q, p = count_matching_sql(plan, stats)
    row = yield Block(_one_row(q, p, jit_off=True), timeout=timeout)
    return Scope(int(row[0]), int(row[1]))


def choose_strategy(index_kind: str, scope: Scope, sp: SearchParams) -> str:
    """``exact`` for a small filtered set or an index-less collection, else the collection's index."""
    if index_kind == "exact" or scope.chunks <= sp.exact_threshold:
        return "exact"
    return index_kind


def prepare_plan(
    db: Database,
    plan: SearchPlan,
    index_kind: str,
    snap: dict[str, Any],
    sp: SearchParams,
    *,
    timeout: float | None = None,
    build_counts: bool = True,
) -> Scope:
    """Count the matching set and set the plan's vector strategy, before its SQL is built.

    The count runs on its own connection: snapshot tables are immutable, so it
    sees exactly the rows the search transaction will see.  ``timeout`` (seconds)
    limits its statements as the search's own are limited.  ``build_counts=False``
    (``search_sql``) writes nothing: it uses value counts only if they exist, else
    counts rows, which gives the same numbers and so the same strategy.
    """
    steps = prepare_plan_steps(db.dsn, plan, index_kind, snap, sp, timeout=timeout, build_counts=build_counts)
    return run_steps(db, steps)


def prepare_plan_steps(
    dsn: str,
    plan: SearchPlan,
    index_kind: str,
    snap: dict[str, Any],
    sp: SearchParams,
    *,
    timeout: float | None = None,
    build_counts: bool = True,
) -> Steps[Scope]:
    """:func:`prepare_plan` as steps (ranklock.store.steps); ``dsn`` names the database read, for memos."""
    scope: Scope = yield Block(_scope(dsn, plan, snap, timeout, build_counts=build_counts), transaction=False)
    if plan.uses_lexical and plan.lexical_params.get("bm25_plan"):
        from .bm25 import choose_admitted_plan

        # A constraint admitting few chunks: score those (the same threshold as the vector branch's exact scan).
        choose_admitted_plan(plan, scope.chunks, sp.exact_threshold)
    if plan.uses_semantic:
        plan.vector_strategy = choose_strategy(index_kind, scope, sp)
        if plan.vector_strategy == "hnsw":
            from .semantic import choose_ef_search

            total = int((snap.get("stats") or {}).get("chunks") or snap.get("chunk_count") or scope.chunks)
            plan.ef_search = choose_ef_search(plan, sp, scope.chunks, total)
    return scope


def judge(
    plan: SearchPlan, sp: SearchParams, scope: Scope, returned: int, truncation: str | None, warnings: list[str]
) -> str | None:
    """The truncation reason of a search that returned ``returned`` rows (None: complete); appends warnings.

    ``truncation`` is what the run already found (``index_scan_budget``).
    """
    expected = min(plan.k, scope.documents)
    if truncation is None and returned < expected:
        if plan.uses_semantic:
            # Both branches are complete to `depth`, so only fusion's depth
            # can have kept documents out (hybrid with depth < k).
            truncation = "fusion_depth"
            warnings.append(
                f"{returned} of {expected} matching documents returned: hybrid fusion takes {plan.depth} "
                f"per branch; raise depth to at least k={plan.k}"
            )
        else:
            warnings.append(
                f"{returned} of the {scope.documents} matching documents contain the query's words; "
                "lexical mode ranks only those (use hybrid or semantic mode to rank all)"
            )
    if truncation is None and plan.uses_semantic and plan.vector_strategy != "exact":
        # The index returned enough documents, but an ANN index cannot certify
        # they are the true nearest ones: say so rather than claim the top.
        truncation = "approximate_index"
    return truncation
