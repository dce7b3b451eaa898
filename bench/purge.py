"""What a purge costs on a large collection, and whether searches keep running meanwhile.

Runs on a collection made by ``bench/large_corpus.py`` (one segment of N chunks).  Two
threads search it without a pause (one lexical, one hybrid) while, in turn:

* ``purge``: ``Engine.purge`` of one document (copy and swap of the segment's tables in the
  purge's transaction, then the shared tables, pg_statistic and the WAL: ranklock.snapshot.purge);
* ``vacuum-full`` (the alternative it was measured against): ``VACUUM FULL`` of the segment's
  chunk table, which rebuilds the same indexes under an ACCESS EXCLUSIVE lock.

For each it prints the wall time and the searches' latencies while it ran (count, median,
slowest), and writes JSON.  A purge changes the collection: each run erases another document.

    python bench/large_corpus.py --docs 100000 --collection large100k --home /work/bench-home
    python bench/purge.py --home /work/bench-home --collection large100k --runs purge,vacuum-full
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from psycopg import sql

from large_corpus import GeneratedEmbedder, queries
from ranklock import Engine


class Searching:
    """Threads that search without a pause and record (start, seconds) of each search."""

    def __init__(self, eng: Engine, collection: str, texts: list[str]) -> None:
        self.eng, self.collection, self.texts = eng, collection, texts
        self.times: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(m,), daemon=True) for m in ("lexical", "hybrid")]

    def _loop(self, mode: str) -> None:
        i = 0
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self.eng.search(self.collection, self.texts[i % len(self.texts)], k=10, mode=mode)
            except Exception as exc:  # a benchmark reports every failure instead of stopping
                self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            self.times.append((t0, time.monotonic() - t0))
            i += 1

    def __enter__(self) -> Searching:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def during(self, start: float, end: float) -> dict[str, Any]:
        """Searches that started or ended while [start, end] ran."""
        runs = [(t0, d) for t0, d in self.times if t0 <= end and t0 + d >= start]
        took = [d for _, d in runs]
        return {
            "searches": len(took),
            "median_ms": round(statistics.median(took) * 1000, 1) if took else None,
            "p99_ms": round(sorted(took)[int(0.99 * (len(took) - 1))] * 1000, 1) if took else None,
            "slowest_ms": round(max(took) * 1000, 1) if took else None,
            # When the five slowest began, in seconds from the start of the run, and how long they took.
            "slowest_at_s": [(round(t0 - start, 1), round(d, 2)) for t0, d in sorted(runs, key=lambda r: -r[1])[:5]],
            "errors": len(self.errors),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--collection", default="large100k")
    ap.add_argument("--runs", default="purge,vacuum-full")
    ap.add_argument("--logged", type=int, default=500, help="searches logged before (the query log to rewrite)")
    ap.add_argument("--out", default="bench/results/purge.json")
    args = ap.parse_args()

    emb = GeneratedEmbedder()
    eng = Engine(home=args.home, log_queries=True)
    eng.embedders.register(emb)
    coll = eng.collection(args.collection)
    texts = queries(200)
    for i in range(args.logged):
        eng.search(args.collection, texts[i % len(texts)], k=10)
    ids = [
        r["doc_id"]
        for r in eng.db.fetchall(
            "SELECT doc_id FROM ranklock.segment_documents WHERE segment_id = %s ORDER BY doc_id LIMIT 20",
            [coll.active_snapshot_id],
        )
    ]
    sizes = eng.db.fetchone(
        "SELECT pg_total_relation_size('ranklock.query_log') AS query_log, "
        "pg_total_relation_size('ranklock.documents') AS documents, "
        "pg_total_relation_size('ranklock.embedding_cache') AS embedding_cache"
    )
    report: dict[str, Any] = {
        "collection": args.collection,
        "chunks": coll_chunks(eng, args.collection),
        "sizes": sizes,
    }
    with Searching(eng, args.collection, texts) as s:
        time.sleep(5)
        report["before"] = s.during(time.monotonic() - 5, time.monotonic())
        for n, run in enumerate(args.runs.split(",")):
            t0 = time.monotonic()
            if run == "purge":
                out = eng.purge(args.collection, [ids[n]])
                extra: dict[str, Any] = {"seconds": out.seconds, "rewritten": len(out.rewritten)}
            elif run == "vacuum-full":
                # The segment's id is the first snapshot's; a purge keeps the name (copy and swap).
                segs = eng.db.fetchall(
                    "SELECT segment_id FROM ranklock.snapshot_segments WHERE snapshot_id = %s",
                    [eng.collection(args.collection).active_snapshot_id],
                )
                table = sql.Identifier("ranklock_data", f"chunks_{segs[0]['segment_id']}")
                with eng.db.connection() as conn:
                    conn.execute("SET maintenance_work_mem = '3GB'")
                    conn.execute(sql.SQL("VACUUM FULL {}").format(table))
                    conn.execute("RESET maintenance_work_mem")
                extra = {}
            else:
                raise SystemExit(f"unknown run {run!r}; known: purge, vacuum-full")
            t1 = time.monotonic()
            report[run] = {"wall_s": round(t1 - t0, 1), **extra, "during": s.during(t0, t1)}
            print(run, json.dumps(report[run]), flush=True)
            time.sleep(3)
    report["errors"] = s.errors[:5]
    print(json.dumps(report, indent=1, default=str))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, default=str) + "\n")
    eng.close()


def coll_chunks(eng: Engine, name: str) -> int:
    row = eng.db.fetchone(
        "SELECT chunk_count FROM ranklock.snapshots WHERE id = %s", [eng.collection(name).active_snapshot_id]
    )
    return int(row["chunk_count"]) if row else 0


if __name__ == "__main__":
    main()
