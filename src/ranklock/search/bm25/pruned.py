"""The impact and dense plans' one statement: theta from seeds, candidates bounded, survivors scored exactly.

1. ``theta``, a lower bound of the score of the branch's last document: the
   top ``SEED_PER_TERM`` postings of each term (shared by the segments in
   proportion to their chunks) are scored exactly and filtered; the
   ``depth``-th best document is theta.  (Fewer than ``depth`` documents
   among them pass the filter: theta = 0 and the plan falls back to the full
   sum.)
2. The candidates and their upper bounds (ranklock.search.bm25.bounds: read
   depths for the impact plan, summed dense blocks for the dense plan); those
   below theta go.
3. The ``PROBE`` chunks of highest bound are scored exactly, which raises
   theta (usually to near the true last score) and the bound cut is applied
   again.
4. The rest are scored exactly from the forward table.

Under a hard constraint (:func:`choose_way`) the plan's seeds are read in
impact order until enough pass it, and every row that can reach the top is
checked once, in the admitted set listed once (``set``) or in one ordered pass
of the rows read (``probe``); or the admitted plan runs instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg import sql

from ...snapshot.segments import has_filter_tables
from . import costs
from .admission import adm_cte, admits, checked_rows, constrained, member, unfiltered
from .bounds import dense_ctes, impact_ctes
from .parts import doc_best, postings, query_terms, top
from .plan import Admission
from .summed import summed_ctes

if TYPE_CHECKING:
    from ..spec import SearchSpec

__all__ = ["admission", "admit_params", "choose_way", "pruned_sql"]


def admit_params(admit: Admission | None) -> dict[str, Any]:
    """A pruned plan's parameters that say how it checks a hard constraint (none without one)."""
    return {} if admit is None else {"bm25_admit": admit.way, "bm25_admitted_share": admit.share}


def admission(
    spec: SearchSpec, admitted_chunks: int, *, dense: bool, terms: int, postings: int, chunks: int
) -> Admission | None:
    """How a pruned plan (impact or dense) meets the hard constraint of ``spec``: checked on the rows it
    reads (an Admission), or None: the admitted plan scores what the constraint admits (choose_way)."""
    way = choose_way(spec, dense=dense, terms=terms, postings=postings, chunks=chunks, admitted_chunks=admitted_chunks)
    if way == "admitted":
        return None
    return Admission(way, max(1, admitted_chunks) / max(1, chunks))


def choose_way(spec: SearchSpec, *, dense: bool, terms: int, postings: int, chunks: int, admitted_chunks: int) -> str:
    """Under a hard constraint: the cheapest of scoring the admitted chunks, or pruning with a set or probes.

    Called once the completeness count knows ``admitted_chunks`` (before the
    statement is built, so ``search_sql`` shows the same plan).  Each way's
    cost is estimated in posting reads (a posting read in impact order and
    looked up in a hash, about 0.13 us at 1M chunks, is the unit):

    * ``admitted``: the admitted plan scores every admitted chunk
      (``CHUNK_POSTINGS`` each);
    * the pruning plans read each term's postings in impact order until its
      seeds pass the constraint, about ``seeds / s`` of them at a selectivity
      ``s`` (never more than the terms hold), score their seeds and probes
      exactly, and check what they read: in the admitted set, listed once
      (``LIST_POSTINGS`` an admitted chunk, then a lookup a posting read:
      ``set``, on filter tables only), or in one ordered pass of the rows
      read (``PROBE_POSTINGS`` each: ``probe``).

    The constants are measured (docs/benchmarks.md, bench/filtered_plans.py);
    the shape holds on any corpus: the admitted plan grows with what the
    constraint admits, the set with it too but 10 times more slowly, the
    probes with the inverse of the selectivity.
    """
    chunks = max(1, chunks)
    admitted = max(1, admitted_chunks)
    seeds = costs.DENSE_SEEDS if dense else costs.SEED_PER_TERM * max(1, terms)
    scored = (seeds + (costs.DENSE_PROBE if dense else costs.PROBE)) * costs.CHUNK_POSTINGS
    reads = min(postings, seeds * chunks / admitted)
    estimate = {"probe": scored + reads * costs.PROBE_POSTINGS, "admitted": admitted * costs.CHUNK_POSTINGS}
    if has_filter_tables(spec.layout):
        estimate["set"] = scored + reads + admitted * costs.LIST_POSTINGS
    return min((w for w in estimate if w in costs.CONSTRAINED_WAYS), key=lambda w: (estimate[w], w), default="probe")


