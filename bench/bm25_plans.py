"""BM25 plans side by side on one collection: the plan each query takes, its latency, and exactness.

For every query of ``bench/scale.py``'s query set (Zipf 2-5 words, only the
most frequent words, long 10-20 word questions), the lexical branch runs
twice: as chosen (``bm25_plan`` in ``params``: full, dense, impact or
admitted) and with one plan turned off: ``--off dense`` (``DENSE_MAX_TERMS =
0``: what a snapshot without dense blocks runs) or, with ``--filter``, ``--off
admitted`` (the filter-first plan).  Both must return the same hits with the same
scores, bit for bit; the script counts any difference and prints p50 / p95
per query class.  Latency is only meaningful on a quiet machine (the load
average is printed at the start and end).

    python bench/bm25_plans.py --home /work/bench-home --collection scale1m --queries 200
    python bench/bm25_plans.py --collection scale1m --queries 100 --filter 'bucket < 100' --off admitted
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ranklock import Engine
from ranklock.search.bm25 import costs
from scale import query_set


def run(
    eng: Engine, coll: str, text: str, depth: int | None, filter: str | None = None, snapshot: int | None = None
) -> tuple[float, list[tuple[str, int, float]], str]:
    """Wall ms, (doc_id, chunk, lexical score) of each hit, and the plan taken."""
    t0 = time.perf_counter()
    kw: dict[str, Any] = {} if depth is None else {"depth": depth}
    if filter is not None:
        kw["filter"] = filter
    if snapshot is not None:
        kw["snapshot"] = snapshot
    res = eng.search(coll, text, k=10, mode="lexical", **kw)
    ms = (time.perf_counter() - t0) * 1000
    hits = [(h.doc_id, h.chunk, float(h.lexical_score or 0.0)) for h in res.hits]
    # The plan is a statement parameter (not a result one): ask the SQL twin, untimed.
    _, params = eng.search_sql(coll, text, k=10, mode="lexical", **kw)
    return ms, hits, str(params.get("bm25_plan"))


def pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    qs = statistics.quantiles(values, n=20, method="inclusive") if len(values) > 1 else [values[0]] * 19
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 1),
        "p95": round(qs[18], 1),
        "max": round(max(values), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--collection", default="scale1m")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--depth", type=int, default=None)
    ap.add_argument(
        "--no-compare", action="store_true", help="skip the dense-off run (latency of the chosen plans only)"
    )
    ap.add_argument("--filter", default=None, help="a hard constraint on every query, e.g. 'bucket < 100'")
    ap.add_argument(
        "--off",
        choices=("dense", "admitted"),
        default="dense",
        help="the plan turned off in the comparison run (admitted: the filter-first plan)",
    )
    ap.add_argument("--snapshot", type=int, default=None, help="search this snapshot (default: the active one)")
    ap.add_argument("--out", default=None, help="write the JSON report here")
    args = ap.parse_args()
    eng = Engine(home=args.home, log_queries=False)
    qs = query_set(args.queries)
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "loadavg_start": list(os.getloadavg())}
    for _, text in qs:  # warm-up
        run(eng, args.collection, text, args.depth, args.filter, args.snapshot)
    chosen: dict[str, list[float]] = {}
    off: dict[str, list[float]] = {}
    plans: dict[str, dict[str, int]] = {}
    diffs: list[str] = []
    knob, off_value = ("DENSE_MAX_TERMS", 0) if args.off == "dense" else ("CONSTRAINED_WAYS", ("set", "probe"))
    saved = getattr(costs, knob)
    for kind, text in qs:
        ms, hits, plan = run(eng, args.collection, text, args.depth, args.filter, args.snapshot)
        chosen.setdefault(kind, []).append(ms)
        chosen.setdefault("all", []).append(ms)
        chosen.setdefault(f"{kind}/{plan}", []).append(ms)
        plans.setdefault(kind, {}).setdefault(plan, 0)
        plans[kind][plan] += 1
        if not args.no_compare:
            setattr(costs, knob, off_value)
            try:
                ms2, hits2, _ = run(eng, args.collection, text, args.depth, args.filter, args.snapshot)
            finally:
                setattr(costs, knob, saved)
            off.setdefault(kind, []).append(ms2)
            off.setdefault("all", []).append(ms2)
            off.setdefault(f"{kind}/{plan}", []).append(ms2)
            if hits != hits2:
                diffs.append(text)
    report.update(
        {
            "plans": plans,
            "chosen_ms": {k: pct(v) for k, v in chosen.items()},
            f"{args.off}_off_ms": {k: pct(v) for k, v in off.items()},
            "different_results": len(diffs),
            "different_queries": diffs[:10],
            "loadavg_end": list(os.getloadavg()),
        }
    )
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
