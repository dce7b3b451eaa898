"""Lexical ranking benchmark (issue 3): ranklock BM25 vs ts_rank_cd vs bm25s, quality and latency.

In one run, on SciFact and NFCorpus (BEIR test qrels):

* nDCG@10 and recall@100 (pytrec_eval) of ranklock's lexical branch with BM25
  and with ts_rank_cd, of the reference BM25 ``bm25s`` (PyStemmer English
  stemmer, English stop words, the same Lucene idf), and of ranklock hybrid
  (BM25 + all-MiniLM-L6-v2, RRF k=60, depth 40) and hybrid with ts_rank_cd;
* latency p50/p95/p99 over all test queries of the lexical branch (both
  rankers) and of the full hybrid search, the query embedding reported
  separately (it comes from the embedding cache after the first run);

and on the large generated collection (bench/large_corpus.py, 1M chunks) the
same latencies over its 200 generated queries.  Prints tables, writes JSON.

    python bench/lexical.py --home /work/bench-home
    python bench/lexical.py --home /work/bench-home --skip-large
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ranklock import Engine

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
OUT = Path(__file__).resolve().parent / "out"


# -- data ------------------------------------------------------------------------


def load_beir(name: str) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """(corpus text by id, test queries by id, qrels) of a BEIR data set."""
    root = DATA / name
    corpus: dict[str, str] = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            corpus[str(rec["_id"])] = ((rec.get("title") or "") + " " + (rec.get("text") or "")).strip()
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / "test.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if str(rec["_id"]) in qrels:
                queries[str(rec["_id"])] = rec["text"]
    return corpus, queries, qrels


# -- metrics ---------------------------------------------------------------------


def evaluate(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    # Queries a system returned nothing for still count, as zero.
    full = {q: (run.get(q) or {"__none__": 0.0}) for q in qrels}
    res = ev.evaluate(full)
    return {
        "ndcg@10": statistics.fmean(r["ndcg_cut_10"] for r in res.values()),
        "recall@100": statistics.fmean(r["recall_100"] for r in res.values()),
    }


def ranked_run(ids: list[str]) -> dict[str, float]:
    """Scores pytrec_eval sorts back into exactly this order (it breaks score ties by id)."""
    return {d: float(len(ids) - i) for i, d in enumerate(ids)}


def pct(values: list[float]) -> dict[str, float]:
    s = sorted(values)

    def q(p: float) -> float:
        return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]

    return {"p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "mean": statistics.fmean(s), "n": len(s)}


# -- systems ---------------------------------------------------------------------


def bm25s_run(
    corpus: dict[str, str], queries: dict[str, str], k: int = 100, *, k1: float = 1.2
) -> dict[str, dict[str, float]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    ids = list(corpus)
    retriever = bm25s.BM25(k1=k1, b=0.75, method="lucene")
    retriever.index(
        bm25s.tokenize([corpus[i] for i in ids], stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    qids = list(queries)
    qtok = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
    docs, scores = retriever.retrieve(qtok, k=min(k, len(ids)), show_progress=False, n_threads=1)
    run: dict[str, dict[str, float]] = {}
    for row, q in enumerate(qids):
        run[q] = {ids[int(d)]: float(s) for d, s in zip(docs[row], scores[row], strict=True) if s > 0}
    return run


def ranklock_run(
    eng: Engine, coll: str, queries: dict[str, str], *, mode: str, ranker: str, k: int, depth: int, **params: Any
) -> tuple[dict[str, dict[str, float]], dict[str, list[float]]]:
    run: dict[str, dict[str, float]] = {}
    lat: dict[str, list[float]] = {"search_ms": [], "sql_ms": [], "embed_ms": []}
    for qid, text in queries.items():
        t0 = time.perf_counter()
        try:
            res = eng.search(coll, text, k=k, mode=mode, depth=depth, lexical_ranker=ranker, **params)
        except Exception as exc:  # a stop-word-only query in lexical mode: no result, counted as zero
            if type(exc).__name__ != "QueryError":
                raise
            run[qid] = {}
            continue
        wall = (time.perf_counter() - t0) * 1000
        emb = res.timings.get("embed_ms", 0.0)
        lat["search_ms"].append(wall - emb)
        lat["sql_ms"].append(res.timings["sql_ms"])
        if mode != "lexical":
            lat["embed_ms"].append(emb)
        run[qid] = ranked_run([h.doc_id for h in res.hits])
    return run, lat


def latency_table(
    eng: Engine,
    coll: str,
    texts: list[str],
    *,
    depth: int,
    rounds: int = 1,
    warm_ts_rank_cd: bool = True,
    ts_rank_cd_queries: int | None = None,
) -> dict[str, Any]:
    """p50/p95/p99 of the lexical branch (both rankers) and of hybrid, interleaved query by query.

    Every query first runs once unmeasured (buffer cache, cached query
    vector); on the 1M-chunk collection ts_rank_cd takes seconds a query, so
    its warm-up can be skipped (its measured times then include cold reads),
    and it can be measured on the first ``ts_rank_cd_queries`` queries only.
    """
    configs = [("lexical", "bm25"), ("lexical", "ts_rank_cd"), ("hybrid", "bm25"), ("hybrid", "ts_rank_cd")]
    out: dict[str, dict[str, list[float]]] = {f"{m}/{r}": {"search_ms": [], "embed_ms": []} for m, r in configs}
    for text in texts:  # warm-up: caches, query vectors
        for m, r in configs:
            if r == "bm25" or warm_ts_rank_cd:
                _timed(eng, coll, text, m, r, depth)
    for _ in range(rounds):
        for i, text in enumerate(texts):
            for m, r in configs:
                if r == "ts_rank_cd" and ts_rank_cd_queries is not None and i >= ts_rank_cd_queries:
                    continue
                got = _timed(eng, coll, text, m, r, depth)
                if got is not None:
                    out[f"{m}/{r}"]["search_ms"].append(got[0])
                    if m == "hybrid":
                        out[f"{m}/{r}"]["embed_ms"].append(got[1])
    table: dict[str, Any] = {}
    for key, lat in out.items():
        table[key] = {"search": pct(lat["search_ms"])}
        if lat["embed_ms"]:
            table[key]["embed"] = pct(lat["embed_ms"])
    for m in ("lexical", "hybrid"):
        a, b = table[f"{m}/bm25"]["search"], table[f"{m}/ts_rank_cd"]["search"]
        table[f"{m}/ratio_bm25_to_ts_rank_cd"] = {p: a[p] / b[p] for p in ("p50", "p95", "p99")}
    return table


def _timed(eng: Engine, coll: str, text: str, mode: str, ranker: str, depth: int) -> tuple[float, float] | None:
    t0 = time.perf_counter()
    try:
        res = eng.search(coll, text, k=10, mode=mode, depth=depth, lexical_ranker=ranker)
    except Exception as exc:
        if type(exc).__name__ != "QueryError":
            raise
        return None
    wall = (time.perf_counter() - t0) * 1000
    emb = res.timings.get("embed_ms", 0.0)
    return wall - emb, emb


# -- main ------------------------------------------------------------------------


def quality(eng: Engine, name: str, *, depth: int) -> dict[str, Any]:
    corpus, queries, qrels = load_beir(name)
    rows: dict[str, Any] = {}
    # bm25s at ranklock's k1 (1.2), and at its own default (1.5), the reference figures.
    for label, k1 in [("bm25s", 1.2), ("bm25s k1=1.5 (its default)", 1.5)]:
        t = time.perf_counter()
        rows[label] = evaluate(qrels, bm25s_run(corpus, queries, k1=k1))
        rows[label]["seconds"] = time.perf_counter() - t
    for label, mode, ranker, params in [
        ("ranklock bm25", "lexical", "bm25", {}),
        ("ranklock bm25 k1=1.5", "lexical", "bm25", {"k1": 1.5}),
        ("ranklock ts_rank_cd", "lexical", "ts_rank_cd", {}),
        ("ranklock hybrid bm25", "hybrid", "bm25", {}),
        ("ranklock hybrid ts_rank_cd", "hybrid", "ts_rank_cd", {}),
    ]:
        k = 100
        run, _ = ranklock_run(
            eng, name, queries, mode=mode, ranker=ranker, k=k, depth=depth if mode == "hybrid" else k, **params
        )
        rows[label] = evaluate(qrels, run)
    return {"queries": len(queries), "documents": len(corpus), "metrics": rows}


def print_quality(name: str, q: dict[str, Any]) -> None:
    print(f"\n{name}: {q['queries']} test queries, {q['documents']} documents")
    print(f"  {'system':<28} {'nDCG@10':>8} {'R@100':>8}")
    for label, m in q["metrics"].items():
        print(f"  {label:<28} {m['ndcg@10']:>8.4f} {m['recall@100']:>8.4f}")


def print_latency(name: str, t: dict[str, Any]) -> None:
    print(f"\n{name} latency (ms; search excludes the query embedding, shown separately)")
    print(f"  {'branch/ranker':<22} {'p50':>8} {'p95':>8} {'p99':>8} {'n':>5}   embed p50/p95")
    for key, v in t.items():
        if "ratio" in key:
            print(f"  {key:<34} p50 {v['p50']:.2f}x  p95 {v['p95']:.2f}x  p99 {v['p99']:.2f}x")
            continue
        s = v["search"]
        e = v.get("embed")
        emb = f"{e['p50']:.2f}/{e['p95']:.2f}" if e else "-"
        print(f"  {key:<22} {s['p50']:>8.2f} {s['p95']:>8.2f} {s['p99']:>8.2f} {s['n']:>5}   {emb}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--datasets", nargs="*", default=["scifact", "nfcorpus"])
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--large", default="large", help="large generated collection ('' to skip)")
    ap.add_argument("--large-queries", type=int, default=50, help="first N of bench/large_corpus.queries()")
    ap.add_argument(
        "--large-ts-queries", type=int, default=None, help="measure ts_rank_cd on the large set for the first N only"
    )
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-latency", action="store_true", help="data sets: quality only")
    ap.add_argument("--out", default=str(OUT / "lexical.json"))
    args = ap.parse_args()

    eng = Engine(home=args.home, log_queries=False)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "depth": args.depth,
        "loadavg_start": list(os.getloadavg()),
        "datasets": {},
    }
    for name in args.datasets:
        entry: dict[str, Any] = {}
        if not args.skip_quality:
            entry["quality"] = quality(eng, name, depth=args.depth)
            print_quality(name, entry["quality"])
        if not args.skip_latency:
            _, queries, _ = load_beir(name)
            entry["latency"] = latency_table(eng, name, list(queries.values()), depth=args.depth)
            print_latency(name, entry["latency"])
        report["datasets"][name] = entry
    if args.large:
        from large_corpus import GeneratedEmbedder
        from large_corpus import queries as large_queries

        emb = GeneratedEmbedder()
        eng.embedders.register(emb)
        info = eng.collection(args.large)
        snap = eng.db.fetchone("SELECT chunk_count FROM ranklock.snapshots WHERE id = %s", [info.active_snapshot_id])
        texts = large_queries(args.large_queries)
        lat = latency_table(
            eng, args.large, texts, depth=args.depth, warm_ts_rank_cd=False, ts_rank_cd_queries=args.large_ts_queries
        )
        print_latency(f"{args.large} ({snap['chunk_count'] if snap else '?'} chunks)", lat)
        report["large"] = {"collection": args.large, "chunks": snap["chunk_count"] if snap else None, "latency": lat}
    # Other processes share these 2 cores; the load average says how much.
    report["loadavg_end"] = list(os.getloadavg())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"\nload average at start {report['loadavg_start']}, at end {report['loadavg_end']}")
    print(f"wrote {args.out}")
    eng.close()


if __name__ == "__main__":
    main()
