"""How latency grows with the corpus: 10k, 100k and 1M generated chunks, side by side.

For each size, one collection built by ``bench/large_corpus.py``'s generator
(``scale10k``, ``scale100k``, ``scale1m``; reused when it already holds that
many documents, else built), and on each, in one run:

* ranklock lexical (BM25), semantic (HNSW), hybrid (RRF) p50 / p95 over the
  query set below, ``Engine.search`` with default settings (query log and
  result cache off; the query vector comes from the embedding cache);
* ranklock filtered semantic at 50 / 10 / 1 / 0.1 / 0.01 % selectivity:
  recall@10 against exact numpy ground truth, p50 / p95, the strategy and
  ``ef_search`` chosen, and how many answers were flagged incomplete;
* plain-Postgres hybrid with ``ts_rank_cd`` (the recipe most users write:
  ``tsv @@ query ORDER BY ts_rank_cd``, fused with the vector branch) on the
  same tables, through ``lexical_ranker="ts_rank_cd"``; on 1M chunks it takes
  seconds a query, so only the first ``--ts-queries`` are timed;
* ``bm25s`` in memory on the same texts: the in-process limit (no database,
  no filter, no persistence), single-threaded retrieval of the top 10.

The query set (``--queries``, default 200) mixes, in fixed proportions:
half Zipf-drawn 2-5 word queries (``large_corpus.queries``), a quarter made
only of the 12 most frequent words (the worst case for BM25: every term has
10^5-10^6 postings at 1M chunks), a quarter long questions of 10-20 Zipf-drawn
words.  Every query runs once unmeasured first.  The machine's load average
is recorded at the start and end; measure on a quiet machine.

    python bench/scale.py --home /work/bench-home --sizes 10000,100000,1000000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from filtered import SELECTIVITIES, load_vectors
from large_corpus import FIELDS, GeneratedEmbedder, generate, vocabulary
from large_corpus import queries as zipf_queries
from ranklock import Engine
from ranklock.errors import NotFound, QueryError
from ranklock.ingest.normalize import normalize

OUT = Path(__file__).resolve().parent / "out"
K = 10


def query_set(n: int, seed: int = 2024) -> list[tuple[str, str]]:
    """(kind, text): half Zipf 2-5 words, a quarter only the most frequent words, a quarter 10-20 words."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks**1.07
    p /= p.sum()
    n_freq = n // 4
    n_long = n // 4
    n_zipf = n - n_freq - n_long
    out = [("zipf", t) for t in zipf_queries(n_zipf)]
    for _ in range(n_freq):
        words = rng.choice(12, size=int(rng.integers(2, 6)), replace=False)
        out.append(("frequent", " ".join(vocab[int(j)] for j in words)))
    for _ in range(n_long):
        words = rng.choice(len(vocab), size=int(rng.integers(10, 21)), p=p)
        out.append(("long", " ".join(vocab[int(j)] for j in words)))
    return out


