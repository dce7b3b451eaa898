"""What a search's size costs: one hybrid search at a time over k x depth and filter sizes (issue 27).

The figures behind RANKLOCK_MAX_COST (k x depth of one served search) and
RANKLOCK_MAX_FILTER_SIZE: the median of ``--queries`` Zipf-drawn queries per
size, on a collection built by ``bench/large_corpus.py`` (default ``adv100k``),
in one run so the sizes share the machine.  Prints a table and writes
bench/out/cost_cap.json with the load average.

    python bench/cost_cap.py --home /work/bench27/home --collection adv100k
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

from large_corpus import GeneratedEmbedder, queries
from ranklock import Engine

OUT = Path(__file__).resolve().parent / "out"
SIZES = [(10, 40), (100, 100), (250, 250), (500, 500), (1000, 1000), (10000, 10000)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench27/home")
    ap.add_argument("--collection", default="adv100k")
    ap.add_argument("--queries", type=int, default=10)
    args = ap.parse_args()
    load_start = os.getloadavg()
    eng = Engine(home=args.home, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)  # register under its id so the collection resolves it
    qs = queries(args.queries)
    rows: list[dict[str, Any]] = []

    def timed(label: str, **kwargs: Any) -> None:
        ms = []
        for q in qs:
            t = time.perf_counter()
            eng.search(args.collection, q, **kwargs)
            ms.append((time.perf_counter() - t) * 1000)
        rows.append({"case": label, "median_ms": statistics.median(ms), "max_ms": max(ms)})
        print(f"{label:<40} {statistics.median(ms):>9.1f} {max(ms):>9.1f}", flush=True)

    print(f"{'case':<40} {'median ms':>9} {'max ms':>9}")
    for q in qs:  # the query vectors into the embedding cache, unmeasured
        eng.search(args.collection, q, k=10)
    for k, depth in SIZES:
        timed(f"k {k}, depth {depth} (k x depth {k * depth:,})", k=k, depth=depth)
    ors = " or ".join(f"bucket = {i}" for i in range(300))
    listed = "bucket in (" + ", ".join(str(i) for i in range(1500)) + ")"
    for label, f in (("filter: a range", "bucket < 5000"), ("filter: 300 ors", ors), ("filter: in 1,500", listed)):
        timed(f"{label} ({len(f):,} characters)", k=10, filter=f)
    eng.close()
    out = {"rows": rows, "load_average": {"start": load_start, "end": os.getloadavg()}, "cpus": os.cpu_count()}
    OUT.mkdir(exist_ok=True)
    (OUT / "cost_cap.json").write_text(json.dumps(out, indent=2))
    print(f"load average: start {load_start}, end {out['load_average']['end']}; wrote {OUT / 'cost_cap.json'}")


if __name__ == "__main__":
    main()
