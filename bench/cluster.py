"""One node against a coordinator and 2 workers, side by side in one run: identical hits, build time, latency, per-node work.

Both collections live on the coordinator of a local Citus cluster (``ranklock db cluster``), built from the
same documents by the same ingests: ``<name>_one`` with ordinary tables (``shards=0``, the one-node code
path: PostgreSQL with Citus loaded and idle) and ``<name>_sharded`` with every segment distributed over
the 2 workers (``shards=4``, ranklock.snapshot.shards).  They share the server, the embedding cache and
the machine, so a difference is the placement's.  The corpus is written in two ingests (the second
replaces a tenth of the documents and adds some), so each collection has two segments and dead rows.

For every query and every case (three modes, exact vectors; two filters; ``as_of``) both are searched,
alternating which goes first, and the hits (ids, chunks, every branch's rank and raw score, the fused
score, offsets, text) and ``matching_count`` compared whole.  On the first ``--explain`` queries of each
case the sharded statement is run under ``EXPLAIN (ANALYZE)`` with every task shown: how many tasks,
the rows each shard's scans read, and the bytes the coordinator received.  One 2-core machine cannot
show a speed-up: the workers share its cores with the coordinator.

    python bench/cluster.py --corpus scifact --home /tmp/cluster-bench                 # SciFact, MiniLM
    python bench/cluster.py --corpus generated --docs 200000 --home /tmp/cluster-bench  # bench/large_corpus.py

Prints a table and writes bench/out/cluster_<corpus>.json; state the load average with any figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from ranklock import Document, Engine  # noqa: E402
from ranklock.store.cluster import LocalCluster  # noqa: E402

SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
SHARDS = 4
AS_OF = "2018-06-01T00:00:00Z"
#: (label, mode, search keywords); the filters use the fields every document gets below.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("lexical", "lexical", {}),
    ("semantic exact", "semantic", {}),
    ("hybrid exact", "hybrid", {}),
    ("lexical, year >= 2020", "lexical", {"filter": "year >= 2020"}),
    ("hybrid, year >= 2020", "hybrid", {"filter": "year >= 2020"}),
    ("hybrid, team = b", "hybrid", {"filter": 'team = "b"'}),
    ("hybrid, as_of", "hybrid", {"as_of": AS_OF}),
]


def _fields(doc_id: str) -> dict[str, Any]:
    """Typed fields and an effective date derived from the id alone: the same on both sides, any corpus."""
    h = int.from_bytes(hashlib.sha256(doc_id.encode()).digest()[:4], "little")
    meta: dict[str, Any] = {"year": 2015 + h % 10, "team": "abc"[h % 3]}
    if h % 4 == 0:
        meta["effective_from"] = f"{2015 + h % 8}-01-01T00:00:00Z"
    return meta


def scifact() -> tuple[list[Document], list[str], dict[str, Any]]:
    docs = []
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs.append(Document(str(rec["_id"]), rec.get("title", ""), rec["text"], _fields(str(rec["_id"]))))
    from identical import load_queries  # the SciFact test queries, in query-id order

    return docs, [text for _, text in load_queries(10**6)], {"index": "exact"}


def generated(n: int, n_queries: int) -> tuple[list[Document], list[str], dict[str, Any]]:
    import large_corpus

    docs = [Document(d.doc_id, d.title, d.body, {**d.metadata, **_fields(d.doc_id)}) for d in large_corpus.generate(n)]
    return docs, large_corpus.queries(n_queries), {"index": "exact", "embedder": large_corpus.GeneratedEmbedder.id}


def second_write(docs: list[Document]) -> list[Document]:
    """A tenth of the documents changed (a word appended) and 1 % new ones: a second segment and dead rows."""
    changed = [Document(d.doc_id, d.title, d.body + " revised", d.metadata) for d in docs[::10]]
    new = [Document(f"new{i:06d}", d.title, d.body, _fields(f"new{i:06d}")) for i, d in enumerate(docs[5::100])]
    return changed + new


def _hits(res: Any) -> dict[str, Any]:
    return {"hits": [h.model_dump() for h in res.hits], "matching": res.matching_count}


def _explain(conn: psycopg.Connection[Any], text: str, params: dict[str, Any]) -> dict[str, Any]:
    """Tasks, rows read per task (its scans' actual rows) and kB the coordinator received, of one statement."""
    with conn.transaction():
        conn.execute("SET LOCAL citus.explain_all_tasks = on")
        lines = [
            r[0]
            for r in conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + text, params, prepare=False
            ).fetchall()
        ]
    received = 0.0
    for ln in lines:
        m = re.search(r"Tuple data received from nodes: ([\d.]+) (bytes|kB|MB)", ln)
        if m:
            received += float(m.group(1)) * {"bytes": 1 / 1024, "kB": 1.0, "MB": 1024.0}[m.group(2)]
    # Rows each task read from shard tables (<table>_<segment>_<shard id>): the per-node work.
    per_task: list[int] = []
    for ln in lines:
        if ln.strip().startswith("->  Task"):
            per_task.append(0)
        elif per_task and (
            m := re.search(
                r"(?:Seq|Index|Index Only|Bitmap Heap) Scan (?:using \S+ )?on \w+_\d+_\d+ .*actual rows=([\d.]+) loops=(\d+)",
                ln,
            )
        ):
            per_task[-1] += round(float(m.group(1)) * int(m.group(2)))
    shard_tasks = [n for n in per_task if n > 0]
    return {
        "subplans": sum("Distributed Subplan" in ln for ln in lines),
        "tasks": len(per_task),
        "shard_tasks": len(shard_tasks),
        "rows_per_shard_task": statistics.median(shard_tasks) if shard_tasks else 0,
        "rows_read": sum(shard_tasks),
        "kb_to_coordinator": round(received, 1),
    }


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", choices=("scifact", "generated"), default="scifact")
    ap.add_argument("--docs", type=int, default=200_000, help="generated corpus size")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--explain", type=int, default=10, help="queries per case run under EXPLAIN ANALYZE")
    ap.add_argument("--home", default="/tmp/cluster-bench")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--name", help="collection name prefix (default bench_<corpus>); a new one builds anew")
    ap.add_argument("--reuse", action="store_true", help="search the collections an earlier run built (no build)")
    args = ap.parse_args()
    load = os.getloadavg()
    cluster = LocalCluster(Path(args.home))
    made = cluster.start() if (Path(args.home) / "cluster.json").exists() else cluster.create(2)
    assert made["healthy"], made
    if args.corpus == "scifact":
        docs, queries, create = scifact()
    else:
        docs, queries, create = generated(args.docs, args.queries)
    queries = queries[: args.queries]
    eng = Engine(dsn=cluster.dsn, log_queries=False)
    if args.corpus == "generated":
        import large_corpus

        emb = large_corpus.GeneratedEmbedder()
        eng.embedders.register(emb)
    name = args.name or f"bench_{args.corpus}"
    sides = {"one": (f"{name}_one", 0), "sharded": (f"{name}_sharded", SHARDS)}
    builds: dict[str, list[dict[str, float]]] = {}
    # The sharded side first: it pays for embedding, which the embedding cache then spares the other.
    for side in ("sharded", "one") if not args.reuse else ():
        coll, shards = sides[side]
        builds[side] = []
        for i, batch in enumerate((docs, second_write(docs))):
            t0 = time.perf_counter()
            report = eng.ingest(coll, batch, replace=i == 0, create={**create, "shards": shards})
            secs = {k: round(float(v), 2) for k, v in report.seconds.items() if isinstance(v, int | float)}
            secs["wall"] = round(time.perf_counter() - t0, 2)
            builds[side].append(secs)
            print(f"built {coll} write {i + 1}: {secs}", flush=True)
    results: list[dict[str, Any]] = []
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        register_vector(conn)
        for label, mode, kw in CASES:
            identical = 0
            ms: dict[str, list[float]] = {"one": [], "sharded": []}
            explained: list[dict[str, Any]] = []
            for qi, q in enumerate(queries):
                got: dict[str, Any] = {}
                order = ("one", "sharded") if qi % 2 == 0 else ("sharded", "one")
                for side in order:
                    t0 = time.perf_counter()
                    res = eng.search(sides[side][0], q, k=10, mode=mode, **kw)
                    ms[side].append((time.perf_counter() - t0) * 1000)
                    got[side] = _hits(res)
                identical += got["one"] == got["sharded"]
                if qi < args.explain:
                    text, params = eng.search_sql(sides["sharded"][0], q, k=10, mode=mode, **kw)
                    explained.append(_explain(conn, text, params))
            row = {
                "case": label,
                "queries": len(queries),
                "identical": identical,
                "p50_ms": {s: _pct(v, 0.5) for s, v in ms.items()},
                "p95_ms": {s: _pct(v, 0.95) for s, v in ms.items()},
                "sharded_statement": {
                    k: statistics.median(e[k] for e in explained)
                    for k in (
                        "subplans",
                        "tasks",
                        "shard_tasks",
                        "rows_per_shard_task",
                        "rows_read",
                        "kb_to_coordinator",
                    )
                },
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    eng.close()
    print(f"\n{args.corpus}: {len(docs)} documents, {len(queries)} queries; load average {load} -> {os.getloadavg()}")
    print(
        f"{'case':24} {'identical':>10} {'p50 one/sh ms':>16} {'p95 one/sh ms':>16} {'tasks':>6} {'shard tasks':>11} "
        f"{'rows/shard task':>15} {'kB':>7}"
    )
    for r in results:
        s = r["sharded_statement"]
        print(
            f"{r['case']:24} {r['identical']:>5}/{r['queries']:<4} "
            f"{r['p50_ms']['one']:>7}/{r['p50_ms']['sharded']:<8} {r['p95_ms']['one']:>7}/{r['p95_ms']['sharded']:<8} "
            f"{s['tasks']:>6} {s['shard_tasks']:>11} {s['rows_per_shard_task']:>15} {s['kb_to_coordinator']:>7}"
        )
    for side, b in builds.items():
        print(f"build {side}: " + "; ".join(json.dumps(x) for x in b))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"cluster_{args.corpus}.json"
    path.write_text(
        json.dumps(
            {
                "corpus": args.corpus,
                "documents": len(docs),
                "shards": SHARDS,
                "workers": 2,
                "load_average": {"start": load, "end": os.getloadavg()},
                "builds": builds,
                "cases": results,
            },
            indent=2,
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
