"""Evaluation: golden sets, trec_eval-compatible metrics, the recall gate, stability, canary, promotion gate.

One concept per module:

* :mod:`.golden`    golden sets (BEIR folders, hand-labelled JSONL/YAML)
* :mod:`.metrics`   recall@k, nDCG@k, reciprocal rank (trec_eval definitions)
* :mod:`.overlap`   Jaccard and rank-biased overlap of two rankings
* :mod:`.run`       evaluate a golden set in several modes; JSON, Markdown, TREC runs, plot
* :mod:`.compare`   the recall gate between two reports
* :mod:`.stability` the Retrieval Stability Index
* :mod:`.canary`    replay a query set and compare with the last recorded run
* :mod:`.gate`      the promotion gate for ``snapshot activate --gate``
"""

from __future__ import annotations

from .compare import CompareReport, compare_reports, load_report
from .gate import GateReport, promotion_gate
from .golden import GoldenQuery, GoldenSet, load_golden, load_queries
from .metrics import mean, ndcg_at_k, recall_at_k, reciprocal_rank
from .overlap import jaccard, rank_biased_overlap
from .run import EvalRun, evaluate
from .stability import StabilityReport, compare_configurations, measure_stability, stability_of_runs

__all__ = [
    "CompareReport",
    "EvalRun",
    "GateReport",
    "GoldenQuery",
    "GoldenSet",
    "StabilityReport",
    "compare_configurations",
    "compare_reports",
    "evaluate",
    "jaccard",
    "load_golden",
    "load_queries",
    "load_report",
    "mean",
    "measure_stability",
    "ndcg_at_k",
    "promotion_gate",
    "rank_biased_overlap",
    "recall_at_k",
    "reciprocal_rank",
    "stability_of_runs",
]
