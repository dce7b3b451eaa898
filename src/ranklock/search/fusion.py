"""Fusion: the one search statement that joins the branches by RRF.

One SQL statement, composed with :mod:`psycopg.sql`, every value bound as a
named parameter.  Ties break by ``doc_id`` (byte order, ``COLLATE "C"``) and
then chunk number at every step: in the per-document window, at each branch's
LIMIT and in the outer ORDER BY, so equal scores can never reorder between
runs.  The same filter predicate is placed in every branch.

Each branch (ranklock.search.spec.Branch) first keeps one chunk per document (its
best), then ranks documents; fusion is Reciprocal Rank Fusion, ``sum 1 /
(rrf_k + rank)`` over the branches with ranks counted from 1, written once
for any number of branches.  Branch ranks are competition ranks (``rank()``):
documents with identical raw scores share a rank, so a tie stays a tie after
fusion instead of becoming a preference for the smaller doc id; the doc id
only decides the (stable, meaningless) order inside the tie and which tied
documents survive a LIMIT.  Under rule rrf/2 (ranklock.snapshot.rules) a block
of n tied documents shares the weights of the n positions it spans
(:func:`ranklock.search.rrf.rrf_weight_sql`), so it weighs what n documents weigh, not n first
places.  The hit's chunk is the one from the branch that ranked the document
higher (the lower chunk number when they ranked it equal).

Every branch of the registry (ranklock.search.branches) has its signal
columns in the statement, NULL when it does not run, so a row always has the
same shape; :func:`read_hits` reads them by name.  Branch names, aliases and
column names are constants of the branch classes, never input, so they are
written into the statement as they are; every value is bound.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import sql

from ..snapshot.segments import live_sql
from ..store import locks
from ..store.steps import Fetch
from .branches import registry
from .results import BranchSignal, Hit
from .sharded import fetch_sql, query_sql
from .spec import SearchSpec, Signal

__all__ = ["build_search_sql", "read_branches", "read_hits", "settings_fetches", "shortfall_column"]


def shortfall_column(kind: type[Any]) -> str:
    """The column reporting how many documents a branch that can fall short handed to fusion."""
    return f"{kind.cte}_docs"


def settings_fetches(spec: SearchSpec) -> tuple[Fetch, ...]:
    """The read gate and the transaction-local settings of the search, every branch's included: first in its batch."""
    # Transaction-local (set_config(..., true)): a pooled connection never
    # carries one query's budget into the next.  JIT compilation costs tens of
    # milliseconds and only pays off for long analytic queries, never here.
    # work_mem: BM25 over very common terms aggregates 10^5-10^6 postings; at
    # the default 4 MB the hash aggregate spills to disk.
    settings: list[tuple[str, str]] = [("jit", "off"), ("work_mem", "64MB")]
    for b in spec.branches:
        settings += b.settings()
    if spec.layout.distributed:
        # On a Citus cluster set_config changes the coordinator only: the shards would scan with the
        # workers' defaults (measured: ef_search 40).  SET LOCAL reaches the workers' transactions
        # when citus.propagate_set_commands is 'local'.  A utility statement binds no value, so each
        # is a quoted literal (the names are the branches' constants), one statement each.
        # First, before anything propagates: keep the connections the query phase opens (one a shard at most)
        # when the transaction ends.  Citus keeps one a worker by default, so each search opened the others
        # anew, and a new backend's first search on a shard (its catalog caches, its plpgsql compiled) cost
        # more than the search: measured on the local cluster, the query phase 20-23 ms against 16-17 ms.
        shards = max((g.shards or 1) for g in spec.layout.segments)
        sets = [
            sql.SQL("SET LOCAL citus.max_cached_conns_per_worker = {}").format(sql.Literal(shards)),
            sql.SQL("SET LOCAL citus.propagate_set_commands = 'local'"),
        ] + [sql.SQL("SET LOCAL {} = {}").format(sql.SQL(name), sql.Literal(value)) for name, value in settings]
        return tuple(Fetch(q) for q in sets)
    # The snapshot's read gate, shared, in the same round trip and before any table is read: a purge
    # closes it to swap the snapshot's segment tables (ranklock.snapshot.purge), and a search waits
    # here, holding no table lock the swap could wait for.
    q = sql.SQL("SELECT pg_advisory_xact_lock_shared(%s::int, %s::int), {}").format(
        sql.SQL(", ").join(sql.SQL("set_config(%s, %s, true)") for _ in settings)
    )
    return (Fetch(q, [locks.READ_GATE, spec.layout.snapshot_id, *(x for pair in settings for x in pair)]),)


