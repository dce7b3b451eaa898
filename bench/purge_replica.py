"""What a purge costs with a replica attached, beside the same purge without one (issue 48).

A home of its own (a generated collection, one segment, HNSW; a few hundred searches logged),
then purges of one document each, in turn:

* ``no replica``: ``Engine.purge`` on the embedded server alone;
* ``replica``: the same after ``ranklock replica create r1`` (a streaming standby with
  ``hot_standby_feedback`` and its slot): the purge waits for the standby's feedback to pass its
  deletions (reloading the standby so it reports at once) and for its slot to confirm the WAL switch;
* ``replica, not reloaded``: the same purge without that reload (``PurgeContext.nudges`` empty), to show
  what the reload saves: the standby reports its position only every ``wal_receiver_status_interval``.

For each run: the wall time and its parts (``transaction``, ``erase``, of which ``wait``), whether the
check found nothing left, and the 1-minute load average before and after (the machine is shared: other
work runs beside it).  Prints a table and writes JSON.

    python bench/purge_replica.py --docs 5000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from large_corpus import GeneratedEmbedder, generate, queries
from ranklock import Engine
from ranklock.snapshot.purge import PurgeContext, purge_documents
from ranklock.store.server import EmbeddedServer
from ranklock.store.standby import LocalReplica

COLLECTION = "purgebench"


def _engine(home: Path, emb: GeneratedEmbedder) -> Engine:
    eng = Engine(home=home, log_queries=True, embed_service=False)
    eng.embedders.register(emb)
    return eng


def _purge(eng: Engine, doc_id: str, *, nudged: bool) -> dict[str, Any]:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    if nudged:
        out = eng.purge(COLLECTION, [doc_id])
    else:
        context = PurgeContext(key=eng._purge_key(), owned=True, wait=eng.settings.purge_wait, nudges={})
        out = purge_documents(
            eng.db, eng.collection(COLLECTION), [doc_id], lock_wait=eng.settings.lock_wait, context=context
        )
    wall = time.perf_counter() - t0
    return {
        "doc_id": doc_id,
        "wall_s": round(wall, 3),
        **{f"{k}_s": v for k, v in out.seconds.items()},
        "finished": out.finished,
        "checked": out.checked,
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3, help="purges of each kind")
    ap.add_argument("--logged", type=int, default=300, help="searches logged before the purges")
    ap.add_argument("--home", default=None, help="a folder for the home (default: a new temporary one, removed)")
    ap.add_argument("--out", default="bench/out/purge_replica.json")
    args = ap.parse_args()

    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="ranklock-purge-bench-"))
    emb = GeneratedEmbedder()
    docs = generate(args.docs)
    texts = queries(100)
    ids = iter(d.doc_id for d in docs[1::7])
    report: dict[str, Any] = {"docs": args.docs, "runs": {}}
    replica = LocalReplica(home, "r1")
    try:
        with _engine(home, emb) as eng:
            t0 = time.perf_counter()
            eng.ingest(COLLECTION, docs, create={"embedder": emb.id, "index": "hnsw"})
            report["ingest_s"] = round(time.perf_counter() - t0, 1)
            for i in range(args.logged):
                eng.search(COLLECTION, texts[i % len(texts)], k=10)
            report["runs"]["no replica"] = [_purge(eng, next(ids), nudged=True) for _ in range(args.runs)]
        replica.create()
        with _engine(home, emb) as eng:
            for i in range(args.logged):
                eng.search(COLLECTION, texts[i % len(texts)], k=10)
            report["runs"]["replica"] = [_purge(eng, next(ids), nudged=True) for _ in range(args.runs)]
            report["runs"]["replica, not reloaded"] = [_purge(eng, next(ids), nudged=False) for _ in range(args.runs)]
    finally:
        if replica.datadir.exists():
            replica.drop()
        EmbeddedServer(home).stop()
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)
    print(f"{args.docs} documents, one segment, HNSW; {args.runs} purges of one document each, side by side")
    print(f"{'':24} {'wall median':>12} {'wall max':>9} {'wait median':>12} {'finished':>9} {'load':>10}")
    for kind, runs in report["runs"].items():
        walls = [r["wall_s"] for r in runs]
        waits = [r.get("wait_s", 0.0) for r in runs]
        loads = [r["load_before"] for r in runs] + [r["load_after"] for r in runs]
        report.setdefault("summary", {})[kind] = {
            "wall_median_s": statistics.median(walls),
            "wall_max_s": max(walls),
            "wait_median_s": statistics.median(waits),
            "finished": sum(r["finished"] for r in runs),
            "load": [min(loads), max(loads)],
        }
        print(
            f"{kind:24} {statistics.median(walls):11.2f}s {max(walls):8.2f}s {statistics.median(waits):11.2f}s "
            f"{sum(r['finished'] for r in runs):>5}/{len(runs):<3} {min(loads):4.1f}-{max(loads):<4.1f}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
