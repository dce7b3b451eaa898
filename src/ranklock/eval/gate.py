"""The promotion gate: may a candidate snapshot replace the active one?

``ranklock snapshot activate COLLECTION ID --gate GOLDEN`` calls
:func:`promotion_gate` and activates only when it passes.  The candidate is

1. evaluated on the golden set in every mode next to the active snapshot, and
   refused when mean recall at any cutoff drops beyond ``tolerance`` (the recall
   gate of :mod:`ranklock.eval.compare`, whatever nDCG did);
2. stability-checked: the golden queries are searched ``runs`` times on the
   candidate, and it is refused when its RSI falls below ``rsi_threshold``.

The overlap of the candidate's top-10 with the active snapshot's is measured
and reported too (``rsi_vs_active``): a new corpus legitimately changes
answers, so it is gated only when ``cross_rsi_threshold`` is given.

    >>> rep = promotion_gate(eng, "docs", 42, "golden.jsonl")   # doctest: +SKIP
    >>> rep.passed, rep.reasons                                 # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .compare import compare_reports
from .golden import GoldenSet, load_golden
from .run import ALL_MODES, DEFAULT_KS, evaluate
from .stability import compare_configurations, measure_stability
from .target import EvalTarget

__all__ = ["GateReport", "promotion_gate"]


@dataclass
class GateReport:
    """The verdict on a candidate snapshot, with the evidence."""

    passed: bool
    collection: str
    candidate: dict[str, Any]
    active: dict[str, Any] | None
    reasons: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    recall_gate: dict[str, Any] | None = None
    stability: dict[str, Any] = field(default_factory=dict)
    rsi_vs_active: dict[str, Any] | None = None
    golden: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "collection": self.collection,
            "candidate": self.candidate,
            "active": self.active,
            "reasons": self.reasons,
            "golden": self.golden,
            "metrics": self.metrics,
            "recall_gate": self.recall_gate,
            "stability": self.stability,
            "rsi_vs_active": self.rsi_vs_active,
        }


def promotion_gate(
    target: EvalTarget,
    collection: str,
    candidate_snapshot: int,
    golden: str | Path,
    *,
    rsi_threshold: float = 0.9,
    ks: Sequence[int] = DEFAULT_KS,
    modes: Sequence[str] = ALL_MODES,
    tolerance: float = 0.0,
    runs: int = 3,
    concurrency: int = 2,
    stability_k: int = 10,
    cross_rsi_threshold: float | None = None,
) -> GateReport:
    """Evaluate ``candidate_snapshot`` against the active snapshot; ``.passed`` says whether to activate."""
    if not 0 <= rsi_threshold <= 1:
        raise InputError(f"rsi_threshold must be from 0 to 1, got {rsi_threshold}; the default is 0.9.")
    gs: GoldenSet = load_golden(golden)
    coll = target.collection(collection)
    active_id = coll.active_snapshot_id
    cand = evaluate(target, collection, gs, ks=ks, modes=modes, snapshot=candidate_snapshot)
    rep = GateReport(
        passed=True,
        collection=collection,
        candidate=dict(cand.report["snapshot"]),
        active=None,
        golden=gs.describe(),
    )
    rep.metrics["candidate"] = cand.report["modes"]
    if active_id is not None and active_id != candidate_snapshot:
        base = evaluate(target, collection, gs, ks=ks, modes=modes, snapshot=active_id)
        rep.active = dict(base.report["snapshot"])
        rep.metrics["active"] = base.report["modes"]
        verdict = compare_reports(base.report, cand.report, tolerance=tolerance)
        rep.recall_gate = verdict.to_dict()
        if not verdict.passed:
            rep.passed = False
            rep.reasons.extend(verdict.failures)
    queries = [(q.qid, q.text, q.filter) for q in gs.queries]
    stab = measure_stability(
        target,
        collection,
        queries,
        runs=max(2, runs),
        concurrency=concurrency,
        k=stability_k,
        snapshot=candidate_snapshot,
        threshold=rsi_threshold,
    )
    rep.stability = stab.to_dict()
    if not stab.passed:
        rep.passed = False
        rep.reasons.append(
            f"candidate RSI {stab.rsi:.4f} over {stab.runs} runs is below the threshold {rsi_threshold:g}: "
            "the same query does not return the same documents"
        )
    if active_id is not None and active_id != candidate_snapshot:
        cross = compare_configurations(
            target,
            collection,
            queries,
            a={"snapshot": active_id},
            b={"snapshot": candidate_snapshot},
            k=stability_k,
            concurrency=concurrency,
            threshold=cross_rsi_threshold or 0.0,
        )
        rep.rsi_vs_active = {
            "rsi": cross.rsi,
            "rbo": cross.rbo,
            "identical_share": cross.identical_share,
            "threshold": cross_rsi_threshold,
        }
        if cross_rsi_threshold is not None and cross.rsi < cross_rsi_threshold:
            rep.passed = False
            rep.reasons.append(
                f"top-{stability_k} overlap with the active snapshot is {cross.rsi:.4f}, below {cross_rsi_threshold:g}"
            )
    return rep
