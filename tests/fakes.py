"""Small deterministic stand-ins for the embedding model, for tests that need the real
pipeline (chunking, COPY, indexes, SQL) around vectors but not their meaning."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ranklock import Engine
from ranklock.embed.base import normalize_rows


class SpaceTok:
    id = "space"

    def offsets(self, text: str) -> list[tuple[int, int]]:
        out, pos = [], 0
        for w in text.split(" "):
            if w:
                out.append((pos, pos + len(w)))
            pos += len(w) + 1
        return out


class HashEmbedder:
    """Small deterministic vectors from each text's sha256: fast, and the real pipeline around it."""

    id = "test:hash-8"
    dim = 8
    tokenizer = SpaceTok()

    def __init__(self, id: str = "test:hash-8") -> None:
        self.id = id
        self.sha256 = hashlib.sha256(id.encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], dtype=np.uint8) for t in texts]
        return normalize_rows(np.asarray(rows, dtype=np.float32) - 127.5)


def use_hash_embedder(engine: Engine, id: str = "test:hash-8") -> str:
    """Register a HashEmbedder on ``engine`` under ``id``; pass the id as a collection's embedder."""
    emb = HashEmbedder(id)
    engine._embedders[emb.id] = emb
    return emb.id


def resolve_hash_embedder_by_id(monkeypatch: Any) -> None:
    """A CLI command builds its own Engine: let it resolve the HashEmbedder's id to a HashEmbedder."""
    import ranklock.engine

    real = ranklock.engine.resolve_embedder
    monkeypatch.setattr(
        ranklock.engine, "resolve_embedder", lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec)
    )


class BagOfWordsEmbedder:
    """Deterministic vectors that carry some meaning: each content word (case- and accent-folded, stop words
    dropped, stemmed by ranklock.ask.terms.stem) hashed to one of 64 dimensions and counted, then L2-normalised.  Texts sharing words are close; for tests of rules that score by
    meaning (ranklock.ask's extractive generator), where HashEmbedder's vectors would be noise."""

    dim = 64
    tokenizer = SpaceTok()

    def __init__(self, id: str = "test:bow-64") -> None:
        self.id = id
        self.sha256 = hashlib.sha256(id.encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from ranklock.ask.terms import STOP_WORDS, stem, terms

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for t in terms(text):
                if t not in STOP_WORDS:
                    out[row, hashlib.sha256(stem(t).encode()).digest()[0] % self.dim] += 1.0
        return normalize_rows(out)


def use_bow_embedder(engine: Engine, id: str = "test:bow-64") -> str:
    """Register a BagOfWordsEmbedder on ``engine`` under ``id``; pass the id as a collection's embedder."""
    emb = BagOfWordsEmbedder(id)
    engine._embedders[emb.id] = emb
    return emb.id
