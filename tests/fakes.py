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
    engine.embedders.register(emb)
    return emb.id


def resolve_hash_embedder_by_id(monkeypatch: Any) -> None:
    """A CLI command builds its own Engine: let it resolve the HashEmbedder's id to a HashEmbedder."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
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
    engine.embedders.register(emb)
    return emb.id


class HashEmbeddingServer:
    """A local OpenAI-compatible ``/embeddings`` endpoint with HashEmbedder's vectors, for a ``ranklock``
    process a test starts (it cannot be handed a Python embedder): ``--embedder`` :attr:`spec`.

    ``delay`` seconds before each answer; :attr:`asked` is set at the first request (a test that must
    interrupt an ingest while it embeds waits for it)."""

    def __init__(self, delay: float = 0.0) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        owner = self
        self.delay = delay
        self.asked = threading.Event()
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                import json
                import time

                texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
                owner.requests += 1
                owner.asked.set()
                time.sleep(owner.delay)
                rows = HashEmbedder().embed(texts)
                payload = json.dumps(
                    {"data": [{"index": i, "embedding": [float(x) for x in r]} for i, r in enumerate(rows)]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def spec(self) -> str:
        return f"openai:hash@http://127.0.0.1:{self.server.server_address[1]}/v1#{HashEmbedder.dim}"

    def __enter__(self) -> HashEmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
