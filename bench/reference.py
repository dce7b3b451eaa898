"""SciFact latency against an in-memory reference, side by side in one process (issue 49).

The reference is what a search costs with nothing between the query and the numbers: ``bm25s``
(Lucene BM25, its own English analysis) answering a top 10 from an index held in memory, and for
hybrid the same BM25 top 40 with an exact cosine top 40 over the documents' vectors (numpy, float32,
one BLAS thread) fused by RRF (k = 60) into a top 10.  The query's vector is precomputed for the
reference (it is ranklock's own, from the embedding cache); its tokenization is timed.

ranklock runs ``Engine.search`` on the ingested ``scifact`` collection (lexical; hybrid, depth 40),
query vectors from the embedding cache, with the query log off (as the reference logs nothing) and,
in a second column, on.  Every query runs once untimed first; then ``--rounds`` timed passes, the
systems interleaved query by query so neither gets a quieter moment.

    python bench/reference.py --home /work/bench-identical              # 300 test queries, 3 rounds
    python bench/reference.py --home /work/bench-identical --queries 100 --rounds 2

Prints a table (p50 / p95 ms and the ratio to the reference) and writes bench/out/reference.json.
Only meaningful on a quiet machine: the load average is printed and recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# One BLAS thread for the reference (set before numpy loads): ranklock's exact scan runs on one core too.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("RANKLOCK_EMBED_SERVICE", "0")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from peers import load_corpus_vectors, load_queries  # noqa: E402
from side_by_side import queries as judged_queries  # noqa: E402

DEPTH = 40
K = 10
RRF_K = 60


class Reference:
    """bm25s over the documents' text and exact cosine over their vectors, both in memory."""

    def __init__(self, doc_ids: list[str], doc_text: list[str], doc_vec: np.ndarray) -> None:
        import bm25s
        import Stemmer

        self.doc_ids = doc_ids
        self.stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(doc_text, stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.bm25 = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        self.bm25.index(tokens, show_progress=False)
        v = doc_vec.astype(np.float32)
        self.vec = v / np.linalg.norm(v, axis=1, keepdims=True)

    def _lexical(self, text: str, k: int) -> list[int]:
        import bm25s

        toks = bm25s.tokenize([text], stopwords="en", stemmer=self.stemmer, show_progress=False)
        if not toks.ids or not toks.ids[0]:
            return []
        docs, _scores = self.bm25.retrieve(toks, k=k, show_progress=False, n_threads=1)
        return [int(d) for d in docs[0]]

    def lexical(self, text: str) -> list[str]:
        return [self.doc_ids[i] for i in self._lexical(text, K)]

    def hybrid(self, text: str, qvec: np.ndarray) -> list[str]:
        lex = self._lexical(text, DEPTH)
        s = self.vec @ qvec
        top = np.argpartition(-s, DEPTH)[:DEPTH]
        sem = top[np.lexsort((top, -s[top]))]
        fused: dict[int, float] = {}
        for ranking in (lex, sem):
            for rank, d in enumerate(ranking, start=1):
                fused[int(d)] = fused.get(int(d), 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(fused.items(), key=lambda p: (-p[1], self.doc_ids[p[0]]))[:K]
        return [self.doc_ids[d] for d, _ in best]


def percentiles(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
        "n": len(ordered),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "reference.json")
    args = ap.parse_args()

    from ranklock import Engine

    texts = judged_queries(args.queries)
    quiet = Engine(home=args.home, log_queries=False)
    logged = Engine(home=args.home, log_queries=True)
    corpus = load_corpus_vectors(quiet, args.collection, "scifact")
    qs = load_queries(quiet, args.collection, dict(enumerate(texts)))
    qvecs = {t: v / np.linalg.norm(v) for t, v in zip(qs.text, qs.vec, strict=True)}
    ref = Reference(corpus.doc_ids, corpus.doc_text, corpus.doc_vec)

    systems: dict[str, Any] = {
        "reference lexical": lambda t: ref.lexical(t),
        "reference hybrid": lambda t: ref.hybrid(t, qvecs[t]),
        "ranklock lexical": lambda t: quiet.search(args.collection, t, k=K, mode="lexical"),
        "ranklock hybrid": lambda t: quiet.search(args.collection, t, k=K, mode="hybrid"),
        "ranklock lexical, log on": lambda t: logged.search(args.collection, t, k=K, mode="lexical"),
        "ranklock hybrid, log on": lambda t: logged.search(args.collection, t, k=K, mode="hybrid"),
    }
    for t in texts:  # untimed: every query vector cached, every process memo filled, pages warm
        for run in systems.values():
            run(t)
    ms: dict[str, list[float]] = {name: [] for name in systems}
    loads = []
    for _ in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for t in texts:
            for name, run in systems.items():
                t0 = time.perf_counter()
                run(t)
                ms[name].append((time.perf_counter() - t0) * 1000)
    quiet.close()
    logged.close()
    table = {name: percentiles(v) for name, v in ms.items()}
    base = {"lexical": table["reference lexical"], "hybrid": table["reference hybrid"]}
    print(f"{'system':28s} {'p50 ms':>8s} {'p95 ms':>8s} {'x ref p50':>10s} {'x ref p95':>10s}")
    for name, row in table.items():
        ref_row = base["hybrid" if "hybrid" in name else "lexical"]
        print(
            f"{name:28s} {row['p50']:8.2f} {row['p95']:8.2f} "
            f"{row['p50'] / ref_row['p50']:10.1f} {row['p95'] / ref_row['p95']:10.1f}"
        )
    print(f"load average during the rounds: {', '.join(f'{x:.2f}' for x in loads)}")
    report = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": loads,
        "queries": len(texts),
        "rounds": args.rounds,
        "table": table,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
