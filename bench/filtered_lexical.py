"""Filtered search against unfiltered, interleaved: latency per filter and query class, and exactness.

For every query of ``bench/scale.py``'s query set (Zipf 2-5 words, only the
most frequent words, long 10-20 word questions), each case (no filter, then
each ``--filters`` entry) runs in turn, the order rotated from one query to
the next, so every case sees the same machine and the same page cache.  Each
query's cases run once unmeasured first.  ``--mode`` is lexical (default) or
hybrid.  Printed and written (``--out``): p50 / p95 per case and query class,
the ratio of each filter's p95 to the unfiltered one, the plans taken
(``bm25_plan``, ``bm25_admit``) and ``matching_count``.

``--check N``: for the first N queries of each case, the lexical hits (doc id,
chunk, score bit for bit) and ``matching_count`` are compared with the
exhaustive plan, every posting of the query's terms summed
(``FULL_SCAN_POSTINGS`` raised above any count): 0 differing answers is the
requirement.  Latency is only meaningful on a quiet machine (the load average
is recorded at the start and end).

    python bench/filtered_lexical.py --home /work/bench-home --collection large \\
        --filters 'bucket < 300,bucket < 600,bucket < 1000' --queries 200 --check 40
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
from large_corpus import GeneratedEmbedder
from ranklock import Engine
from ranklock.search.bm25 import costs
from scale import query_set


def search(eng: Engine, coll: str, text: str, mode: str, flt: str | None, snapshot: int | None) -> tuple[float, Any]:
    kw: dict[str, Any] = {"mode": mode, "k": 10}
    if flt:
        kw["filter"] = flt
    if snapshot is not None:
        kw["snapshot"] = snapshot
    t0 = time.perf_counter()
    res = eng.search(coll, text, **kw)
    return (time.perf_counter() - t0) * 1000, res


def lexical_answer(res: Any) -> tuple[Any, ...]:
    return (res.matching_count, tuple((h.doc_id, h.chunk, repr(h.lexical_score)) for h in res.hits))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--collection", default="large")
    ap.add_argument("--filters", default="bucket < 300,bucket < 600,bucket < 1000", help="comma-separated")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--mode", choices=("lexical", "hybrid"), default="lexical")
    ap.add_argument("--snapshot", type=int, default=None)
    ap.add_argument("--check", type=int, default=0, help="compare this many queries per case with the full sum")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    eng = Engine(home=args.home, embedder=None, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)  # the generated collections' vectors (bench/large_corpus.py)
    cases: list[str | None] = [None, *[f.strip() for f in args.filters.split(",") if f.strip()]]
    qs = query_set(args.queries)
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "loadavg_start": list(os.getloadavg())}
    for _, text in qs:  # warm-up
        for flt in cases:
            search(eng, args.collection, text, args.mode, flt, args.snapshot)
    times: dict[str, dict[str, list[float]]] = {str(c): {} for c in cases}
    plans: dict[str, dict[str, int]] = {str(c): {} for c in cases}
    matching: dict[str, int] = {}
    for i, (kind, text) in enumerate(qs):
        order = cases[i % len(cases) :] + cases[: i % len(cases)]
        for flt in order:
            ms, res = search(eng, args.collection, text, args.mode, flt, args.snapshot)
            key = str(flt)
            times[key].setdefault(kind, []).append(ms)
            times[key].setdefault("all", []).append(ms)
            # The plan is a statement parameter (not a result one): ask the SQL twin, untimed.
            _, params = eng.search_sql(args.collection, text, mode="lexical", k=10, **({"filter": flt} if flt else {}))
            plan = f"{params.get('bm25_plan')}/{params.get('bm25_admit') or '-'}"
            plans[key][plan] = plans[key].get(plan, 0) + 1
            matching[key] = int(res.matching_count)
    report["cases"] = {
        key: {kind: pct(v) for kind, v in by_kind.items()} | {"plans": plans[key], "matching_count": matching[key]}
        for key, by_kind in times.items()
    }
    base = report["cases"]["None"]["all"]["p95"]
    report["p95_ratio_to_unfiltered"] = {k: round(v["all"]["p95"] / base, 2) for k, v in report["cases"].items()}
    if args.check:
        differ: list[str] = []
        checked = 0
        saved = costs.FULL_SCAN_POSTINGS
        for _, text in qs[: args.check]:
            for flt in cases:
                _, fast = search(eng, args.collection, text, "lexical", flt, args.snapshot)
                costs.FULL_SCAN_POSTINGS = 10**12
                try:
                    _, full = search(eng, args.collection, text, "lexical", flt, args.snapshot)
                finally:
                    costs.FULL_SCAN_POSTINGS = saved
                checked += 1
                if lexical_answer(fast) != lexical_answer(full):
                    differ.append(f"{flt}: {text}")
        report["checked"] = checked
        report["different_answers"] = len(differ)
        report["different_queries"] = differ[:10]
    report["loadavg_end"] = list(os.getloadavg())
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
