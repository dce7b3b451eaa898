"""Read replicas benchmark (issue 13): throughput and latency with 0, 1 and 2 local streaming replicas.

On SciFact (5,183 abstracts, /work/shared/data/scifact) in a fresh home of its
own: the embedded primary, two local hot standbys made by ``LocalReplica``
(``pg_basebackup -R``, as ``ranklock replica create`` does), HNSW collection.

* throughput (queries/s) and p50/p95 latency of hybrid ``Engine.search`` with
  0, 1 and 2 replicas at 1, 4 and 16 concurrent clients (threads of one
  process; the query log on, as in production);
* activation-to-replica lag: from ``activate`` returning on the primary to the
  new snapshot being the active one on each replica;
* storage: bytes per chunk of a snapshot's tables (pg_total_relation_size) and
  the ingest time, for the cost model in docs/scaling.md.

The vectors come from a deterministic 384-dimensional hash embedder (the
width of all-MiniLM-L6-v2, no model): the HNSW graph, the rows and the SQL
are real-sized, the semantics are not, which does not matter for throughput.
All three servers and the clients share this machine's cores, so the figures
show routing overhead and correctness under load, not scale-out (see
docs/scaling.md for the extrapolation).

    python bench/replicas.py                       # fresh home in /tmp, removed afterwards
    python bench/replicas.py --seconds 5 --keep    # longer cells, keep the servers
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from psycopg import sql

from ranklock import Engine
from ranklock.ingest.loaders import Document, load_corpus
from ranklock.snapshot.build import chunk_table
from ranklock.store.server import EmbeddedServer
from ranklock.store.standby import LocalReplica

DATA = Path("/work/shared/data/scifact")
OUT = Path(__file__).resolve().parent / "out" / "replicas.json"


class _SpaceTok:
    id = "space"

    def offsets(self, text: str) -> list[tuple[int, int]]:
        out, start = [], None
        for i, ch in enumerate(text + " "):
            if ch.isspace():
                if start is not None:
                    out.append((start, i))
                    start = None
            elif start is None:
                start = i
        return out


class Hash384:
    """Deterministic unit vectors of all-MiniLM-L6-v2's width from each text's sha256 (no model)."""

    id = "bench:hash-384"
    dim = 384
    tokenizer = _SpaceTok()
    sha256 = hashlib.sha256(b"bench:hash-384").hexdigest()

    def embed(self, texts: Any) -> np.ndarray:
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32)


def _queries(n: int) -> list[str]:
    out = []
    with open(DATA / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line)["text"])
            if len(out) == n:
                break
    return out


def _cell(eng: Engine, queries: list[str], clients: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    served: dict[str, int] = {}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        j = i
        while time.monotonic() < stop:
            t = time.perf_counter()
            res = eng.search("scifact", queries[j % len(queries)], k=10)
            dt = (time.perf_counter() - t) * 1000
            with lock:
                lat.append(dt)
                served[res.served_by] = served.get(res.served_by, 0) + 1
            j += clients

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    lat.sort()
    return {
        "clients": clients,
        "queries": len(lat),
        "qps": round(len(lat) / wall, 1),
        "p50_ms": round(statistics.median(lat), 1),
        "p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 1),
        "served_by": served,
    }


def _activation_lag(eng: Engine, replicas: list[LocalReplica], rounds: int) -> list[dict[str, float]]:
    import psycopg

    out = []
    conns = [psycopg.connect(r.dsn, autocommit=True) for r in replicas]
    try:
        for i in range(rounds):
            # A small collection of its own: each round builds a snapshot, and only the activation is timed.
            doc = Document(f"lag{i:03d}", f"lag probe {i}", f"activation lag probe number {i}", {}, {})
            rep = eng.ingest("lagprobe", [doc], activate=False, create={"embedder": "bench:hash-384"})
            t0 = time.perf_counter()
            eng.activate("lagprobe", rep.snapshot_id)
            t_act = time.perf_counter()
            row: dict[str, float] = {"activate_ms": (t_act - t0) * 1000}
            for r, conn in zip(replicas, conns, strict=True):
                while True:
                    got = conn.execute(
                        "SELECT active_snapshot_id FROM ranklock.collections WHERE name = 'lagprobe'"
                    ).fetchone()
                    if got is not None and got[0] == rep.snapshot_id:
                        break
                    time.sleep(0.0005)
                row[r.name] = round((time.perf_counter() - t_act) * 1000, 2)
            out.append(row)
    finally:
        for c in conns:
            c.close()
    return out


def _storage(eng: Engine) -> dict[str, Any]:
    coll = eng.collection("scifact")
    sid = int(coll.active_snapshot_id or 0)
    snap = eng.db.fetchone("SELECT chunk_count, doc_count FROM ranklock.snapshots WHERE id = %s", [sid])
    assert snap is not None
    total = eng.db.fetchone("SELECT pg_total_relation_size(%s::regclass) AS b", [chunk_table(sid).as_string(None)])
    heap = eng.db.fetchone("SELECT pg_relation_size(%s::regclass) AS b", [chunk_table(sid).as_string(None)])
    others = eng.db.fetchall(
        sql.SQL(
            "SELECT c.relname, pg_total_relation_size(c.oid) AS b FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'ranklock_data' AND c.relkind = 'r' AND c.relname LIKE %s"
        ),
        [f"%\\_{sid}"],
    )
    assert total is not None and heap is not None
    per_snapshot = sum(int(r["b"]) for r in others)
    return {
        "snapshot_id": sid,
        "chunks": snap["chunk_count"],
        "documents": snap["doc_count"],
        "chunk_table_heap_bytes": int(heap["b"]),
        "chunk_table_total_bytes": int(total["b"]),
        "snapshot_tables": {r["relname"]: int(r["b"]) for r in others},
        "snapshot_total_bytes": per_snapshot,
        "bytes_per_chunk": round(per_snapshot / max(1, int(snap["chunk_count"]))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=None, help="ranklock home (default: a fresh temporary one)")
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds per (replicas, clients) cell")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the home and its servers")
    args = ap.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="ranklock-bench-replicas-"))
    load_start = os.getloadavg()
    emb = Hash384()
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_start": load_start},
        "corpus": "scifact",
        "embedder": "deterministic hash, 384 dims (no model)",
        "index": "hnsw (m=16, ef_construction=64), exact_threshold=0",
        "seconds_per_cell": args.seconds,
    }
    replicas = [LocalReplica(home, "r1"), LocalReplica(home, "r2")]
    try:
        with Engine(home=home, embedder=emb, log_queries=True) as eng:
            t = time.perf_counter()
            docs = load_corpus(DATA / "corpus.jsonl")
            rep = eng.ingest(
                "scifact",
                docs,
                create={"embedder": emb.id, "index": "hnsw", "search_defaults": {"exact_threshold": 0}},
            )
            report["ingest"] = {"seconds": round(time.perf_counter() - t, 2), "chunks": rep.chunks, **rep.seconds}
            report["storage"] = _storage(eng)
        report["replica_create_seconds"] = {}
        for r in replicas:
            t = time.perf_counter()
            r.create()
            report["replica_create_seconds"][r.name] = round(time.perf_counter() - t, 2)
        primary = EmbeddedServer(home).uri()
        queries = _queries(args.queries)
        cells = []
        for n in (0, 1, 2):
            with Engine(dsn=primary, embedder=emb, read_dsns=[r.dsn for r in replicas[:n]]) as eng:
                for q in queries:  # warm the embedding cache and every node's buffers
                    eng.search("scifact", q, k=10)
                for clients in (1, 4, 16):
                    cell = {"replicas": n, **_cell(eng, queries, clients, args.seconds)}
                    print(json.dumps(cell), flush=True)
                    cells.append(cell)
        report["cells"] = cells
        with Engine(dsn=primary, embedder=emb) as eng:
            lag = _activation_lag(eng, replicas, rounds=10)
        report["activation_lag_ms"] = {
            "rounds": lag,
            **{
                r.name: {
                    "median": round(statistics.median(x[r.name] for x in lag), 2),
                    "max": round(max(x[r.name] for x in lag), 2),
                }
                for r in replicas
            },
        }
    finally:
        report["machine"]["loadavg_end"] = os.getloadavg()
        if not args.keep:
            for r in replicas:
                if r.datadir.exists():
                    r.drop()
            EmbeddedServer(home).stop()
            if args.home is None:
                shutil.rmtree(home, ignore_errors=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print("\n| replicas | clients | queries/s | p50 ms | p95 ms | served by |")
    print("|---:|---:|---:|---:|---:|---|")
    for c in report["cells"]:
        by = ", ".join(f"{k} {v}" for k, v in sorted(c["served_by"].items()))
        print(f"| {c['replicas']} | {c['clients']} | {c['qps']} | {c['p50_ms']} | {c['p95_ms']} | {by} |")
    print(
        f"\nactivation-to-replica lag (ms): {json.dumps({k: v for k, v in report['activation_lag_ms'].items() if k != 'rounds'})}"
    )
    print(f"storage: {json.dumps({k: v for k, v in report['storage'].items() if k != 'snapshot_tables'})}")
    print(f"load average start {load_start}, end {report['machine']['loadavg_end']}; wrote {OUT}")


if __name__ == "__main__":
    main()
