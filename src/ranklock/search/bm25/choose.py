"""Which BM25 plan a query takes on a snapshot: one function, from the query's postings counted before.

Natural queries under the snapshot's k1 and b are scored from the segments'
postings and forward tables, by the plan their postings call for
(:func:`choose_plan`); anything else takes the match plan.  The statement
carries only the plan it runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import sql

from ...errors import SnapshotError
from ...snapshot.lexical_stats import BM25_STATS_VERSION, terms_table
from ...snapshot.segments import Layout
from . import costs
from .dense import DenseBlocks, DensePlan
from .full import FullPlan
from .impact import ImpactPlan
from .match import MatchPlan
from .plan import Bm25Plan, Budget, LexicalQuery, Statistics
from .sharded import ShardedPlan

__all__ = ["NO_DENSE", "choose_plan", "query_postings_sql"]

#: A df no term reaches: the min_df of a segment without dense blocks.
NO_DENSE = 2**31 - 1


def _impact_eligible(lex: LexicalQuery, entries: Sequence[Mapping[str, Any]]) -> bool:
    return lex.syntax == "natural" and all(lex.k1 == e["k1"] and lex.b == e["b"] for e in entries)


def _entries(layout: Layout, collection: str) -> list[Mapping[str, Any]]:
    """Every segment's BM25 statistics, or an error naming the snapshot that must build them."""
    entries = []
    for g in layout.segments:
        entry = g.bm25
        if not entry or entry.get("version") != BM25_STATS_VERSION:
            sid = layout.snapshot_id
            raise SnapshotError(
                f"snapshot {sid} has no BM25 statistics of the current layout (version {BM25_STATS_VERSION}) "
                f"in segment {g.id}; build them once with `ranklock snapshot lexical-stats {collection} {sid}` "
                f"(Python: engine.lexical_stats({collection!r}, {sid})), or search with lexical_ranker='ts_rank_cd'."
            )
        entries.append(entry)
    return entries


def _min_df(entry: Mapping[str, Any]) -> int:
    dense = entry.get("dense")
    return int(dense["min_df"]) if dense else NO_DENSE


def query_postings_sql(lex: LexicalQuery, layout: Layout) -> tuple[sql.Composable, list[Any]]:
    """An expression of the query's postings counts over the segments, and its values; NULL when not needed.

    The expression is a bigint[]: the postings of all the query's terms, those
    of its terms without dense blocks (in their segment), and the most terms
    with dense blocks in one segment (0 when none has any).  Only natural BM25
    queries under the segments' k1 and b choose a plan on them (see
    :func:`choose_plan`).
    """
    if lex.ranker != "bm25":
        return sql.SQL("NULL::bigint[]"), []
    entries = [g.bm25 for g in layout.segments]
    if not all(e and e.get("version") == BM25_STATS_VERSION for e in entries):
        return sql.SQL("NULL::bigint[]"), []
    if not _impact_eligible(lex, [e for e in entries if e]):
        return sql.SQL("NULL::bigint[]"), []
    arms = []
    params: list[Any] = []
    for g in layout.segments:
        arms.append(
            sql.SQL(
                "SELECT {seg}::bigint AS seg, x.df, %s::int AS min_df FROM {terms} AS x "
                "WHERE x.lexeme = ANY (ranklock.query_terms(%s::regconfig, %s, %s, %s))"
            ).format(seg=sql.Literal(g.id), terms=terms_table(g.id))
        )
        params += [_min_df(g.bm25 or {}), lex.language, lex.accent, lex.syntax, lex.query]
    return sql.SQL(
        "(SELECT ARRAY[coalesce(sum(z.total), 0), coalesce(sum(z.rest), 0), coalesce(max(z.nd), 0)]::bigint[] FROM ("
        "SELECT t.seg, sum(t.df) AS total, coalesce(sum(t.df) FILTER (WHERE t.df < t.min_df), 0) AS rest, "
        "count(*) FILTER (WHERE t.df >= t.min_df) AS nd FROM ({arms}) AS t GROUP BY t.seg) AS z)"
    ).format(arms=sql.SQL(" UNION ALL ").join(arms)), params


