"""Rebuild stability: do two builds of the same corpus answer the same?

Two collections built by ``bench/large_corpus.py`` from the same generated
corpus with the same settings (``--collection large`` and ``--collection
large2``) hold the same rows, but each HNSW build draws its own random graph.
For each query (``large_corpus.queries``) this runs the same search on both
and counts the queries whose top-10 document lists are identical (order
included), in semantic and hybrid mode, unfiltered and at 50 % and 10 %
filter selectivity; it also prints the manifest fields that differ.

    python bench/large_corpus.py --docs 200000 --collection large
    python bench/large_corpus.py --docs 200000 --collection large2
    python bench/rebuild.py --home /work/bench-home --a large --b large2 --queries 100
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from large_corpus import GeneratedEmbedder, queries
from ranklock import Engine
from ranklock.snapshot.manifest import diff_manifests

OUT = Path(__file__).resolve().parent / "out"
FILTERS: list[tuple[str, str | None]] = [("unfiltered", None), ("50%", "bucket < 5000"), ("10%", "bucket < 1000")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--a", default="large")
    ap.add_argument("--b", default="large2")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--out", default=str(OUT / "rebuild.json"))
    args = ap.parse_args()

    eng = Engine(home=args.home, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)
    ma, mb = eng.manifest(args.a), eng.manifest(args.b)
    differ = sorted(diff_manifests(ma, mb))
    texts = queries(args.queries)
    rows: list[dict[str, Any]] = []
    for mode in ("semantic", "hybrid"):
        for label, flt in FILTERS:
            same = 0
            strategies: set[str] = set()
            efs: set[Any] = set()
            for text in texts:
                ra = eng.search(args.a, text, k=10, mode=mode, filter=flt)
                rb = eng.search(args.b, text, k=10, mode=mode, filter=flt)
                same += [h.doc_id for h in ra.hits] == [h.doc_id for h in rb.hits]
                strategies.add(str(ra.params.get("vector_strategy")))
                efs.add(ra.params.get("ef_search"))
            row = {
                "mode": mode,
                "filter": label,
                "identical_top10": same,
                "queries": len(texts),
                "strategy": sorted(strategies),
                "ef_search": sorted(efs, key=str),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = ["| mode | filter | identical top-10 | strategy | ef_search |", "|---|---|---:|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['filter']} | {r['identical_top10']} / {r['queries']} | "
            f"{', '.join(r['strategy'])} | {', '.join(map(str, r['ef_search']))} |"
        )
    table = "\n".join(lines)
    print(table)
    print("manifest fields that differ:", ", ".join(differ))
    out = {
        "benchmark": "rebuild",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "command": " ".join(["python", *sys.argv]),
        "collections": [args.a, args.b],
        "manifest_differences": differ,
        "index_builds": [ma["index"].get("build"), mb["index"].get("build")],
        "results": rows,
        "table": table,
        "loadavg": list(os.getloadavg()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
