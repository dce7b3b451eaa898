"""Build a large generated collection (default 1,000,000 chunks) for latency benchmarks.

Text is generated (Zipf-distributed pseudo-words plus a few identifiers) and
vectors come from :class:`GeneratedEmbedder`: clustered, deterministic,
384-dimensional, a stand-in for a real model where embedding a million texts on
2 cores would take hours.  Quality benchmarks never use it; latency and
filtered-recall benchmarks do.  Everything else is the real pipeline:
``Engine.ingest`` chunks, COPYs, builds the tsvector, GIN and HNSW indexes.

Typed fields let filters hit exact selectivities: ``bucket`` is uniform on
0..9999, so ``bucket < 5000`` keeps 50%, ``bucket < 1`` keeps 0.01%.

    python bench/large_corpus.py --docs 1000000 --home /work/bench-home
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ranklock import Document, Engine
from ranklock.embed.base import normalize_rows

COLLECTION = "large"
DIM = 384
FIELDS = ["bucket:int!", "category:keyword!", "tags:keyword[]", "year:int!", "price:float"]


class WhitespaceTok:
    id = "whitespace"

    def offsets(self, text: str) -> list[tuple[int, int]]:
        out, pos = [], 0
        for w in text.split(" "):
            out.append((pos, pos + len(w)))
            pos += len(w) + 1
        return out


class GeneratedEmbedder:
    """Deterministic clustered vectors: a text's vector depends on its sha256 alone."""

    id = "generated:clustered-384"
    dim = DIM
    tokenizer = WhitespaceTok()

    def __init__(self, clusters: int = 256, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.centroids = rng.standard_normal((clusters, DIM)).astype(np.float32)
        self.sha256 = hashlib.sha256(f"{self.id}#{clusters}#{seed}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            h = hashlib.sha256(t.encode()).digest()
            rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
            c = int.from_bytes(h[8:10], "little") % len(self.centroids)
            out[i] = self.centroids[c] + 0.6 * rng.standard_normal(DIM).astype(np.float32)
        return normalize_rows(out)


def vocabulary(n: int = 30000, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    syl = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "dor", "fen", "gal", "hor", "jin"]
    words: set[str] = set()
    while len(words) < n:
        k = int(rng.integers(2, 5))
        words.add("".join(syl[int(j)] for j in rng.integers(0, len(syl), k)))
    return sorted(words)


def generate(n_docs: int, seed: int = 42) -> list[Document]:
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks**1.07
    p /= p.sum()
    cats = [f"cat{i:02d}" for i in range(20)]
    tags = [f"tag{i:02d}" for i in range(50)]
    docs = []
    lengths = rng.integers(20, 60, n_docs)
    words = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    buckets = rng.integers(0, 10000, n_docs)
    pos = 0
    for i in range(n_docs):
        w = [vocab[j] for j in words[pos : pos + lengths[i]]]
        pos += lengths[i]
        if i % 1000 == 0:
            w.append(f"XJ-{i // 1000}")
        docs.append(
            Document(
                doc_id=f"d{i:07d}",
                title="",
                body=" ".join(w),
                metadata={
                    "bucket": int(buckets[i]),
                    "category": cats[i % 20],
                    "tags": sorted({tags[(i * 7) % 50], tags[(i * 13 + 5) % 50]}),
                    "year": 2000 + i % 26,
                    "price": float((i * 37) % 1000) / 10.0,
                },
            )
        )
    return docs


def queries(n: int = 200, seed: int = 99) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks**1.07
    p /= p.sum()
    return [" ".join(vocab[j] for j in rng.choice(len(vocab), size=int(rng.integers(2, 6)), p=p)) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--collection", default=COLLECTION)
    # exact: no vector index, for lexical benchmarks (HNSW over 1M vectors is most of a 50-minute build).
    ap.add_argument("--index", choices=("hnsw", "ivfflat", "exact"), default="hnsw")
    args = ap.parse_args()
    t0 = time.perf_counter()
    docs = generate(args.docs)
    print(f"generated {len(docs)} documents in {time.perf_counter() - t0:.1f}s", flush=True)
    eng = Engine(home=args.home, embedder=None, log_queries=False)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)  # register under its id so the collection resolves it

    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] > 30 or done == total:
            last[0] = now
            print(f"  {stage}: {done}/{total} ({now - t0:.0f}s)", flush=True)

    report = eng.ingest(
        args.collection,
        docs,
        replace=True,
        progress=progress,
        create={"fields": FIELDS, "index": args.index, "embedder": emb.id},
    )
    out = {
        "collection": args.collection,
        "documents": report.documents,
        "chunks": report.chunks,
        "seconds": report.seconds,
        "snapshot_id": report.snapshot_id,
    }
    print(json.dumps(out, indent=2))
    Path(args.home, f"{args.collection}-build.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
