"""The BM25 plans under a hard constraint, side by side at each selectivity: what each costs, and where they cross.

At each ``--selectivities`` share of the chunks (a ``bucket < N`` filter on a
``bench/large_corpus.py`` collection, ``bucket`` uniform on 0..9999), every
query of ``bench/scale.py``'s set runs lexically under each variant in turn:

* ``admitted``: every admitted chunk holding a query term scored exactly
  (the admitted plan, forced);
* ``set``: the impact or dense plan, its candidates looked up in the
  admitted set listed once (``bm25_admit = set``);
* ``probe``: the same plans, each candidate's filter row probed;
* ``chosen``: what ranklock picks by itself.

The hits and scores of every variant must be the same (bit for bit), and the
script counts any difference.  Printed and written (``--out``): p50 / p95 per
selectivity and variant; the defaults that pick between them
(``ranklock.search.bm25.admission``) are read off these crossings.
Above ``--admitted-max`` the admitted variant is skipped (it scores every
admitted chunk: seconds at 30 % of a million), and below ``--probe-min`` the
probing one (its seeds probe about 1 / s rows each).  Only meaningful on a quiet
machine; the load average is recorded.

    python bench/filtered_plans.py --home /work/bench-home --collection large --queries 40
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bm25_plans import pct
from ranklock import Engine
from ranklock.search.bm25 import costs
from scale import query_set

#: Each variant's knobs (module attributes of ranklock.search.bm25.costs) and search keywords.
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "admitted": ({"CONSTRAINED_WAYS": ("admitted",)}, {}),
    "set": ({"CONSTRAINED_WAYS": ("set",)}, {}),
    "probe": ({"CONSTRAINED_WAYS": ("probe",)}, {}),
    "chosen": ({}, {}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--collection", default="large")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--selectivities", default="0.1,0.3,1,3,6,10,20,30", help="percent of the chunks, comma-separated")
    ap.add_argument("--admitted-max", type=float, default=3.0, help="percent above which the admitted plan is skipped")
    ap.add_argument("--probe-min", type=float, default=1.0, help="percent below which the probing plan is skipped")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    eng = Engine(home=args.home, embedder=None, log_queries=False)
    qs = query_set(args.queries)
    saved = {k: getattr(costs, k) for knobs, _ in VARIANTS.values() for k in knobs}
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "loadavg_start": list(os.getloadavg())}
    rows: dict[str, Any] = {}
    differ = 0
    for pct_s in (float(x) for x in args.selectivities.split(",")):
        flt = f"bucket < {round(pct_s * 100)}"
        names = [
            v
            for v in VARIANTS
            if (v != "admitted" or pct_s <= args.admitted_max) and (v != "probe" or pct_s >= args.probe_min)
        ]
        times: dict[str, list[float]] = {v: [] for v in names}
        for rnd in range(2):  # an unmeasured pass first: every variant reads warm pages
            for i, (_, text) in enumerate(qs):
                got: dict[str, Any] = {}
                for v in names[i % len(names) :] + names[: i % len(names)]:
                    knobs, kw = VARIANTS[v]
                    for k, x in saved.items():
                        setattr(costs, k, knobs.get(k, x))
                    try:
                        t = time.perf_counter()
                        res = eng.search(args.collection, text, k=10, mode="lexical", filter=flt, **kw)
                        ms = (time.perf_counter() - t) * 1000
                    finally:
                        for k, x in saved.items():
                            setattr(costs, k, x)
                    got[v] = [(h.doc_id, h.chunk, repr(h.lexical_score)) for h in res.hits]
                    if rnd:
                        times[v].append(ms)
                if rnd:
                    differ += sum(g != got[names[0]] for g in got.values())
        rows[flt] = {v: pct(t) for v, t in times.items()}
        print(flt, json.dumps({v: (r["p50"], r["p95"]) for v, r in rows[flt].items()}), flush=True)
    report.update({"by_filter": rows, "different_answers": differ, "loadavg_end": list(os.getloadavg())})
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