def pruned_sql(spec: SearchSpec, admit: Admission | None, *, dense: bool) -> sql.Composable:
    """The statement of the impact plan (``dense`` false) or the dense plan: rows (doc_id, chunk, score)."""
    # Under a constraint the plan's candidates are checked once (admits), then only admitted rows go on.
    checked = not unfiltered(spec)
    middle = (dense_ctes if dense else impact_ctes)(spec, "cand_all" if checked else "cand")
    if checked and not constrained(spec):
        middle = sql.SQL(
            "{middle},\ncand AS MATERIALIZED (SELECT k.seg, k.row_id, k.bound FROM cand_all AS k WHERE {admits})"
        ).format(middle=middle, admits=admits(spec, admit, "k"))
    elif checked:
        # The candidates' rows checked in one ordered pass of the filter rows, in either way: they are few, and
        # the admitted set's hash would be built a second time.
        middle = sql.SQL(
            "{middle},\ncand_ok AS MATERIALIZED ({checked}),\n"
            "cand AS MATERIALIZED (SELECT k.seg, k.row_id, k.bound FROM cand_all AS k WHERE {admits})"
        ).format(
            middle=middle,
            checked=checked_rows(spec, "cand_all"),
            admits=member("k", "cand_ok"),
        )
    seeds = (
        sql.SQL("greatest(32, %(bm25_dense_seeds)s::bigint / (SELECT count(DISTINCT ord) FROM qt))")
        if dense
        else sql.SQL("%(bm25_seed)s::bigint")
    )
    batched = checked and constrained(spec) and admit is not None and admit.way == "probe"
    if batched:
        # Each term's top postings over the share the constraint admits, then their rows checked in one
        # ordered pass of the filter tables: about as many pass as seeds are wanted, at ~1 us a row where a
        # probe of each, in impact order, cost ~5 us.
        seed = sql.SQL(
            """seed_read AS MATERIALIZED (
    SELECT DISTINCT qt.seg, s.row_id FROM qt CROSS JOIN LATERAL (
        SELECT p.row_id FROM {postings} AS p WHERE p.seg = qt.seg AND p.term_id = qt.term_id
        ORDER BY p.w DESC, p.row_id LIMIT ceil({seeds} * qt.share / %(bm25_admitted_share)s::float8)::bigint) AS s
),
seed AS MATERIALIZED ({checked})"""
        ).format(postings=postings(spec), seeds=seeds, checked=checked_rows(spec, "seed_read"))
    else:
        seed = sql.SQL(
            """seed AS MATERIALIZED (
    -- A term's top postings, the budget shared by the segments in proportion to their chunks: a
    -- small new segment seeds a few (seeding every segment in full cost 4x the seeds at 4 segments).
    -- Any seed set gives a valid theta (real scores of real documents); fewer only loosen it.  Under a
    -- constraint, the top postings of admitted chunks: read in impact order until enough pass.
    SELECT DISTINCT qt.seg, s.row_id FROM qt CROSS JOIN LATERAL (
        SELECT p.row_id FROM {postings} AS p WHERE p.seg = qt.seg AND p.term_id = qt.term_id AND {seed_admits}
        ORDER BY p.w DESC, p.row_id LIMIT ceil({seeds} * qt.share)::bigint) AS s
)"""
        ).format(postings=postings(spec), seed_admits=admits(spec, admit, "p", ordered=True), seeds=seeds)
    return sql.SQL(
        """WITH {qt}{adm},
{seed},
seed_docs AS MATERIALIZED ({seed_docs}),
theta AS MATERIALIZED (
    -- Fewer than depth seed documents: theta = 0, every posting is summed.
    SELECT th.theta, th.theta - 1e-9 * (1 + th.theta) AS cut FROM (
        SELECT coalesce((SELECT best FROM seed_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s::bigint - 1)), 0)
               AS theta) AS th
),
{middle},
probe AS MATERIALIZED (SELECT seg, row_id FROM cand ORDER BY bound DESC, seg, row_id LIMIT %(bm25_probe)s::bigint),
probe_docs AS MATERIALIZED ({probe_docs}),
theta2 AS MATERIALIZED (
    SELECT th.theta - 1e-9 * (1 + th.theta) AS cut FROM (
        SELECT greatest((SELECT theta FROM theta),
                        coalesce((SELECT best FROM probe_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s::bigint - 1)), 0))
               AS theta) AS th
),
{summed}
{top}"""
    ).format(
        qt=query_terms(spec),
        adm=adm_cte(spec, admit),
        seed=seed,
        middle=middle,
        seed_docs=doc_best(spec, "seed"),
        probe_docs=doc_best(spec, "probe"),
        summed=summed_ctes(spec, admit, when=sql.SQL("(SELECT theta FROM theta) = 0"), impact=True),
        top=top(spec),
    )