def choose_plan(
    lex: LexicalQuery,
    layout: Layout,
    totals: tuple[int, int, int],
    postings: int | Sequence[int] | None,
    *,
    terms: int = 1,
    collection: str = "COLLECTION",
) -> Bm25Plan:
    """The BM25 plan of ``lex`` on the snapshot ``layout``, or an error saying why it has none.

    ``totals`` are the snapshot's live chunks, their total length and its most
    chunks of a document.  Natural queries under the segments' k1 and b take
    the full plan when their terms have at most ``FULL_SCAN_POSTINGS``
    postings together (``postings``, counted by :func:`query_postings_sql`:
    that count alone, or [all, those of terms without dense blocks, dense
    terms]); the dense plan when, moreover, every segment has dense blocks of
    one block size, 1 to ``DENSE_MAX_TERMS`` query terms have them in a
    segment and the others have at most ``DENSE_REST_POSTINGS`` postings; the
    impact plan otherwise; anything else takes the match plan.  On a Citus
    cluster, each shard runs the plan so chosen (:class:`ShardedPlan`).
    """
    entries = _entries(layout, collection)
    n, total_len, max_chunks = totals
    read_chunks = sum(g.chunks for g in layout.segments)
    avgdl = _avgdl(n, total_len)
    stats = Statistics(
        chunks=n,
        avgdl=avgdl,
        snapshot_id=layout.snapshot_id,
        segments=tuple(layout.ids),
        # A segment's weights were computed with its own average length: under the snapshot's, a length
        # part grows at most by this factor (see ranklock.snapshot.lexical_stats).
        length_factors=tuple(max(1.0, avgdl / (float(e["avgdl"]) or 1.0)) for e in entries),
        min_df=tuple(_min_df(e) for e in entries),
        # Each segment's share of the chunks read: its part of the seed budget.
        shares=tuple(g.chunks / (read_chunks or 1) for g in layout.segments),
        level_base=int(entries[0]["level_base"]),
        max_chunks=max(1, max_chunks),
    )
    budget = Budget(
        seed=costs.SEED_PER_TERM,
        seed_reads=costs.SEED_PER_TERM,
        full=costs.FULL_SCAN_POSTINGS,
        probe=costs.PROBE,
        deeper=costs.DEEPER,
        skip_level=costs.SKIP_LEVEL,
    )
    plan = _one_node_plan(lex, entries, stats, budget, postings, terms)
    # On a Citus cluster every shard runs that plan once, with the snapshot's statistics bound.
    return ShardedPlan(plan) if layout.distributed else plan


def _one_node_plan(
    lex: LexicalQuery,
    entries: Sequence[Mapping[str, Any]],
    stats: Statistics,
    budget: Budget,
    postings: int | Sequence[int] | None,
    terms: int,
) -> Bm25Plan:
    if not _impact_eligible(lex, entries):
        return MatchPlan(stats, budget)
    counts = [postings] if isinstance(postings, int) else [int(x) for x in postings or [0]]
    total, rest, n_dense = counts[0], counts[1] if len(counts) > 1 else counts[0], counts[2] if len(counts) > 2 else 0
    blocks = {int(e["dense"]["block"]) for e in entries if e.get("dense")}
    dense = len(blocks) == 1 and all(e.get("dense") for e in entries)
    if total <= costs.FULL_SCAN_POSTINGS:
        return FullPlan(stats, budget, total, terms)
    if dense and 1 <= n_dense <= costs.DENSE_MAX_TERMS and rest <= costs.DENSE_REST_POSTINGS:
        dense_budget = dataclasses.replace(budget, probe=costs.DENSE_PROBE)
        dense_blocks = DenseBlocks(
            seeds=costs.DENSE_SEEDS,
            block=blocks.pop(),
            rest=costs.DENSE_REST_POSTINGS,
            rel=costs.DENSE_REL,
            abs=costs.DENSE_ABS,
        )
        return DensePlan(stats, dense_budget, total, terms, dense_blocks)
    return ImpactPlan(stats, budget, total, terms)


def _avgdl(n: int, total_len: int) -> float:
    """The snapshot's average chunk length from its exact integer totals (correctly rounded, as Python divides).

    Computed from the live chunks' count and total length, never from a
    segment: the same documents give the same bits however they were cut.
    """
    return total_len / n if n else 1.0