def _signals(kind: type[Any], running: bool) -> sql.Composable:
    """A registry branch's two signal columns in the fused CTE: its own, or NULLs when it does not run."""
    sig: Signal = kind.signal
    if not running:
        return sql.SQL("NULL::bigint AS {rank}, NULL::{t} AS {raw}").format(
            rank=sql.SQL(sig.rank_key), t=sql.SQL(sig.raw_type), raw=sql.SQL(sig.raw_key)
        )
    return sql.SQL("{a}.rank AS {rank}, {a}.{col} AS {raw}").format(
        a=sql.SQL(kind.alias), rank=sql.SQL(sig.rank_key), col=sql.SQL(sig.raw_column), raw=sql.SQL(sig.raw_key)
    )


def _coalesce(parts: Sequence[sql.Composable]) -> sql.Composable:
    # coalesce of one value is that value.
    return parts[0] if len(parts) == 1 else sql.SQL("coalesce({})").format(sql.SQL(", ").join(parts))


def _least(parts: Sequence[sql.Composable]) -> sql.Composable:
    return parts[0] if len(parts) == 1 else sql.SQL("least({})").format(sql.SQL(", ").join(parts))


def _pick_chunk(
    ranks: Sequence[sql.Composable], chunk: sql.Composable, rank: sql.Composable, other_chunk: sql.Composable
) -> sql.Composable:
    """The chunk of the better-ranked side of (the branches so far, one more), the lower chunk on a tie.

    ``ranks`` are the ranks of the branches so far (their best is their
    ``least``) and ``chunk`` the chunk they chose.  Folding this over the
    branches picks the chunk of the best-ranked branch, ties by chunk number.
    """
    best = _least(ranks)
    return sql.SQL(
        """CASE WHEN {rank} IS NULL OR {best} < {rank} THEN {chunk}
                WHEN {best} IS NULL OR {rank} < {best} THEN {other}
                ELSE least({chunk}, {other}) END"""
    ).format(rank=rank, best=best, chunk=chunk, other=other_chunk)


def _fused_cte(spec: SearchSpec) -> sql.Composable:
    running = {b.name for b in spec.branches}
    signals = sql.SQL(",\n           ").join(_signals(kind, kind.name in running) for kind in registry())
    first = spec.branches[0]
    a0 = sql.SQL(first.alias)
    if len(spec.branches) == 1:
        # One branch: nothing to join or add.
        return sql.SQL(
            """fused AS (
    SELECT {a}.doc_id, {a}.chunk, {a}.rrf AS score,
           {signals}
    FROM {cte} AS {a}
)"""
        ).format(a=a0, signals=signals, cte=sql.SQL(first.cte))
    doc_ids: list[sql.Composable] = [sql.SQL("{}.doc_id").format(a0)]
    ranks: list[sql.Composable] = [sql.SQL("{}.rank").format(a0)]
    chunk: sql.Composable = sql.SQL("{}.chunk").format(a0)
    scores: list[sql.Composable] = [sql.SQL("coalesce({}.rrf, 0)").format(a0)]
    joins: list[sql.Composable] = [sql.SQL("{} AS {}").format(sql.SQL(first.cte), a0)]
    for b in spec.branches[1:]:
        a = sql.SQL(b.alias)
        joins.append(
            sql.SQL("FULL OUTER JOIN {cte} AS {a} ON {a}.doc_id = {prev}").format(
                cte=sql.SQL(b.cte), a=a, prev=_coalesce(doc_ids)
            )
        )
        rank = sql.SQL("{}.rank").format(a)
        chunk = _pick_chunk(ranks, chunk, rank, sql.SQL("{}.chunk").format(a))
        doc_ids.append(sql.SQL("{}.doc_id").format(a))
        ranks.append(rank)
        scores.append(sql.SQL("coalesce({}.rrf, 0)").format(a))
    return sql.SQL(
        """fused AS (
    SELECT {doc_id} AS doc_id,
           {chunk} AS chunk,
           {score} AS score,
           {signals}
    FROM {joins}
)"""
    ).format(
        doc_id=_coalesce(doc_ids),
        chunk=chunk,
        score=sql.SQL(" + ").join(scores),
        signals=signals,
        joins=sql.SQL(" ").join(joins),
    )


