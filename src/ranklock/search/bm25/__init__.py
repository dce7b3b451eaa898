"""BM25 in plain PostgreSQL: the lexical branch's default ranker, one module per plan.

    score(chunk, q) = sum over distinct query terms t present in the chunk of
        qtf(t) * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

``qtf(t)`` is how many times the query holds t (rule ``bm25/2``; 1 for
snapshots built under ``bm25/1``, see ranklock.snapshot.rules): the weight
``w = idf * tf-part`` is stored once per posting, and every plan adds
``qtf * w``, so a repeated term is summed once per occurrence, as in Lucene.

(Robertson/Sparck Jones idf with +1 inside the log, as Lucene and bm25s do,
so a term in more than half the chunks still scores a little instead of
negatively.)  ``tf`` and ``len`` count the positions of the chunk's
tsvector, ``N``, ``df`` and ``avglen`` come from the snapshot's statistics
(ranklock.snapshot.lexical_stats), fixed when the snapshot was built.

Weights are float8, computed by one expression, and a score is their float8
sum in one fixed order, ascending term id (ranklock.search.bm25.parts): every
plan gives the same last bit, and the plans differ only in which chunks they
score.  (The sum was numeric until issue 14: exact in any order, but a
float8-to-numeric conversion costs ~0.7 us a term, three quarters of scoring
a chunk.)

A plan is one frozen value (:class:`Bm25Plan`, ranklock.search.bm25.plan) that
owns its parameters, its SQL and how it meets a hard constraint; one function
picks it (:func:`choose_plan`) before the statement is built, from the number
of postings of the query's terms (:func:`query_postings_sql`):

* :class:`FullPlan` (``full``): few postings, every one summed (full.py);
* :class:`ImpactPlan` (``impact``): terms read in impact order only as deep as
  theta needs, survivors scored exactly (impact.py, pruned.py, bounds.py);
* :class:`DensePlan` (``dense``): frequent words bounded by their summed dense
  blocks (dense.py);
* :class:`AdmittedPlan` (``admitted``): under a hard constraint that admits
  few chunks, every admitted chunk scored (admitted.py); the impact and dense
  plans choose it, or check the constraint in a set or in probes
  (:meth:`Bm25Plan.constrained`, pruned.choose_way, admission.py);
* :class:`MatchPlan` (no name): websearch syntax, or k1/b other than the
  snapshot's: every chunk matching the tsquery scored (match.py);
* :class:`ShardedPlan` (the inner plan's name): on a Citus cluster, every
  shard runs the plan so chosen once, the snapshot's statistics bound
  (sharded.py, ranklock.search.sharded).

The cost constants live in ranklock.search.bm25.costs, with the measurements
that set them.
"""

from __future__ import annotations

from . import costs
from .admitted import AdmittedPlan
from .choose import choose_plan, query_postings_sql
from .dense import DenseBlocks, DensePlan
from .full import FullPlan
from .impact import ImpactPlan
from .match import MatchPlan
from .plan import Admission, Bm25Plan, Budget, LexicalQuery, Statistics
from .sharded import BoundTerms, ShardedPlan

__all__ = [
    "Admission",
    "AdmittedPlan",
    "Bm25Plan",
    "BoundTerms",
    "Budget",
    "DenseBlocks",
    "DensePlan",
    "FullPlan",
    "ImpactPlan",
    "LexicalQuery",
    "MatchPlan",
    "ShardedPlan",
    "Statistics",
    "choose_plan",
    "costs",
    "query_postings_sql",
]