def pct(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    if not s:
        return {"p50": float("nan"), "p95": float("nan"), "n": 0}

    def q(p: float) -> float:
        return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]

    return {"p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "max": s[-1], "n": len(s)}


def ensure_collection(eng: Engine, name: str, size: int) -> dict[str, Any]:
    """The collection of ``size`` generated documents: reused when present, else built."""
    try:
        info = eng.collection(name)
        snap = eng.db.fetchone(
            "SELECT doc_count, manifest->'index_build' AS build FROM ranklock.snapshots WHERE id = %s",
            [info.active_snapshot_id],
        )
        if snap is not None and int(snap["doc_count"]) == size:
            return {"built": False, "seconds": None}
    except NotFound:
        pass
    t0 = time.perf_counter()
    docs = generate(size)
    report = eng.ingest(
        name, docs, replace=True, create={"fields": FIELDS, "index": "hnsw", "embedder": GeneratedEmbedder.id}
    )
    return {"built": True, "seconds": round(time.perf_counter() - t0, 1), "snapshot_id": report.snapshot_id}


def timed_search(eng: Engine, coll: str, text: str, **kw: Any) -> tuple[float, Any]:
    """Wall ms of ``Engine.search`` minus the query embedding (from the cache), and the result."""
    t0 = time.perf_counter()
    try:
        res = eng.search(coll, text, k=K, **kw)
    except QueryError:
        return float("nan"), None
    wall = (time.perf_counter() - t0) * 1000
    return wall - float(res.timings.get("embed_ms", 0.0)), res


def branch_latency(eng: Engine, coll: str, qs: list[tuple[str, str]], ts_queries: int) -> dict[str, Any]:
    configs: list[tuple[str, dict[str, Any]]] = [
        ("lexical", {"mode": "lexical"}),
        ("semantic", {"mode": "semantic"}),
        ("hybrid", {"mode": "hybrid"}),
    ]
    for _, text in qs:  # warm-up: buffer cache, cached query vectors
        for _, kw in configs:
            timed_search(eng, coll, text, **kw)
    out: dict[str, Any] = {}
    for label, kw in configs:
        ms: dict[str, list[float]] = {"all": [], "zipf": [], "frequent": [], "long": []}
        ef: dict[str, int] = {}
        for kind, text in qs:
            t, res = timed_search(eng, coll, text, **kw)
            if res is None:
                continue
            ms["all"].append(t)
            ms[kind].append(t)
            if label != "lexical":
                key = str(res.params.get("ef_search"))
                ef[key] = ef.get(key, 0) + 1
        out[label] = {k: pct(v) for k, v in ms.items()}
        if ef:
            out[label]["ef_search"] = ef
    ts: list[float] = []
    for _, text in qs[:ts_queries]:
        t, res = timed_search(eng, coll, text, mode="hybrid", lexical_ranker="ts_rank_cd")
        if res is not None:
            ts.append(t)
    out["hybrid ts_rank_cd"] = {"all": pct(ts)}
    return out


def filtered(eng: Engine, coll: str, n_queries: int) -> list[dict[str, Any]]:
    info = eng.collection(coll)
    sid = int(info.active_snapshot_id or 0)
    ids, buckets, vecs = load_vectors(eng, sid, Path(f"/tmp/scale-bench-{coll}-{sid}.npz"))
    texts = zipf_queries(n_queries, seed=7)
    qvecs = [eng._query_vector(info, normalize(t)) for t in texts]
    row_of = {d: i for i, d in enumerate(ids)}
    rows = []
    for frac, n in SELECTIVITIES:
        idx = np.nonzero(buckets < n)[0]
        sub = vecs[idx]
        flt = f"bucket < {n}"
        timed_search(eng, coll, "warm up", mode="semantic", filter=flt)
        ms: list[float] = []
        rec: list[float] = []
        chosen: dict[str, int] = {}
        incomplete = 0
        for text, qv in zip(texts, qvecs, strict=True):
            q = qv.astype(np.float64)
            q /= np.linalg.norm(q)
            # float32 screening of the filtered set, then float64 on its 500 nearest.
            d32 = 1.0 - sub @ q.astype(np.float32)
            m = min(len(d32), K * 50)
            near = np.argpartition(d32, m - 1)[:m] if m < len(d32) else np.arange(len(d32))
            d = np.sort(1.0 - sub[near].astype(np.float64) @ q)
            want = min(K, len(idx))
            kth = float(d[want - 1]) if want else 0.0
            t, res = timed_search(eng, coll, text, mode="semantic", filter=flt)
            ms.append(t)
            got = [h.doc_id for h in res.hits]
            # A hit is good when its exact distance is within 1e-6 of the 10th (ties at the boundary are no miss).
            good = sum(1 for g in got if 1.0 - float(vecs[row_of[g]].astype(np.float64) @ q) <= kth + 1e-6)
            rec.append(min(good, want) / want if want else 1.0)
            key = f"{res.params.get('vector_strategy')} ef {res.params.get('ef_search')}"
            chosen[key] = chosen.get(key, 0) + 1
            incomplete += 0 if res.complete else 1
            if res.matching_count != len(idx):
                raise SystemExit(f"matching_count {res.matching_count} != exact {len(idx)} for {flt}")
        rows.append(
            {
                "selectivity": frac,
                "matching": len(idx),
                "recall_at_10": statistics.fmean(rec),
                "min_recall": min(rec),
                **{k: v for k, v in pct(ms).items() if k in ("p50", "p95")},
                "chosen": chosen,
                "flagged_incomplete": incomplete,
            }
        )
        print(f"    filtered {frac * 100:g}%: {json.dumps(rows[-1])}", flush=True)
    del vecs
    gc.collect()
    return rows


def bm25s_latency(size: int, qs: list[tuple[str, str]]) -> dict[str, Any]:
    """bm25s (k1 1.2, b 0.75, Lucene idf) in memory on the same texts: index time and query latency."""
    import bm25s

    texts = [d.body for d in generate(size)]
    t0 = time.perf_counter()
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
    index_s = time.perf_counter() - t0
    del texts
    ms: dict[str, list[float]] = {"all": [], "zipf": [], "frequent": [], "long": []}
    for _, text in qs:  # warm-up
        retriever.retrieve(bm25s.tokenize([text], stopwords=None, show_progress=False), k=K, show_progress=False)
    for kind, text in qs:
        t = time.perf_counter()
        tok = bm25s.tokenize([text], stopwords=None, show_progress=False)
        retriever.retrieve(tok, k=K, show_progress=False, n_threads=1)
        ms["all"].append((time.perf_counter() - t) * 1000)
        ms[kind].append(ms["all"][-1])
    out: dict[str, Any] = {k: pct(v) for k, v in ms.items()}
    out["index_s"] = round(index_s, 1)
    del retriever
    gc.collect()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--filtered-queries", type=int, default=50)
    ap.add_argument(
        "--ts-queries", type=int, default=20, help="hybrid ts_rank_cd on the first N queries (1M: ~6 s each)"
    )
    ap.add_argument("--skip-bm25s", action="store_true")
    ap.add_argument("--out", default=str(OUT / "scale.json"))
    args = ap.parse_args()

    eng = Engine(home=args.home, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)
    qs = query_set(args.queries)
    report: dict[str, Any] = {
        "benchmark": "scale",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "command": " ".join(["python", *sys.argv]),
        "queries": {kind: sum(1 for k, _ in qs if k == kind) for kind in ("zipf", "frequent", "long")},
        "loadavg_start": list(os.getloadavg()),
        "sizes": {},
    }
    for size in (int(s) for s in args.sizes.split(",")):
        name = {10_000: "scale10k", 100_000: "scale100k", 1_000_000: "scale1m"}.get(size, f"scale{size}")
        print(f"== {size:,} chunks ({name})", flush=True)
        entry: dict[str, Any] = {"collection": name, "build": ensure_collection(eng, name, size)}
        entry["loadavg_before"] = list(os.getloadavg())
        entry["ranklock"] = branch_latency(eng, name, qs, args.ts_queries if size >= 1_000_000 else len(qs))
        print(f"    {json.dumps(entry['ranklock'])}", flush=True)
        entry["filtered"] = filtered(eng, name, args.filtered_queries)
        if not args.skip_bm25s:
            entry["bm25s"] = bm25s_latency(size, qs)
            print(f"    bm25s {json.dumps(entry['bm25s'])}", flush=True)
        entry["loadavg_after"] = list(os.getloadavg())
        report["sizes"][str(size)] = entry
    report["loadavg_end"] = list(os.getloadavg())
    report["table"] = table(report)
    print(report["table"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"load average at start {report['loadavg_start']}, at end {report['loadavg_end']}\nwrote {args.out}")
    eng.close()


def table(report: dict[str, Any]) -> str:
    sizes = list(report["sizes"])
    head = "| ms (p50 / p95) | " + " | ".join(f"{int(s):,} chunks" for s in sizes) + " |"
    lines = [head, "|---|" + "---:|" * len(sizes)]

    def cell(d: dict[str, Any] | None) -> str:
        if not d or not d.get("n"):
            return "-"
        return f"{d['p50']:.1f} / {d['p95']:.1f}"

    rows: list[tuple[str, Any]] = [
        ("ranklock lexical BM25", lambda e: e["ranklock"]["lexical"]["all"]),
        ("  of which: most frequent words only", lambda e: e["ranklock"]["lexical"]["frequent"]),
        ("  of which: 10-20 word questions", lambda e: e["ranklock"]["lexical"]["long"]),
        ("ranklock semantic", lambda e: e["ranklock"]["semantic"]["all"]),
        ("ranklock hybrid", lambda e: e["ranklock"]["hybrid"]["all"]),
        ("plain Postgres hybrid (ts_rank_cd)", lambda e: e["ranklock"]["hybrid ts_rank_cd"]["all"]),
        ("bm25s in memory (top 10)", lambda e: e.get("bm25s", {}).get("all")),
    ]
    for label, get in rows:
        lines.append(f"| {label} | " + " | ".join(cell(get(report["sizes"][s])) for s in sizes) + " |")
    for i, (frac, _) in enumerate(SELECTIVITIES):
        cells = []
        for s in sizes:
            r = report["sizes"][s]["filtered"][i]
            cells.append(f"{r['p50']:.1f} / {r['p95']:.1f} (recall {r['recall_at_10']:.3f})")
        lines.append(f"| filtered semantic {frac * 100:g}% | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