def build_search_sql(spec: SearchSpec) -> tuple[sql.Composed, dict[str, Any]]:
    """The search statement of ``spec`` and its bound values."""
    params: dict[str, Any] = {"depth": spec.depth, "rrf_k": spec.rrf_k, "k": spec.k}
    params.update(spec.filter_params)
    if spec.as_of is not None:
        params["as_of"] = spec.as_of
    ctes: list[sql.Composable] = []
    if spec.layout.distributed:
        # The query phase: every shard's top hits (ranklock.search.sharded), which the branches' CTEs rank.
        phase, phase_params = query_sql(spec)
        ctes.append(phase)
        params.update(phase_params)
    for b in spec.branches:
        params.update(b.params(spec))
        ctes.append(b.ctes(spec))
    ctes.append(_fused_cte(spec))
    running = {b.name for b in spec.branches}
    # How many documents each branch that can fall short handed to fusion: the
    # completeness check compares it with min(depth, matching documents) to
    # detect an index scan that came back short.
    shortfalls = [
        sql.SQL("{} AS {}").format(
            sql.SQL("(SELECT count(*) FROM {})").format(sql.SQL(kind.cte))
            if kind.name in running
            else sql.SQL("NULL::bigint"),
            sql.SQL(shortfall_column(kind)),
        )
        for kind in registry()
        if kind.can_fall_short
    ]
    if spec.layout.distributed:
        return _sharded_statement(spec, ctes, shortfalls, params)
    signal_cols = _signal_columns("f")
    query = sql.SQL(
        """WITH {ctes}
SELECT row_number() OVER (ORDER BY f.score DESC, f.doc_id, f.chunk) AS rank,
       f.doc_id, f.chunk, f.score, {signal_cols},
       c.char_start, c.char_end, c.text, {branches} AS branches{shortfalls}
FROM fused AS f JOIN {table} AS c ON c.doc_id = f.doc_id AND c.chunk = f.chunk AND {live}
ORDER BY f.score DESC, f.doc_id, f.chunk
LIMIT %(k)s::bigint"""
    ).format(
        ctes=sql.SQL(",\n").join(ctes),
        signal_cols=signal_cols,
        table=spec.table,
        # A document's replaced version (a dead row of another segment) has the same doc_id and chunk.
        live=live_sql(spec.layout),
        branches=_branches_column(spec),
        shortfalls=sql.SQL("").join(sql.SQL(", {}").format(s) for s in shortfalls),
    )
    return query, params


def _signal_columns(alias: str) -> sql.Composable:
    """Every registry branch's rank and raw score columns of ``alias`` (``fused``'s)."""
    # Aliases and column names are the statement's own constants, written as they are (no quotes).
    a = sql.SQL(alias)
    return sql.SQL(", ").join(
        sql.SQL("{a}.{}, {a}.{}").format(sql.SQL(kind.signal.rank_key), sql.SQL(kind.signal.raw_key), a=a)
        for kind in registry()
    )


