"""Filtered vector search: recall@10, returned count and latency at five filter selectivities.

Side by side in one run, on the generated collection built by
``bench/large_corpus.py`` (``bucket`` uniform on 0..9999, so ``bucket < 5000``
keeps 50% of the documents and ``bucket < 1`` keeps 0.01%):

* ``pgvector``: plain pgvector defaults, the post-filter query
  ``SELECT doc_id ... WHERE filter ORDER BY embedding <=> q LIMIT 10`` with
  ``hnsw.ef_search = 40`` and ``hnsw.iterative_scan = off``;
* ``iterative``: the same query with pgvector's iterative scan alone
  (``strict_order``, ef_search 40, max_scan_tuples 20000);
* ``ranklock``: ``Engine.search(mode="semantic", filter=...)``: counted
  matching set, per-query strategy, exact fallback, ``complete`` flag.

Ground truth is exact: every vector of the snapshot is loaded once into
numpy (float64 cosine distances).  A returned document counts as a true top-10
hit when its exact distance is within 1e-6 of the 10th exact distance, so
floating-point near-ties at the boundary are not counted as misses.  The
collection must have one chunk per document (the generated corpus does).

    python bench/filtered.py --collection large --home /work/bench-home --queries 50
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from large_corpus import GeneratedEmbedder, queries
from ranklock import Engine
from ranklock.ingest.normalize import normalize
from ranklock.snapshot.build import chunk_table

SELECTIVITIES = [(0.5, 5000), (0.1, 1000), (0.01, 100), (0.001, 10), (0.0001, 1)]
K = 10
METHODS = ("pgvector", "iterative", "ranklock", "ranklock ef_search=400")
TIE_EPS = 1e-6


def load_vectors(eng: Engine, sid: int, cache: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """doc ids, buckets and unit vectors of every chunk, in row order (cached as .npz)."""
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        return [str(x) for x in z["ids"]], z["buckets"], z["vecs"]
    ids: list[str] = []
    buckets: list[int] = []
    rows: list[np.ndarray] = []
    with (
        eng.db.connection() as conn,
        conn.cursor() as cur,
        cur.copy(
            sql.SQL("COPY (SELECT doc_id, bucket, embedding FROM {} ORDER BY row_id) TO STDOUT (FORMAT BINARY)").format(
                chunk_table(sid)
            )
        ) as cp,
    ):
        cp.set_types(["text", "int8", "vector"])
        for doc_id, bucket, vec in cp.rows():
            ids.append(doc_id)
            buckets.append(bucket)
            rows.append(np.asarray(vec.to_numpy(), dtype=np.float32))
    vecs = np.vstack(rows)
    b = np.asarray(buckets, dtype=np.int64)
    np.savez(cache, ids=np.asarray(ids), buckets=b, vecs=vecs)
    return ids, b, vecs


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def recall(returned: list[str], dist_of: dict[str, float], kth: float, want: int) -> float:
    if want == 0:
        return 1.0
    good = sum(1 for d in returned if dist_of.get(d, 9.0) <= kth + TIE_EPS)
    return min(good, want) / want


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--collection", default="large")
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    args = ap.parse_args()

    eng = Engine(home=args.home, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)
    coll = eng.collection(args.collection)
    sid = int(coll.active_snapshot_id or 0)
    snap = eng.db.fetchone("SELECT doc_count, chunk_count, stats FROM ranklock.snapshots WHERE id = %s", [sid])
    assert snap is not None
    if int(snap["doc_count"]) != int(snap["chunk_count"]):
        raise SystemExit("this benchmark needs one chunk per document (a collection from bench/large_corpus.py)")
    t0 = time.perf_counter()
    ids, buckets, vecs = load_vectors(eng, sid, Path(f"/tmp/filtered-bench-{args.collection}-{sid}.npz"))
    print(f"{len(ids):,} vectors loaded in {time.perf_counter() - t0:.0f}s", flush=True)
    norms = np.linalg.norm(vecs.astype(np.float64), axis=1)
    table = chunk_table(sid)
    texts = queries(args.queries)
    qvecs = [eng._query_vector(coll, normalize(t)) for t in texts]

    post_filter = sql.SQL(
        "SELECT doc_id FROM {} WHERE bucket < %(n)s ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s"
    ).format(table)
    results: list[dict[str, Any]] = []
    plans: dict[str, str] = {}
    for frac, n in SELECTIVITIES:
        mask = buckets < n
        idx = np.nonzero(mask)[0]
        stats: dict[str, dict[str, list[float]]] = {m: {"recall": [], "returned": [], "ms": []} for m in METHODS}
        flags: dict[str, Any] = {"incomplete": 0, "fallback": 0, "strategies": {}, "truncation": {}}
        # One unmeasured warm-up search per selectivity (its first query builds ranklock's value counts).
        eng.search(args.collection, "warm up", k=K, mode="semantic", filter=f"bucket < {n}")
        for text, qv in zip(texts, qvecs, strict=True):
            q64 = qv.astype(np.float64)
            q64 /= np.linalg.norm(q64)
            # float32 screening of the filtered set, then float64 on the 500 nearest.
            d32 = (1.0 - vecs @ q64.astype(np.float32))[idx]
            m0 = min(len(d32), K * 50)
            near = np.argpartition(d32, m0 - 1)[:m0] if m0 < len(d32) else np.arange(len(d32))
            d = np.full(len(d32), 9.0)
            d[near] = 1.0 - (vecs[idx[near]].astype(np.float64) @ q64) / norms[idx[near]]
            # Rows are stored in doc_id order, so a stable sort breaks distance ties by doc_id.
            m = min(len(d), K * 50)
            part = np.argpartition(d, m - 1)[:m] if m < len(d) else np.arange(len(d))
            order = part[np.argsort(d[part], kind="stable")]
            want = min(K, len(idx))
            kth = float(d[order[want - 1]]) if want else 0.0
            cand_dist = {ids[idx[j]]: float(d[j]) for j in order}

            for method, settings in (
                ("pgvector", {"hnsw.ef_search": "40", "hnsw.iterative_scan": "off"}),
                (
                    "iterative",
                    {"hnsw.ef_search": "40", "hnsw.iterative_scan": "strict_order", "hnsw.max_scan_tuples": "20000"},
                ),
            ):
                with eng.db.connection() as conn, conn.transaction():
                    for key, val in settings.items():
                        conn.execute("SELECT set_config(%s, %s, true)", [key, val])
                    t = time.perf_counter()
                    got = [r[0] for r in conn.execute(post_filter, {"n": n, "q": qv, "k": K}).fetchall()]
                    stats[method]["ms"].append((time.perf_counter() - t) * 1000)
                    if method not in plans.get(str(n), ""):
                        plan = conn.execute(sql.SQL("EXPLAIN ") + post_filter, {"n": n, "q": qv, "k": K}).fetchall()
                        uses = "hnsw" if any("hnsw" in r[0] for r in plan) else "btree+sort"
                        plans[str(n)] = plans.get(str(n), "") + f"{method}:{uses} "
                stats[method]["returned"].append(len(got))
                stats[method]["recall"].append(recall(got, cand_dist, kth, want))
            t = time.perf_counter()
            res = eng.search(args.collection, text, k=K, mode="semantic", filter=f"bucket < {n}")
            stats["ranklock"]["ms"].append((time.perf_counter() - t) * 1000)
            got = [h.doc_id for h in res.hits]
            stats["ranklock"]["returned"].append(len(got))
            stats["ranklock"]["recall"].append(recall(got, cand_dist, kth, want))
            if not res.complete:
                flags["incomplete"] += 1
                flags["truncation"][res.truncation] = flags["truncation"].get(res.truncation, 0) + 1
            if res.params.get("vector_fallback"):
                flags["fallback"] += 1
            strat = str(res.params.get("vector_strategy"))
            flags["strategies"][strat] = flags["strategies"].get(strat, 0) + 1
            if res.matching_count != len(idx):
                raise SystemExit(f"matching_count {res.matching_count} != exact {len(idx)} for bucket < {n}")
            # The same search with a wider HNSW candidate list: what recall costs in latency.
            t = time.perf_counter()
            res = eng.search(args.collection, text, k=K, mode="semantic", filter=f"bucket < {n}", ef_search=400)
            stats["ranklock ef_search=400"]["ms"].append((time.perf_counter() - t) * 1000)
            got = [h.doc_id for h in res.hits]
            stats["ranklock ef_search=400"]["returned"].append(len(got))
            stats["ranklock ef_search=400"]["recall"].append(recall(got, cand_dist, kth, want))
        row: dict[str, Any] = {"selectivity": frac, "filter": f"bucket < {n}", "matching": len(idx)}
        for m, s in stats.items():
            row[m] = {
                "recall_at_10": statistics.fmean(s["recall"]),
                "returned_mean": statistics.fmean(s["returned"]),
                "p50_ms": pct(s["ms"], 50),
                "p95_ms": pct(s["ms"], 95),
            }
        row["ranklock"].update(flags)
        row["planner"] = plans.get(str(n), "").strip()
        results.append(row)
        print(json.dumps(row), flush=True)

    header = (
        "| selectivity | matching docs | method | recall@10 | returned (mean) | p50 ms | p95 ms | notes |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    lines = [header]
    for row in results:
        for m in METHODS:
            r = row[m]
            note = ""
            if m == "ranklock":
                note = (
                    f"strategy {', '.join(f'{k} x{v}' for k, v in sorted(r['strategies'].items()))}; "
                    f"flagged incomplete {r['incomplete']}"
                    + "".join(f" ({k} {v})" for k, v in sorted(r["truncation"].items()))
                    + f"; exact fallback {r['fallback']}"
                )
            elif m.startswith("ranklock"):
                note = "the same search with ef_search 400"
            else:
                note = "plan: " + next((p.split(":")[1] for p in row["planner"].split() if p.startswith(m)), "?")
            lines.append(
                f"| {row['selectivity'] * 100:g}% | {row['matching']:,} | {m} | {r['recall_at_10']:.3f} | "
                f"{r['returned_mean']:.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {note} |"
            )
    table_md = "\n".join(lines)
    print(table_md)
    out = {
        "benchmark": "filtered",
        "collection": args.collection,
        "snapshot_id": sid,
        "chunks": len(ids),
        "queries_per_selectivity": len(texts),
        "k": K,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": __import__("os").cpu_count()},
        "command": " ".join(["python", *sys.argv]),
        "results": results,
        "table": table_md,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"filtered-{args.collection}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
