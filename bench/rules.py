"""The ranking rules of issue 22 side by side on the same snapshots: query-term frequency and tie blocks.

Every test query of SciFact and NFCorpus (BEIR, real all-MiniLM-L6-v2
vectors) runs in each mode under the four combinations of the BM25 rule
(``bm25/1``: each query term once; ``bm25/2``: once per occurrence) and the
fusion rule (``rrf/1``: competition ranks; ``rrf/2``: a tie block shares its
positions), on one snapshot per collection: the rules are chosen in this
process (``ranklock.search.pipeline.rules_of`` is replaced for the run), so
nothing stored changes and the runs differ only in the rule.  nDCG@10 per
query (trec_eval via pytrec_eval), paired randomization tests against the
first rules (bench/paired.py), on all queries and on a seeded held-out half
(the other half is the tuning half; no constant is tuned here, the split only
shows the effect holds on queries not looked at).  Also p50/p95 latency per
rule set, the rule sets interleaved query by query so load affects them alike.

    python bench/rules.py [--home /work/bench-home] [--datasets scifact,nfcorpus] [--out bench/out/rules.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytrec_eval

from paired import paired
from quality import DATA, MODES, ensure_ingested, load_qrels, load_queries

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import ranklock.search.pipeline as pipeline
from ranklock import Engine
from ranklock.snapshot.rules import RankingRules

ROOT = Path(__file__).resolve().parents[1]
RULES = {
    "bm25/1 rrf/1": RankingRules("bm25/1", "rrf/1"),
    "bm25/2 rrf/1": RankingRules("bm25/2", "rrf/1"),
    "bm25/1 rrf/2": RankingRules("bm25/1", "rrf/2"),
    "bm25/2 rrf/2": RankingRules("bm25/2", "rrf/2"),
}
BASE = "bm25/1 rrf/1"


def held_out(qids: list[str], seed: int = 22) -> set[str]:
    """A seeded half of the queries (the held-out half; the rest is the tuning half)."""
    rng = random.Random(seed)
    shuffled = sorted(qids)
    rng.shuffle(shuffled)
    return set(shuffled[: len(shuffled) // 2])


def run_all(eng: Engine, name: str, ds: Path) -> dict[str, Any]:
    queries, qrels = load_queries(ds), load_qrels(ds)
    qids = sorted(q for q in qrels if q in queries)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    half = held_out(qids)
    out: dict[str, Any] = {"queries": len(qids), "held_out": len(half), "modes": {}}
    for mode in MODES:
        runs: dict[str, dict[str, dict[str, float]]] = {r: {} for r in RULES}
        lat: dict[str, list[float]] = {r: [] for r in RULES}
        repeated = 0
        for qid in qids:
            words = queries[qid].lower().split()
            repeated += len(words) != len(set(words))
            for label, rules in RULES.items():
                pipeline.rules_of = lambda _m, rules=rules: rules  # type: ignore[assignment]
                t = time.perf_counter()
                res = eng.search(name, queries[qid], k=100, mode=mode, depth=100 if mode != "hybrid" else 40)
                lat[label].append((time.perf_counter() - t) * 1000)
                runs[label][qid] = {h.doc_id: float(1000 - h.rank) for h in res.hits}
        per = {label: {q: v["ndcg_cut_10"] for q, v in evaluator.evaluate(run).items()} for label, run in runs.items()}
        for label in RULES:
            for q in qids:
                per[label].setdefault(q, 0.0)
        m: dict[str, Any] = {"queries_with_a_repeated_word": repeated}
        for label in RULES:
            row: dict[str, Any] = {
                "ndcg@10": float(np.mean([per[label][q] for q in qids])),
                "ndcg@10_held_out": float(np.mean([per[label][q] for q in half])),
                "p50_ms": float(np.percentile(lat[label], 50)),
                "p95_ms": float(np.percentile(lat[label], 95)),
            }
            if label != BASE:
                row["vs_base"] = paired(per[BASE], per[label])
                row["vs_base_held_out"] = paired({q: per[BASE][q] for q in half}, {q: per[label][q] for q in half})
            m[label] = row
        out["modes"][mode] = m
        print(f"{name} {mode}: " + ", ".join(f"{lb} {m[lb]['ndcg@10']:.4f}" for lb in RULES), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--datasets", default="scifact,nfcorpus")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "rules.json"))
    args = ap.parse_args()
    eng = Engine(home=args.home, log_queries=False)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "loadavg_start": os.getloadavg(),
        "command": " ".join(["python", *sys.argv]),
        "datasets": {},
    }
    for name in args.datasets.split(","):
        ensure_ingested(eng, name, DATA / name)
        results["datasets"][name] = run_all(eng, name, DATA / name)
    results["loadavg_end"] = os.getloadavg()
    print(f"\n{'set':<9} {'mode':<9} {'rules':<13} {'nDCG@10':>8} {'held-out':>8} {'diff':>8} {'p':>6} {'p95 ms':>7}")
    for name, r in results["datasets"].items():
        for mode, m in r["modes"].items():
            for label in RULES:
                row = m[label]
                d = row.get("vs_base_held_out", {})
                diff = f"{d['diff']:+.4f}" if d else ""
                p = f"{d['p_randomization']:.3f}" if d else ""
                print(
                    f"{name:<9} {mode:<9} {label:<13} {row['ndcg@10']:8.4f} {row['ndcg@10_held_out']:8.4f} "
                    f"{diff:>8} {p:>6} {row['p95_ms']:7.1f}"
                )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    print(f"wrote {args.out} (load {results['loadavg_start']} -> {results['loadavg_end']})")


if __name__ == "__main__":
    main()
