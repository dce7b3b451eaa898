"""Snapshots, the query log and the result cache: what they cost, measured.

Builds a generated collection (see bench/large_corpus.py: real pipeline,
generated vectors), then measures

* the first build, a re-ingest of the unchanged corpus (embeds nothing, same
  corpus digest) and a re-ingest with 1% of the documents changed;
* search latency (hybrid, k=10) with the query log off, on (one more
  statement per search: each branch's candidates) and served from the result
  cache;
* activation, rollback and replay.

Prints a table and writes JSON::

    python bench/snapshots.py --docs 20000 --home /tmp/rl-bench-snapshots --out bench/out/snapshots.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from large_corpus import GeneratedEmbedder, generate, queries
from ranklock import Document, Engine


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def timed_searches(eng: Engine, name: str, qs: list[str]) -> tuple[list[float], list[str]]:
    lat, out = [], []
    for q in qs:
        t = time.perf_counter()
        res = eng.search(name, q, k=10)
        lat.append((time.perf_counter() - t) * 1000)
        out.append(res.to_json())
    return lat, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--home", default="/tmp/rl-bench-snapshots")
    ap.add_argument("--out", default="bench/out/snapshots.json")
    ap.add_argument("--reuse", action="store_true", help="Reuse the collection of a previous run: time searches only.")
    args = ap.parse_args()
    name = f"snapbench_{args.docs}"
    emb = GeneratedEmbedder()
    eng = Engine(home=args.home, log_queries=False)
    eng.embedders.register(emb)  # register under its id so the collection resolves it
    docs = generate(args.docs)
    create = {"index": "hnsw", "embedder": emb.id}
    res: dict[str, Any] = {"documents": args.docs, "queries": args.queries}

    existing = [c.name for c in eng.collections()]
    if args.reuse and name in existing:
        # Measure searches only, on the collection a previous run built.
        sid = eng.collection(name).active_snapshot_id
        assert sid is not None
        r3_id = sid
    else:
        t = time.perf_counter()
        r1 = eng.ingest(name, docs, replace=True, create=create)
        res["build_first_s"] = time.perf_counter() - t
        t = time.perf_counter()
        r2 = eng.ingest(name, docs, replace=True)
        res["build_unchanged_s"] = time.perf_counter() - t
        res["unchanged"] = {
            "embedded": r2.embedded,
            "reused": r2.reused,
            "same_digest": r2.corpus_digest == r1.corpus_digest,
        }
        step = 100
        changed = [
            Document(d.doc_id, d.title, d.body + " revised", d.metadata) if i % step == 0 else d
            for i, d in enumerate(docs)
        ]
        t = time.perf_counter()
        r3 = eng.ingest(name, changed, replace=True)
        res["build_1pct_changed_s"] = time.perf_counter() - t
        res["one_pct_changed"] = {"changed_docs": r3.changed, "embedded": r3.embedded, "reused": r3.reused}

        r3_id = r3.snapshot_id
    qs = queries(args.queries)
    timed_searches(eng, name, qs[:10])  # warm the pool, caches and the query vectors
    # Interleaved per query, so load from other processes hits both alike.
    lat_off, out_off, lat_on, out_on = [], [], [], []
    for q in qs:
        for on, lat, out in ((False, lat_off, out_off), (True, lat_on, out_on)):
            eng.settings.log_queries = on
            a, b = timed_searches(eng, name, [q])
            lat += a
            out += b
    eng.settings.log_queries = True
    eng.settings.result_cache = True
    timed_searches(eng, name, qs)  # fill the cache
    lat_hit, out_hit = timed_searches(eng, name, qs)
    res["identical_log_on_off"] = out_on == out_off
    res["identical_cache_hit"] = out_hit == out_off
    res["latency_ms"] = {
        label: {"p50": statistics.median(xs), "p95": pct(xs, 95), "mean": statistics.fmean(xs)}
        for label, xs in (("log off", lat_off), ("log on", lat_on), ("cache hit", lat_hit))
    }
    eng.settings.result_cache = False

    t = time.perf_counter()
    eng.rollback(name)
    res["rollback_ms"] = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    eng.activate(name, r3_id)
    res["activate_ms"] = (time.perf_counter() - t) * 1000
    last = eng.search(name, qs[0], k=10)
    assert last.query_id is not None
    t = time.perf_counter()
    rep = eng.replay(last.query_id)
    res["replay_ms"] = (time.perf_counter() - t) * 1000
    res["replay_identical"] = rep.identical
    eng.close()

    print(f"{args.docs} documents, {args.queries} hybrid queries (k=10)")
    if "build_first_s" in res:
        print(f"{'build, first':<28}{res['build_first_s']:>10.1f} s")
        print(f"{'build, unchanged corpus':<28}{res['build_unchanged_s']:>10.1f} s   {res['unchanged']}")
        print(f"{'build, 1% changed':<28}{res['build_1pct_changed_s']:>10.1f} s   {res['one_pct_changed']}")
    for label, v in res["latency_ms"].items():
        print(f"{'search, ' + label:<28}{v['p50']:>10.1f} ms p50 {v['p95']:>8.1f} ms p95")
    print(f"{'activate / rollback':<28}{res['activate_ms']:>10.1f} ms {res['rollback_ms']:>8.1f} ms")
    print(f"{'replay one query':<28}{res['replay_ms']:>10.1f} ms   identical={res['replay_identical']}")
    print(f"results identical with log on/off: {res['identical_log_on_off']}, from cache: {res['identical_cache_hit']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