def _sharded_statement(
    spec: SearchSpec, ctes: Sequence[sql.Composable], shortfalls: Sequence[sql.Composable], params: dict[str, Any]
) -> tuple[sql.Composed, dict[str, Any]]:
    """The statement on a Citus cluster: the query phase and the fusion (``ctes``), then the fetch of the k hits.

    ``top`` is the fused top ``k`` in the one-node order, each hit with the
    segment and row its branch found it at (one of the hits every shard sent
    back); ``fetched`` reads their text by those (ranklock.search.sharded.fetch_sql),
    so no dead row has to be masked again.
    """
    fetch, fetch_params = fetch_sql(spec.layout)
    query = sql.SQL(
        """WITH {ctes},
top AS MATERIALIZED (
    SELECT row_number() OVER (ORDER BY f.score DESC, f.doc_id, f.chunk) AS rank,
           f.doc_id, f.chunk, f.score, {signal_cols}, h.seg, h.row_id
    FROM fused AS f CROSS JOIN LATERAL (
        SELECT r.seg, r.row_id FROM shard_rows AS r WHERE r.doc_id = f.doc_id AND r.chunk = f.chunk LIMIT 1) AS h
    ORDER BY f.score DESC, f.doc_id, f.chunk
    LIMIT %(k)s::bigint
),
{fetch}
SELECT t.rank, t.doc_id, t.chunk, t.score, {top_signals},
       x.char_start, x.char_end, x.text, {branches} AS branches{shortfalls}
FROM top AS t JOIN fetched AS x ON x.seg = t.seg AND x.row_id = t.row_id
ORDER BY t.rank"""
    ).format(
        ctes=sql.SQL(",\n").join(ctes),
        signal_cols=_signal_columns("f"),
        fetch=fetch,
        top_signals=_signal_columns("t"),
        branches=_branches_column(spec),
        shortfalls=sql.SQL("").join(sql.SQL(", {}").format(x) for x in shortfalls),
    )
    return query, {**params, **fetch_params}


def _branches_column(spec: SearchSpec) -> sql.Composable:
    """Each branch's candidates as JSON ``{"lexical": [[doc_id, chunk, rank, score], …], "semantic": …}``.

    Computed in the search statement itself, from the very CTEs fusion reads
    (an uncorrelated subquery: evaluated once, not per row), so logging costs
    no second search.  As text: every row carries it, and only the first row's
    is decoded (:func:`read_branches`), where psycopg decoded the same tens of
    kilobytes ``k`` times.  Raw scores keep their SQL types, so they read back
    equal to the hits' raw signals.
    """
    if not spec.capture_branches:
        return sql.SQL("NULL::json")
    parts = [
        sql.SQL(
            "{name}, (SELECT coalesce(json_agg(json_build_array(doc_id, chunk, rank, {raw}) "
            "ORDER BY rank, doc_id, chunk), '[]'::json) FROM {cte})"
        ).format(name=sql.Literal(b.name), raw=sql.SQL(b.signal.raw_column), cte=sql.SQL(b.cte))
        for b in spec.branches
    ]
    return sql.SQL("(SELECT json_build_object({}))::text").format(sql.SQL(", ").join(parts))


def read_branches(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[list[Any]]]:
    """Each branch's candidates from the statement's ``branches`` column (:func:`_branches_column`); {} without."""
    text = rows[0]["branches"] if rows else None
    return {} if text is None else dict(json.loads(text))


def read_hits(rows: Sequence[Mapping[str, Any]]) -> list[Hit]:
    """The hits of the statement's rows, every registry branch's signals by name (tie groups not yet set)."""
    kinds = registry()
    hits = []
    for r in rows:
        signals = tuple(
            BranchSignal(
                kind.name,
                None if r[kind.signal.rank_key] is None else int(r[kind.signal.rank_key]),
                None if r[kind.signal.raw_key] is None else float(r[kind.signal.raw_key]),
                kind.signal,
            )
            for kind in kinds
        )
        hits.append(
            Hit(
                rank=int(r["rank"]),
                doc_id=r["doc_id"],
                chunk=int(r["chunk"]),
                score=float(r["score"]),
                signals=signals,
                char_start=int(r["char_start"]),
                char_end=int(r["char_end"]),
                text=r["text"],
            )
        )
    return hits
