"""The recall gate: compare two evaluation reports and refuse a recall drop.

Retrieval quality is bounded by recall: the generator cannot cite what was
never retrieved.  So the gate fails when mean recall at any gated cutoff, in
any gated mode, drops by more than ``tolerance`` (absolute), *whatever nDCG or
MRR did*; a better-ordered but smaller candidate set is a regression.  It
lists every query that lost a relevant document, which documents, and at which
cutoff, and it names the manifest fields and search parameters that differ
between the two runs, so a change can be traced to one variable.

    >>> res = compare_reports(load_report("base/report.json"), load_report("new/report.json"))  # doctest: +SKIP
    >>> res.passed, res.failures                                                               # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .run import REPORT_SCHEMA

__all__ = ["CompareReport", "compare_reports", "load_report"]

# Floating-point noise: two runs with identical rankings give identical means,
# but a recomputed mean may differ in the last bit.
_EPS = 1e-12


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a ``report.json`` written by ``ranklock eval`` (a folder holding one works too)."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: no such report; pass the report.json written by `ranklock eval --out DIR`.") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg}); pass an unmodified report.json.") from None
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise InputError(f"{p}: schema is {found!r}, expected {REPORT_SCHEMA!r}; pass a report from `ranklock eval`.")
    return data


@dataclass
class CompareReport:
    """The gate's verdict with everything needed to act on it."""

    passed: bool
    tolerance: float
    gated_ks: list[int]
    gated_modes: list[str]
    failures: list[str] = field(default_factory=list)
    metrics: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    lost: list[dict[str, Any]] = field(default_factory=list)
    manifest_diff: dict[str, dict[str, Any]] = field(default_factory=dict)
    params_diff: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    base: dict[str, Any] = field(default_factory=dict)
    new: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "tolerance": self.tolerance,
            "gated_ks": self.gated_ks,
            "gated_modes": self.gated_modes,
            "failures": self.failures,
            "base": self.base,
            "new": self.new,
            "metrics": self.metrics,
            "lost": self.lost,
            "manifest_diff": self.manifest_diff,
            "params_diff": self.params_diff,
            "notes": self.notes,
        }


def compare_reports(
    base: dict[str, Any],
    new: dict[str, Any],
    *,
    ks: Sequence[int] | None = None,
    modes: Sequence[str] | None = None,
    tolerance: float = 0.0,
) -> CompareReport:
    """Gate ``new`` against ``base``: fail on a mean recall drop beyond ``tolerance`` at any gated k.

    ``ks`` and ``modes`` default to those both reports have.  Both reports must
    come from the same golden set (same digest): recall over two different
    sets of judgments is not comparable.
    """
    if not isinstance(tolerance, (int, float)) or tolerance < 0 or tolerance >= 1:
        raise InputError(f"tolerance must be a number from 0 to 1 (absolute recall), got {tolerance!r}; e.g. 0.01.")
    bd, nd = base["golden"]["digest"], new["golden"]["digest"]
    if bd != nd:
        raise InputError(
            f"the reports used different golden sets (digest {bd[:12]}… from {base['golden']['path']} vs "
            f"{nd[:12]}… from {new['golden']['path']}); rerun both with the same --golden."
        )
    common_ks = sorted(set(base["ks"]) & set(new["ks"]))
    gated_ks = sorted(set(ks)) if ks is not None else common_ks
    missing_k = sorted(set(gated_ks) - set(common_ks))
    if missing_k:
        raise InputError(
            f"cutoff(s) {', '.join(map(str, missing_k))} are not in both reports (common: "
            f"{', '.join(map(str, common_ks)) or 'none'}); gate on those, or rerun with --k."
        )
    common_modes = [m for m in base["modes"] if m in new["modes"]]
    gated_modes = list(modes) if modes is not None else common_modes
    missing_m = sorted(set(gated_modes) - set(common_modes))
    if missing_m or not gated_modes:
        raise InputError(
            f"mode(s) {', '.join(missing_m) or '(none)'} are not in both reports (common: "
            f"{', '.join(common_modes) or 'none'}); gate on those, or rerun with --modes."
        )
    from ..snapshot.manifest import diff_manifests

    res = CompareReport(
        passed=True,
        tolerance=float(tolerance),
        gated_ks=gated_ks,
        gated_modes=gated_modes,
        base={"snapshot": base["snapshot"], "created_at": base.get("created_at")},
        new={"snapshot": new["snapshot"], "created_at": new.get("created_at")},
        manifest_diff=diff_manifests(base.get("manifest") or {}, new.get("manifest") or {}),
    )
    for mode in gated_modes:
        bm, nm = base["modes"][mode], new["modes"][mode]
        names = [n for n in bm if n in nm and isinstance(bm[n], float)]
        res.metrics[mode] = {n: {"base": bm[n], "new": nm[n], "delta": nm[n] - bm[n]} for n in names}
        for k in gated_ks:
            name = f"recall@{k}"
            drop = bm[name] - nm[name]
            if drop > tolerance + _EPS:
                res.passed = False
                ndcg = f"ndcg@{k}"
                went_up = ndcg in bm and ndcg in nm and nm[ndcg] > bm[ndcg]
                res.failures.append(
                    f"{mode} {name} dropped {bm[name]:.4f} -> {nm[name]:.4f} (-{drop:.4f}, tolerance {tolerance:g})"
                    + (f" although {ndcg} rose {bm[ndcg]:.4f} -> {nm[ndcg]:.4f}" if went_up else "")
                )
        res.lost.extend(_lost_documents(base, new, mode, gated_ks))
        bp, np_ = base.get("params", {}).get(mode, {}), new.get("params", {}).get(mode, {})
        pdiff = {
            key: {"old": bp.get(key), "new": np_.get(key)}
            for key in sorted(set(bp) | set(np_))
            if bp.get(key) != np_.get(key)
        }
        if pdiff:
            res.params_diff[mode] = pdiff
    changed = len(res.manifest_diff) + len({k for d in res.params_diff.values() for k in d})
    if changed > 1:
        res.notes.append(
            f"{changed} manifest fields or search parameters differ; change one variable at a time to "
            "know which one moved the metrics."
        )
    if changed == 0 and any(abs(v["delta"]) > _EPS for m in res.metrics.values() for v in m.values()):
        res.notes.append(
            "metrics changed although no manifest field or search parameter differs: results were not "
            "reproducible; run `ranklock stability` on this collection."
        )
    return res


def _lost_documents(base: dict[str, Any], new: dict[str, Any], mode: str, ks: Sequence[int]) -> list[dict[str, Any]]:
    """Per query and cutoff: relevant documents in the base top k that are not in the new top k."""
    out: list[dict[str, Any]] = []
    bq, nq = base["per_query"][mode], new["per_query"][mode]
    for qid, brow in bq.items():
        nrow = nq.get(qid, {"relevant_ranks": {}})
        for k in ks:
            before = {d for d, r in brow["relevant_ranks"].items() if r <= k}
            after = {d for d, r in nrow["relevant_ranks"].items() if r <= k}
            lost = sorted(before - after)
            if lost:
                out.append(
                    {
                        "mode": mode,
                        "qid": qid,
                        "k": k,
                        "lost": lost,
                        "gained": sorted(after - before),
                        "recall_base": brow.get(f"recall@{k}"),
                        "recall_new": nrow.get(f"recall@{k}"),
                    }
                )
    return out
