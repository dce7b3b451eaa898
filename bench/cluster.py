"""One node against a coordinator and 2 workers, side by side in one run: identical hits, build time, latency, per-node work.

Both collections live on the coordinator of a local Citus cluster (``ranklock db cluster``), built from the
same documents by the same ingests: ``<name>_one`` with ordinary tables (``shards=0``, the one-node code
path: PostgreSQL with Citus loaded and idle) and ``<name>_sharded`` with every segment distributed over
the 2 workers (``shards=4``, ranklock.snapshot.shards).  They share the server, the embedding cache and
the machine, so a difference is the placement's.  The corpus is written in two ingests (the second
replaces a tenth of the documents and adds some), so each collection has two segments and dead rows.

For every query and every case (three modes, exact vectors; two filters; ``as_of``) both are searched,
alternating which goes first (after one untimed pass of every query on both sides: ``--no-warm`` times
the cold first pass too), and the hits (ids, chunks, every branch's rank and raw score, the fused
score, offsets, text) and ``matching_count`` compared whole.  A sharded search is one statement on the
coordinator (ranklock.search.sharded): a query phase of one Citus task per shard, each running the
one-node plan, the merge and fusion on the coordinator, and a fetch of the k hits' text.  On the first
``--explain`` queries of each case the sharded statement is run with ``citus.log_remote_commands`` (the
Citus tasks of the query phase and of each fetch statement, and the nodes they ran on), and its query
phase timed by itself and under ``EXPLAIN (ANALYZE)``: the time of each shard's task on its worker (the
slowest and the mean), the phase's own time, the bytes the coordinator received; one shard's statement
alone and the one-node statement alone; the merge (the statement less its query phase, back to back:
the coordinator's planning, fusion, the fetch).  The build of each write is timed on both sides, and the ratio sharded / one node printed.  One 2-core
machine cannot show a speed-up: the workers share its cores with the coordinator.

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
from psycopg import sql

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


def _remote(conn: psycopg.Connection[Any], text: str, params: dict[str, Any]) -> dict[str, Any]:
    """The Citus tasks of one sharded search statement: its query phase's and its fetch's, and their nodes."""
    sent: list[tuple[str, str]] = []

    def notice(d: Any) -> None:
        m = re.search(r"on server \S+@([\w.]+:\d+)", d.message_detail or "")
        if m and (d.message_primary or "").startswith("issuing "):
            sent.append((m.group(1), d.message_primary or ""))

    conn.add_notice_handler(notice)
    try:
        with conn.transaction():
            conn.execute("SET LOCAL citus.log_remote_commands = on")
            conn.execute(text, params, prepare=False)
    finally:
        conn.remove_notice_handler(notice)
    query = [node for node, cmd in sent if "ranklock.shard_search(" in cmd]
    fetch = [node for node, cmd in sent if "char_start, char_end, text FROM" in cmd]
    # The fetch is one Citus statement per segment holding hits: its tasks are the shards of that segment.
    per_segment: dict[str, int] = {}
    for _, cmd in sent:
        if m := re.search(r"char_start, char_end, text FROM \S*chunks_(\d+)_\d+", cmd):
            per_segment[m.group(1)] = per_segment.get(m.group(1), 0) + 1
    return {
        "query_tasks": len(query),
        "fetch_statements": len(per_segment),
        "fetch_tasks_per_statement": max(per_segment.values(), default=0),
        "nodes": len(set(query) | set(fetch)),
    }


def _phase(
    conn: psycopg.Connection[Any], statement: tuple[str, dict[str, Any]], one: tuple[str, dict[str, Any]]
) -> dict[str, float]:
    """The query phase alone, and one shard's task alone: what the cost model on N machines is made of.

    * ``statement_ms``: the sharded search's statement, and ``query_phase_ms``: its fan-out run by itself (one
      Citus task a shard, as the search runs it), back to back (nothing of ranklock's reads the clock, so they
      are timed here, from the client); the merge is the difference: the coordinator's planning, fusion, the fetch;
    * ``shard_alone_ms``: the first shard's statement alone (a query routed to its anchor: one task, nothing
      beside it on the cores), and ``one_node_alone_ms``: the one-node collection's statement alone;
    * ``shard_max_ms`` / ``shard_mean_ms``: each shard's task's execution on its worker during the fan-out
      (EXPLAIN ANALYZE, every task shown: they share the cores), and the kB the coordinator received.

    Empty for a search routed to one partition value.
    """
    text, params = statement
    if params.get("shard_route") is not None:
        return {}
    fan = sql.SQL(
        "SELECT ranklock.shard_search(a.tableoid, %(shard_tables)s::text[], %(shard_sql)s::text, "
        "%(shard_types)s::regtype[], %(shard_values)s::text[]) FROM {} AS a"
    ).format(sql.SQL(params["shard_anchors"]))

    def settings() -> None:
        conn.execute(sql.SQL("SET LOCAL citus.max_cached_conns_per_worker = {}").format(params["shard_count"]))
        conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        conn.execute("SET LOCAL jit = off")
        conn.execute("SET LOCAL work_mem = '64MB'")

    timed: dict[str, float] = {}
    with conn.transaction():
        settings()
        conn.execute(fan, params, prepare=False).fetchall()  # warm: the connections of the fan-out kept
        t0 = time.perf_counter()
        conn.execute(text, params, prepare=False).fetchall()
        timed["statement_ms"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        conn.execute(fan, params, prepare=False).fetchall()
        timed["query_phase_ms"] = (time.perf_counter() - t0) * 1000
        timed["merge_ms"] = max(0.0, timed["statement_ms"] - timed["query_phase_ms"])
        key = conn.execute(sql.SQL("SELECT min(key) FROM {}").format(sql.SQL(params["shard_anchors"]))).fetchone()
        alone = sql.Composed([fan, sql.SQL(" WHERE a.key = %(anchor_key)s")])
        t0 = time.perf_counter()
        conn.execute(alone, {**params, "anchor_key": key[0] if key else None}, prepare=False).fetchall()
        timed["shard_alone_ms"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        conn.execute(one[0], one[1], prepare=False).fetchall()
        timed["one_node_alone_ms"] = (time.perf_counter() - t0) * 1000
    with conn.transaction():
        settings()
        conn.execute("SET LOCAL citus.explain_all_tasks = on")
        lines = [
            r[0]
            for r in conn.execute(
                sql.Composed([sql.SQL("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "), fan]),
                params,
                prepare=False,
            ).fetchall()
        ]
    received = 0.0
    tasks: list[float] = []
    for ln in lines:
        if m := re.search(r"Tuple data received from nodes: ([\d.]+) (bytes|kB|MB)", ln):
            received += float(m.group(1)) * {"bytes": 1 / 1024, "kB": 1.0, "MB": 1024.0}[m.group(2)]
        elif (m := re.search(r"Execution Time: ([\d.]+) ms", ln)) and ln.startswith(" "):
            tasks.append(float(m.group(1)))  # indented: a task's own execution on its worker
    return {
        **timed,
        "shard_max_ms": max(tasks, default=0.0),
        "shard_mean_ms": sum(tasks) / len(tasks) if tasks else 0.0,
        "phase_kb": round(received, 1),
    }


def _phases(phases: list[dict[str, float]], sql_ms: list[float]) -> dict[str, float | None]:
    """Medians of :func:`_phase`'s figures over a case's --explain queries, and of every sharded search's round trip."""
    keys = (
        "shard_alone_ms",
        "one_node_alone_ms",
        "shard_max_ms",
        "shard_mean_ms",
        "query_phase_ms",
        "statement_ms",
        "merge_ms",
        "phase_kb",
    )
    out: dict[str, float | None] = {
        k: round(statistics.median(p[k] for p in phases), 1) if phases else None for k in keys
    }
    out["sql_ms"] = round(statistics.median(sql_ms), 1) if sql_ms else None
    return out


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
    ap.add_argument("--no-warm", dest="warm", action="store_false", help="time the first search of every query too")
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
    if args.warm:
        # One untimed pass of every query in every mode on both sides: each server's buffers hold what the
        # queries read, as a server in service does (a cold first pass costs the workers, whose caches start
        # empty, 50 ms a lexical search more than the coordinator at 50,000 documents), and this process has
        # probed each query once (the probe and the query's terms are kept per process).
        for q in queries:
            for side in ("one", "sharded"):
                for mode in ("lexical", "semantic"):
                    eng.search(sides[side][0], q, k=10, mode=mode)
    results: list[dict[str, Any]] = []
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        register_vector(conn)
        for label, mode, kw in CASES:
            identical = 0
            ms: dict[str, list[float]] = {"one": [], "sharded": []}
            phases: list[dict[str, float]] = []
            sql_ms: list[float] = []
            explained: list[dict[str, Any]] = []
            for qi, q in enumerate(queries):
                got: dict[str, Any] = {}
                order = ("one", "sharded") if qi % 2 == 0 else ("sharded", "one")
                for side in order:
                    t0 = time.perf_counter()
                    res = eng.search(sides[side][0], q, k=10, mode=mode, **kw)
                    ms[side].append((time.perf_counter() - t0) * 1000)
                    got[side] = _hits(res)
                    if side == "sharded":
                        sql_ms.append(res.timings.get("sql_ms", 0.0))
                identical += got["one"] == got["sharded"]
                if qi < args.explain:
                    text, params = eng.search_sql(sides["sharded"][0], q, k=10, mode=mode, **kw)
                    explained.append(_remote(conn, text, params))
                    one_statement = eng.search_sql(sides["one"][0], q, k=10, mode=mode, **kw)
                    if timed := _phase(conn, (text, params), one_statement):
                        phases.append(timed)
            row = {
                "case": label,
                "queries": len(queries),
                "identical": identical,
                "p50_ms": {s: _pct(v, 0.5) for s, v in ms.items()},
                "p95_ms": {s: _pct(v, 0.95) for s, v in ms.items()},
                "ratio": {
                    "p50": round(_pct(ms["sharded"], 0.5) / max(_pct(ms["one"], 0.5), 1e-9), 2),
                    "p95": round(_pct(ms["sharded"], 0.95) / max(_pct(ms["one"], 0.95), 1e-9), 2),
                },
                # Medians over the --explain queries (_phase): one shard's statement alone and the one node's
                # alone, each shard's task during the fan-out, the statement and its query phase by themselves,
                # back to back, and the merge (their difference: the coordinator's planning, fusion, the fetch);
                # and the statement's round trip in the searches (sql_ms, median over every sharded search).
                "sharded_phases_p50_ms": _phases(phases, sql_ms),
                "sharded_statement": {
                    k: statistics.median(e[k] for e in explained) if explained else None
                    for k in ("query_tasks", "fetch_statements", "fetch_tasks_per_statement", "nodes")
                },
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    eng.close()
    end_load = os.getloadavg()
    print(f"\n{args.corpus}: {len(docs)} documents, {len(queries)} queries; load average {load} -> {end_load}")
    print(
        f"{'case':24} {'identical':>10} {'p50 one/sh ms':>16} {'p95 one/sh ms':>16} {'x p50/p95':>10} "
        f"{'alone 1sh/one':>13} {'shard max/mean':>15} {'query':>6} {'merge':>6} {'tasks q+f':>9} {'kB':>6}"
    )
    for r in results:
        s = r["sharded_statement"]
        ph = r["sharded_phases_p50_ms"]
        print(
            f"{r['case']:24} {r['identical']:>5}/{r['queries']:<4} "
            f"{r['p50_ms']['one']:>7}/{r['p50_ms']['sharded']:<8} {r['p95_ms']['one']:>7}/{r['p95_ms']['sharded']:<8} "
            f"{r['ratio']['p50']:>4}/{r['ratio']['p95']:<5} "
            f"{ph['shard_alone_ms']!s:>6}/{ph['one_node_alone_ms']!s:<6} "
            f"{ph['shard_max_ms']!s:>7}/{ph['shard_mean_ms']!s:<7} {ph['query_phase_ms']!s:>6} {ph['merge_ms']!s:>6} "
            f"{s['query_tasks']!s:>4}+{s['fetch_tasks_per_statement']!s:<4} {ph['phase_kb']!s:>6}"
        )
    ratios: dict[str, float] = {}
    for i in range(2):
        if all(len(builds.get(side, [])) > i for side in ("one", "sharded")):
            ratios[f"write{i + 1}"] = round(builds["sharded"][i]["wall"] / max(builds["one"][i]["wall"], 1e-9), 2)
    for side, b in builds.items():
        print(f"build {side}: " + "; ".join(json.dumps(x) for x in b))
    if ratios:
        print(f"build sharded / one node (wall): {ratios}")
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
                "load_average": {"start": load, "end": end_load},
                "warm": args.warm,
                "builds": builds,
                "build_ratio": ratios,
                "cases": results,
            },
            indent=2,
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
