"""The BM25 plans' cost constants, each with the measurement that set it.

Tests and benchmarks pin a plan by patching these (``monkeypatch.setattr(costs, "FULL_SCAN_POSTINGS", 0)``):
every plan reads them here, when it is chosen or composed, never a copy of its own.
"""

from __future__ import annotations

__all__ = [
    "CHUNK_POSTINGS",
    "CONSTRAINED_WAYS",
    "DEEPER",
    "DENSE_ABS",
    "DENSE_MAX_TERMS",
    "DENSE_PROBE",
    "DENSE_REL",
    "DENSE_REST_POSTINGS",
    "DENSE_SEEDS",
    "FULL_SCAN_POSTINGS",
    "LIST_POSTINGS",
    "PROBE",
    "PROBE_POSTINGS",
    "SEED_PER_TERM",
    "SKIP_LEVEL",
]

#: Below this many postings for all query terms together, score them all.
FULL_SCAN_POSTINGS = 20000
#: Postings per query term read, in impact order and scored exactly, to bound theta.
SEED_PER_TERM = 256
#: Chunks of highest upper bound scored exactly to raise theta before the bound cut.
PROBE = 1000
#: Levels read beyond the cheapest sufficient one: a posting read costs ~0.3 us,
#: a chunk probed ~3 us (1M-chunk collection), so reading deeper to prune more pays.
DEEPER = 1
#: Level the MaxScore-skipped terms are still read to (top LEVEL_BASE * 2^SKIP_LEVEL postings),
#: tightening the bound of every chunk not seen in them.
SKIP_LEVEL = 5
#: Dense plan: postings scored to bound theta, shared by the query's terms
#: (at least 32 each): a long query's 15 terms x 256 seeds cost more than
#: they prune, since the dense bounds are tight and probing does the rest.
DENSE_SEEDS = 1024
#: Dense plan: chunks of highest bound scored exactly to raise theta (its bounds are tight: few are needed).
DENSE_PROBE = 250
#: Dense plan: at most this many postings of the query's other (non-dense) terms, read whole.
DENSE_REST_POSTINGS = 200_000
#: Dense plan: relative margin on a float4 sum of dense contributions.  Each
#: weight rounded to float4, its product with the term's qtf and each float4
#: addition err by at most u = 2^-24 relative, all terms are >= 0, so the
#: float4 sum of T contributions is within about (3T + 1) u of their exact sum
#: (the +1: the cut itself rounded to float4): 2e-5 covers T <= 111.
DENSE_REL = 2e-5
#: Dense plan: absolute margin (float4 underflow of tiny weights).
DENSE_ABS = 1e-6
#: Dense plan: at most this many dense terms in a query (DENSE_REL's limit, with room); more take the impact plan.
DENSE_MAX_TERMS = 64
#: Under a constraint (ranklock.search.bm25.pruned.choose_way), in posting reads (a posting read in impact order and
#: looked up in the admitted set, ~0.13 us at 1M chunks, measured with bench/filtered_plans.py): scoring one
#: chunk exactly from the forward table (~5 us) ...
CHUNK_POSTINGS = 40
#: ... checking the filter row of one posting read, in an ordered pass (~1 us with the read) ...
PROBE_POSTINGS = 10
#: ... and listing one admitted chunk in the admitted set (~0.3-0.4 us: its index entry read, kept, hashed).
LIST_POSTINGS = 2
#: The ways a constrained search may take, the cheapest chosen (tests and benchmarks pin one).
CONSTRAINED_WAYS: tuple[str, ...] = ("admitted", "set", "probe")
