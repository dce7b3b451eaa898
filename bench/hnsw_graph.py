"""HNSW graph quality: recall@10 of pgvector's own answer at each ef_search, on one or two builds.

For the first ``--queries`` of ``large_corpus.queries`` on collections built by
``bench/large_corpus.py``: the exact top 10 from numpy (all vectors loaded
once), then pgvector's answer to ``WHERE bucket < N ORDER BY embedding <=> q
LIMIT 10`` at each ``ef_search`` of ``--ef`` (iterative scan as given).
Prints recall@10, how many of the top-10 lists are exact, p50 / p95, and with
two collections how many top-10 lists the two builds share.  This is how the
HNSW build parameters were chosen (docs/benchmarks.md, issue 14): rebuild a
collection's index with other parameters and run it again.

    python bench/hnsw_graph.py --home /work/bench-home --collections large,large2 --ef 40,100,400,1000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from filtered import load_vectors, pct
from large_corpus import GeneratedEmbedder, queries
from ranklock import Engine
from ranklock.ingest.normalize import normalize
from ranklock.snapshot.build import chunk_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--collections", default="large", help="one, or two builds of one corpus: a,b")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--ef", default="40,100,400,1000", help="hnsw.ef_search values")
    ap.add_argument("--iterative", default="off", choices=["off", "strict_order", "relaxed_order"])
    ap.add_argument("--buckets", default="10000,1000", help="filters bucket < N (10000: none)")
    args = ap.parse_args()

    eng = Engine(home=args.home, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)
    names = args.collections.split(",")
    sids = {c: int(eng.collection(c).active_snapshot_id or 0) for c in names}
    ids, buckets, vecs = load_vectors(eng, sids[names[0]], Path(f"/tmp/hnsw-graph-{names[0]}-{sids[names[0]]}.npz"))
    info = eng.collection(names[0])
    qvecs = [eng._query_vector(info, normalize(t)) for t in queries(args.queries)]
    for n in (int(b) for b in args.buckets.split(",")):
        idx = np.nonzero(buckets < n)[0]
        truth = []
        for qv in qvecs:
            d = 1.0 - vecs[idx] @ qv.astype(np.float32)
            truth.append([ids[idx[j]] for j in np.argsort(d, kind="stable")[:10]])
        print(f"bucket < {n}: {len(idx):,} chunks match", flush=True)
        for ef in (int(e) for e in args.ef.split(",")):
            tops: dict[str, list[list[str]]] = {}
            for c in names:
                q = sql.SQL(
                    "SELECT doc_id FROM {t} WHERE bucket < %(n)s ORDER BY embedding <=> %(q)s::vector LIMIT 10"
                ).format(t=chunk_table(sids[c]))
                ms: list[float] = []
                rec: list[float] = []
                got: list[list[str]] = []
                for qv, tr in zip(qvecs, truth, strict=True):
                    with eng.db.connection() as conn, conn.transaction():
                        conn.execute(
                            "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true), "
                            "set_config('jit', 'off', true)",
                            [str(ef), args.iterative],
                        )
                        t0 = time.perf_counter()
                        r = [x[0] for x in conn.execute(q, {"q": qv, "n": n}).fetchall()]
                        ms.append((time.perf_counter() - t0) * 1000)
                    rec.append(len(set(r) & set(tr)) / 10)
                    got.append(r)
                tops[c] = got
                exact = sum(1 for g, tr in zip(got, truth, strict=True) if g == tr)
                print(
                    f"  {c} ef_search {ef}: recall@10 {statistics.fmean(rec):.4f}, exact lists {exact}/{len(truth)}, "
                    f"p50 {pct(ms, 50):.1f} ms, p95 {pct(ms, 95):.1f} ms",
                    flush=True,
                )
            if len(names) == 2:
                same = sum(1 for a, b in zip(tops[names[0]], tops[names[1]], strict=True) if a == b)
                print(f"  identical top-10 across the two builds: {same}/{len(truth)}", flush=True)


if __name__ == "__main__":
    main()
