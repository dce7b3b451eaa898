"""The evaluation harness on BEIR SciFact and NFCorpus: the full `ranklock eval` report per collection.

Runs the golden set (queries.jsonl + qrels/test.tsv from ../shared/data) on the
active snapshot of each collection, in hybrid, lexical and semantic mode, at
k = 10, 50, 100, once per lexical ranker (the semantic branch does not depend
on it, so the second ranker runs hybrid and lexical only).  Each run writes the
harness's own outputs (report.json, summary.md, run-<mode>.trec, plot.png) to
bench/out/eval-<collection>-<ranker>/, and the recall gate compares the two
rankers' reports.  Prints a table and writes bench/out/eval_beir.json.

    RANKLOCK_HOME=/work/bench-home python bench/eval_beir.py [--collections scifact,nfcorpus]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ranklock import Engine
from ranklock.eval.compare import compare_reports
from ranklock.eval.golden import load_golden
from ranklock.eval.run import evaluate

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
KS = (10, 50, 100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=None, help="RANKLOCK_HOME (default: environment)")
    ap.add_argument("--collections", default="scifact,nfcorpus")
    ap.add_argument("--rankers", default="bm25,ts_rank_cd", help="lexical rankers; the first runs all modes")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rankers = [r.strip() for r in args.rankers.split(",") if r.strip()]
    result: dict[str, Any] = {
        "bench": "eval_beir",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "ks": list(KS),
        "collections": {},
    }
    rows = []
    with Engine(home=args.home, log_queries=False) as eng:
        for name in [c.strip() for c in args.collections.split(",") if c.strip()]:
            golden = load_golden(DATA / name)
            entry: dict[str, Any] = {"golden": golden.describe(), "runs": {}}
            reports = {}
            for i, ranker in enumerate(rankers):
                modes = ("hybrid", "lexical", "semantic") if i == 0 else ("hybrid", "lexical")
                t0 = time.perf_counter()
                try:
                    run = evaluate(eng, name, golden, ks=KS, modes=modes, params={"lexical_ranker": ranker})
                except Exception as exc:  # a ranker this build lacks is recorded, not fatal
                    entry["runs"][ranker] = {"error": f"{type(exc).__name__}: {exc}"}
                    print(f"{name} {ranker}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                folder = out / f"eval-{name}-{ranker}"
                run.write(folder)
                rep = run.report
                reports[ranker] = rep
                entry["snapshot"] = rep["snapshot"]
                entry["runs"][ranker] = {
                    "folder": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder),
                    "seconds": round(time.perf_counter() - t0, 1),
                    "modes": rep["modes"],
                    "params": rep["params"],
                    "timing": rep["timing"],
                }
                for mode, m in rep["modes"].items():
                    rows.append((name, ranker, mode, m, rep["params"][mode]))
            if len(reports) == 2:
                a, b = rankers[0], rankers[1]
                gate = compare_reports(reports[b], reports[a])
                entry["gate"] = {
                    "base": b,
                    "new": a,
                    "passed": gate.passed,
                    "failures": gate.failures,
                    "params_diff": gate.params_diff,
                    "queries_losing_relevant_at_100": len(
                        {r["qid"] for r in gate.lost if r["k"] == 100 and r["mode"] == "hybrid"}
                    ),
                }
            result["collections"][name] = entry
    (out / "eval_beir.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    cols = [f"ndcg@{k}" for k in KS] + [f"recall@{k}" for k in KS] + ["mrr"]
    print(f"{'collection':<10} {'ranker':<11} {'mode':<9} " + " ".join(f"{c:>10}" for c in cols) + "  depth  sem")
    for name, ranker, mode, m, p in rows:
        print(
            f"{name:<10} {ranker:<11} {mode:<9} "
            + " ".join(f"{m[c]:>10.4f}" for c in cols)
            + f"  {p.get('depth')!s:>5}  {p.get('vector_strategy')}"
        )
    for name, e in result["collections"].items():
        if "gate" in e:
            g = e["gate"]
            print(
                f"gate {name}: {g['base']} -> {g['new']}: {'PASS' if g['passed'] else 'FAIL'}; "
                + "; ".join(g["failures"])
            )
    print(f"wrote {out / 'eval_beir.json'}")


if __name__ == "__main__":
    main()
