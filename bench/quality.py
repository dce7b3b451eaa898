"""Retrieval quality on BEIR collections: nDCG@10 and recall@100 per mode.

Ingests SciFact and NFCorpus from ../shared/data (real text, real
all-MiniLM-L6-v2 embeddings; the embedding cache makes re-runs cheap), runs
every test query in lexical, semantic and hybrid mode through
``Engine.search``, and scores the runs with trec_eval (pytrec_eval).  Prints a
table and writes JSON.

    python bench/quality.py [--home /work/bench-home] [--datasets scifact,nfcorpus] [--ranker bm25]
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytrec_eval

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ranklock import Engine, NotFound

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MODES = ("lexical", "semantic", "hybrid")


def load_queries(ds: Path) -> dict[str, str]:
    out = {}
    with open(ds / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            out[str(rec["_id"])] = rec["text"]
    return out


def load_qrels(ds: Path, split: str = "test") -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(ds / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)
        for qid, did, score in reader:
            qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def ensure_ingested(eng: Engine, name: str, path: Path) -> dict[str, Any]:
    try:
        info = eng.collection(name)
        if info.active_snapshot_id is None:
            raise NotFound(name)
    except NotFound:
        t = time.perf_counter()
        eng.ingest(name, path)
        print(f"ingested {name} in {time.perf_counter() - t:.0f}s", flush=True)
        info = eng.collection(name)
    row = eng.db.fetchone(
        "SELECT doc_count, chunk_count, stats FROM ranklock.snapshots WHERE id = %s", [info.active_snapshot_id]
    )
    assert row is not None
    return {
        "snapshot_id": info.active_snapshot_id,
        "documents": row["doc_count"],
        "chunks": row["chunk_count"],
        "build": row["stats"],
    }


def evaluate(eng: Engine, name: str, ds: Path, ranker: str | None, depth: int) -> dict[str, Any]:
    queries = load_queries(ds)
    qrels = load_qrels(ds)
    qids = sorted(q for q in qrels if q in queries)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "recip_rank"})
    out: dict[str, Any] = {"queries": len(qids)}
    for mode in MODES:
        run: dict[str, dict[str, float]] = {}
        lat = []
        for qid in qids:
            t = time.perf_counter()
            res = eng.search(
                name,
                queries[qid],
                k=100,
                mode=mode,
                depth=max(depth, 100) if mode != "hybrid" else depth,
                lexical_ranker=ranker,
            )
            lat.append((time.perf_counter() - t) * 1000)
            # trec_eval sorts by score; give it strictly decreasing scores that
            # encode our rank so its own tie-breaking can never reorder ours.
            run[qid] = {h.doc_id: float(1000 - h.rank) for h in res.hits}
        per_q = evaluator.evaluate(run)
        n = len(per_q)
        out[mode] = {
            "ndcg@10": sum(v["ndcg_cut_10"] for v in per_q.values()) / n,
            "recall@100": sum(v["recall_100"] for v in per_q.values()) / n,
            "mrr": sum(v["recip_rank"] for v in per_q.values()) / n,
            "params": res.params,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="nDCG@10 / recall@100 on BEIR sets")
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--datasets", default="scifact,nfcorpus")
    ap.add_argument("--ranker", default=None, help="lexical ranker (default: the engine default)")
    ap.add_argument("--depth", type=int, default=40, help="hybrid branch depth")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "quality.json"))
    args = ap.parse_args()
    eng = Engine(home=args.home, log_queries=False)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, {platform.python_version()}",
        "command": " ".join(["python", *sys.argv]),
        "datasets": {},
    }
    for name in args.datasets.split(","):
        ds = DATA / name
        info = ensure_ingested(eng, name, ds)
        res = evaluate(eng, name, ds, args.ranker, args.depth)
        results["datasets"][name] = {"collection": info, **res}
    print(f"\n{'dataset':<10} {'mode':<9} {'nDCG@10':>8} {'R@100':>7} {'MRR':>7}")
    for name, r in results["datasets"].items():
        for mode in MODES:
            m = r[mode]
            print(f"{name:<10} {mode:<9} {m['ndcg@10']:8.4f} {m['recall@100']:7.4f} {m['mrr']:7.4f}")
    for name, r in results["datasets"].items():
        b = r["collection"]["build"]
        s = b.get("seconds", {})
        chunks = r["collection"]["chunks"]
        emb = s.get("embed", 0.0)
        dbt = s.get("write", 0.0) + s.get("index", 0.0) + s.get("embed_cache_write", 0.0)
        if b.get("embedded"):
            print(
                f"{name}: ingest {chunks} chunks; embedding {b['embedded']} texts in {emb:.0f}s "
                f"({b['embedded'] / max(emb, 1e-9):.1f}/s), database {dbt:.1f}s ({chunks / max(dbt, 1e-9):.0f} chunks/s)"
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
