"""A big import into a large collection: latency right after it, against one segment, and the first filtered search.

On a collection built by ``bench/large_corpus.py`` (one segment), ``--import``
new generated documents (new ids, another seed) are ingested in one write, as
a support team importing a backlog would: the automatic merge policy runs as
it always does.  Then, interleaved query by query (``bench/scale.py``'s query
set, lexical, k 10), the snapshot before the import (one segment) and the one
after it are searched, and their p50 / p95 per query class compared: the cost
of the new segment to every search.  ``--merged ID`` adds a third snapshot
(the same documents merged into one segment, ``ranklock snapshot merge
--all``), the fair reference when it exists.

Also timed, once each, right after the write: the first search with a filter
on one typed field (which makes the new segment's value counts; before
per-segment counts it counted every chunk of the snapshot) and a second one.

    python bench/import_tail.py --home /work/bench-home --collection large --import 10000 --queries 200
    python bench/import_tail.py --home /work/bench-home --collection large --before 1 --after 5 --queries 200
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
from large_corpus import GeneratedEmbedder, generate
from ranklock import Document, Engine
from scale import query_set


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--collection", default="large")
    ap.add_argument("--import", dest="n_import", type=int, default=0, help="documents to import (0: none)")
    ap.add_argument("--before", type=int, default=None, help="snapshot before the import (default: the active one)")
    ap.add_argument("--after", type=int, default=None, help="snapshot after it (default: the import's)")
    ap.add_argument("--merged", type=int, default=None, help="the same documents merged into one segment")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--filter", default="bucket < 300", help="the filter of the first filtered searches")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    eng = Engine(home=args.home, embedder=None, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)  # the generated collections' vectors (bench/large_corpus.py)
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "loadavg_start": list(os.getloadavg())}
    before = args.before or eng.collection(args.collection).active_snapshot_id
    after = args.after
    if args.n_import:
        docs = [
            Document(f"imp{i:07d}", d.title, d.body, d.metadata)
            for i, d in enumerate(generate(args.n_import, seed=4242))
        ]
        t = time.perf_counter()
        rep = eng.ingest(args.collection, docs)
        report["import_seconds"] = round(time.perf_counter() - t, 1)
        report["import_snapshot"] = rep.snapshot_id
        report["merged_by_policy"] = rep.merged
        after = rep.merged or rep.snapshot_id
        for which in ("first", "second"):
            t = time.perf_counter()
            res = eng.search(args.collection, "kalo mine", k=10, mode="lexical", filter=args.filter, snapshot=after)
            report[f"{which}_filtered_search_ms"] = round((time.perf_counter() - t) * 1000, 1)
            report["matching_count"] = res.matching_count
    if after is None:
        raise SystemExit("--after or --import is needed")
    snaps = {"before": before, "after": after} | ({"merged": args.merged} if args.merged else {})
    report["snapshots"] = snaps
    report["segments"] = {
        k: [
            int(r["segment_id"])
            for r in eng.db.fetchall(
                "SELECT segment_id FROM ranklock.snapshot_segments WHERE snapshot_id = %s ORDER BY 1", [sid]
            )
        ]
        for k, sid in snaps.items()
    }
    qs = query_set(args.queries)
    for _, text in qs:  # warm-up
        for sid in snaps.values():
            eng.search(args.collection, text, k=10, mode="lexical", snapshot=sid)
    times: dict[str, dict[str, list[float]]] = {k: {} for k in snaps}
    names = list(snaps)
    for i, (kind, text) in enumerate(qs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            t = time.perf_counter()
            eng.search(args.collection, text, k=10, mode="lexical", snapshot=snaps[name])
            ms = (time.perf_counter() - t) * 1000
            times[name].setdefault(kind, []).append(ms)
            times[name].setdefault("all", []).append(ms)
    report["lexical_ms"] = {k: {kind: pct(v) for kind, v in by.items()} for k, by in times.items()}
    ref = "merged" if args.merged else "before"
    report["p95_ratio"] = round(
        report["lexical_ms"]["after"]["all"]["p95"] / report["lexical_ms"][ref]["all"]["p95"], 2
    )
    report["loadavg_end"] = list(os.getloadavg())
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
