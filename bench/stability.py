"""Retrieval Stability Index: ranklock over repeated concurrent runs vs plain pgvector HNSW over index rebuilds.

In one command:

1. **ranklock**: every test query of each BEIR collection is searched ``--runs``
   times (default 20) on ``--concurrency`` threads (default 4) through
   ``Engine.search`` (hybrid, k = 10, result cache off), and the RSI (mean
   pairwise top-10 Jaccard), RBO and byte-identical share are measured.
2. **plain pgvector**: the same snapshot's chunk vectors are copied into a
   scratch table; an HNSW index (m = 16, ef_construction = 64, cosine, pgvector
   defaults otherwise, ef_search = 40) is built, every query's top-10 rows are
   taken with ``ORDER BY embedding <=> q LIMIT 10``, the index is dropped and
   rebuilt, and the queries run again.  RSI between the two builds, and the
   share of queries whose top-10 changed.  The exact top-10 (no index) gives
   each build's recall, to show the index is approximate.
3. The same rebuild test on a ``--large-sample`` row sample (default 50,000) of
   the generated ``large`` collection, queried with vectors of rows outside the
   sample.

Prints a table and writes bench/out/stability.json.  Scratch tables live in the
schema ``ranklock_bench`` and are dropped at the end.

    RANKLOCK_HOME=/work/bench-home python bench/stability.py [--runs 20 --concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ranklock import Engine
from ranklock.eval.golden import load_queries
from ranklock.eval.stability import compare_configurations, measure_stability, stability_of_runs
from ranklock.ingest.normalize import normalize
from ranklock.snapshot.build import chunk_table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SCHEMA = "ranklock_bench"
K = 10
EF_SEARCH = 40


def _exec(eng: Engine, query: sql.Composed | sql.SQL, params: Any = None) -> None:
    with eng.db.connection() as conn:
        conn.execute(query, params)


def _topk(eng: Engine, table: sql.Identifier, vectors: list[np.ndarray], *, exact: bool) -> list[list[str]]:
    """Top-K row ids per query vector, through the HNSW index or by an exact scan."""
    q = sql.SQL("SELECT row_id FROM {} ORDER BY embedding <=> %s::vector LIMIT %s").format(table)
    out: list[list[str]] = []
    from pgvector import Vector

    with eng.db.connection() as conn, conn.transaction():
        if exact:
            # No index scan at all: the true top-K by cosine distance (ties by heap order
            # do not matter at float precision for these vectors).
            conn.execute("SET LOCAL enable_indexscan = off")
        else:
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(EF_SEARCH)])
        for v in vectors:
            out.append([str(r[0]) for r in conn.execute(q, [Vector(v), K]).fetchall()])
    return out


def _build(eng: Engine, table: sql.Identifier, name: str) -> float:
    t = time.perf_counter()
    _exec(eng, sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(SCHEMA, name)))
    with eng.db.connection() as conn, conn.transaction():
        # Enough memory that the graph is built in memory, as pgvector recommends.
        conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
        conn.execute(
            sql.SQL(
                "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            ).format(sql.Identifier(name), table)
        )
    return time.perf_counter() - t


def _recall(approx: list[list[str]], exact: list[list[str]]) -> float:
    return float(np.mean([len(set(a) & set(e)) / max(len(e), 1) for a, e in zip(approx, exact, strict=True)]))


def rebuild_test(eng: Engine, source_sql: sql.Composable, label: str, vectors: list[np.ndarray]) -> dict[str, Any]:
    """Copy vectors into a scratch table, build HNSW twice, compare the two top-K answers."""
    table = sql.Identifier(SCHEMA, f"vec_{label}")
    _exec(eng, sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    _exec(eng, sql.SQL("CREATE TABLE {} AS {}").format(table, source_sql))
    _exec(eng, sql.SQL("ANALYZE {}").format(table))
    with eng.db.connection() as conn:
        rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    n = int(rows[0]) if rows else 0
    exact = _topk(eng, table, vectors, exact=True)
    runs, builds = [], []
    for b in range(2):
        builds.append(round(_build(eng, table, f"hnsw_{label}"), 1))
        runs.append(_topk(eng, table, vectors, exact=False))
        print(
            f"  {label}: build {b + 1} in {builds[-1]}s, recall@{K} vs exact {_recall(runs[-1], exact):.4f}",
            file=sys.stderr,
        )
    _exec(eng, sql.SQL("DROP TABLE {}").format(table))
    as_runs = [{str(i): r for i, r in enumerate(run)} for run in runs]
    st = stability_of_runs(as_runs, k=K)
    changed_set = sum(1 for v in st["per_query"].values() if v["jaccard"] < 1.0)
    return {
        "rows": n,
        "queries": len(vectors),
        "index": {"type": "hnsw", "m": 16, "ef_construction": 64, "ef_search": EF_SEARCH, "ops": "vector_cosine_ops"},
        "build_seconds": builds,
        "recall_vs_exact": [round(_recall(r, exact), 4) for r in runs],
        "rsi": st["rsi"],
        "rbo": st["rbo"],
        "identical_share": st["identical_share"],
        "changed_top10_share": 1.0 - st["identical_share"],
        "changed_top10_set_share": changed_set / max(len(vectors), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=None)
    ap.add_argument("--collections", default="scifact,nfcorpus")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--large", default="large", help="generated collection for the big rebuild test ('' skips)")
    ap.add_argument("--large-sample", type=int, default=50_000)
    ap.add_argument("--large-queries", type=int, default=300)
    ap.add_argument("--random", type=int, default=50_000, help="rows of random unit vectors for a hard case (0 skips)")
    ap.add_argument("--skip-ranklock", action="store_true")
    ap.add_argument("--variants", default="default,hnsw", help="ranklock variants: default, hnsw")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "stability.json"))
    args = ap.parse_args()
    result: dict[str, Any] = {
        "bench": "stability",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "k": K,
        "runs": args.runs,
        "concurrency": args.concurrency,
        "collections": {},
    }
    with Engine(home=args.home, log_queries=False) as eng:
        _exec(eng, sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
        pg = eng.db.fetchone(
            "SELECT current_setting('server_version') AS pg, "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector, "
            "current_setting('max_parallel_maintenance_workers') AS workers"
        )
        result["postgres"] = pg
        for name in [c.strip() for c in args.collections.split(",") if c.strip()]:
            queries = load_queries(DATA / name)
            entry: dict[str, Any] = {"queries": len(queries)}
            coll = eng.collection(name)
            sid = coll.active_snapshot_id
            if sid is None:
                raise SystemExit(f"collection {name!r} has no active snapshot yet; wait for its ingest to finish")
            if not args.skip_ranklock:
                # "default": the engine's own choice (an exact vector scan when the collection has at
                # most exact_threshold chunks); "hnsw": exact_threshold=0 forces the HNSW index path.
                variants = {"default": {}, "hnsw": {"exact_threshold": 0}}
                for vname in [v.strip() for v in args.variants.split(",") if v.strip()]:
                    t = time.perf_counter()
                    rep = measure_stability(
                        eng,
                        name,
                        queries,
                        runs=args.runs,
                        concurrency=args.concurrency,
                        k=K,
                        mode="hybrid",
                        params=variants[vname],
                    )
                    d = rep.to_dict()
                    d["unstable"] = d["unstable"][:20]
                    entry[f"ranklock_{vname}"] = d
                    print(
                        f"  {name}: ranklock {vname} {args.runs} runs in {time.perf_counter() - t:.0f}s, "
                        f"RSI {rep.rsi:.4f}",
                        file=sys.stderr,
                    )
                cfg = compare_configurations(
                    eng,
                    name,
                    queries,
                    a={"exact_threshold": 10**9},
                    b={"exact_threshold": 0},
                    k=K,
                    mode="semantic",
                    concurrency=args.concurrency,
                )
                entry["ranklock_exact_vs_hnsw_semantic"] = {
                    "rsi": cfg.rsi,
                    "rbo": cfg.rbo,
                    "identical_share": cfg.identical_share,
                    "a": cfg.extra["a"]["params"].get("vector_strategy"),
                    "b": cfg.extra["b"]["params"].get("vector_strategy"),
                }
            # Query vectors exactly as ranklock embeds them (normalised text, cached per embedder).
            vectors = [eng._query_vector(coll, normalize(text)) for _, text, _ in queries]
            src = sql.SQL("SELECT row_id, embedding FROM {}").format(chunk_table(int(sid)))
            entry["pgvector_rebuild"] = rebuild_test(eng, src, name, vectors)
            entry["snapshot"] = sid
            result["collections"][name] = entry
        if args.large:
            try:
                coll = eng.collection(args.large)
            except Exception as exc:
                result["large"] = {"error": str(exc)}
            else:
                sid = coll.active_snapshot_id
                if sid is None:
                    raise SystemExit(f"collection {args.large!r} has no active snapshot yet; pass --large '' to skip")
                n, nq = args.large_sample, args.large_queries
                with eng.db.connection() as conn:
                    src_bound = sql.SQL("SELECT row_id, embedding FROM {} WHERE row_id < {}").format(
                        chunk_table(int(sid)), sql.Literal(n)
                    )
                    qrows = conn.execute(
                        sql.SQL("SELECT embedding FROM {} WHERE row_id >= %s ORDER BY row_id LIMIT %s").format(
                            chunk_table(int(sid))
                        ),
                        [n, nq],
                    ).fetchall()
                vectors = [np.asarray(r[0].to_numpy(), dtype=np.float32) for r in qrows]
                entry = rebuild_test(eng, src_bound, f"{args.large}_{n}", vectors)
                entry["source"] = {
                    "collection": args.large,
                    "snapshot": sid,
                    "sample": f"row_id < {n}",
                    "queries": f"vectors of rows {n}..{n + nq - 1}",
                }
                result["large"] = entry
        if args.random:
            # The hard case for HNSW: unclustered random unit vectors (384 dimensions, fixed seed).
            rng = np.random.default_rng(20261130)
            m = rng.standard_normal((args.random + args.large_queries, 384)).astype(np.float32)
            m /= np.linalg.norm(m, axis=1, keepdims=True)
            src_table = sql.Identifier(SCHEMA, "random_src")
            _exec(eng, sql.SQL("CREATE TABLE {} (row_id bigint, embedding vector(384))").format(src_table))
            from pgvector import Vector

            copy = sql.SQL("COPY {} (row_id, embedding) FROM STDIN").format(src_table)
            with eng.db.connection() as conn, conn.cursor() as cur, cur.copy(copy) as cp:
                for i in range(args.random):
                    cp.write_row([i, Vector(m[i])])
            entry = rebuild_test(
                eng, sql.SQL("SELECT row_id, embedding FROM {}").format(src_table), "random", list(m[args.random :])
            )
            entry["source"] = {"rows": "random unit vectors, numpy seed 20261130", "queries": "random unit vectors"}
            result["random"] = entry
        _exec(eng, sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(SCHEMA)))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(
        f"{'data':<16} {'rows':>8} {'queries':>7} {'system':<34} {'RSI':>7} {'RBO':>7} {'identical':>9} {'changed':>8}"
    )
    for name, e in result["collections"].items():
        for vname in ("default", "hnsw"):
            if f"ranklock_{vname}" not in e:
                continue
            r = e[f"ranklock_{vname}"]
            label = f"ranklock {vname}, {args.runs} runs, c={args.concurrency}"
            print(
                f"{name:<16} {'':>8} {e['queries']:>7} {label:<34} "
                f"{r['rsi']:>7.4f} {r['rbo']:>7.4f} {r['identical_share']:>9.1%} {1 - r['identical_share']:>8.1%}"
            )
        p = e["pgvector_rebuild"]
        print(
            f"{name:<16} {p['rows']:>8} {p['queries']:>7} {'pgvector HNSW, 2 index builds':<34} "
            f"{p['rsi']:>7.4f} {p['rbo']:>7.4f} {p['identical_share']:>9.1%} {p['changed_top10_share']:>8.1%}"
        )
    for key, label in (("large", f"{args.large} sample"), ("random", "random vectors")):
        if key in result and "rsi" in result[key]:
            p = result[key]
            print(
                f"{label:<16} {p['rows']:>8} {p['queries']:>7} {'pgvector HNSW, 2 index builds':<34} "
                f"{p['rsi']:>7.4f} {p['rbo']:>7.4f} {p['identical_share']:>9.1%} {p['changed_top10_share']:>8.1%}"
            )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
