"""An OpenAI-compatible ``/embeddings`` endpoint as an embedder.

The endpoint's weights cannot be hashed from here, so the checksum is the
sha256 of ``model@base_url`` plus an optional user-supplied revision
(``RANKLOCK_EMBEDDER_REVISION``): change the revision when the served model
changes, and ranklock will refuse to compare old and new vectors.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

import httpx
import numpy as np

from ..errors import EmbedderError
from ..settings import env
from .base import Matrix, normalize_rows

__all__ = ["OpenAIEmbedder", "WhitespaceTokenizer"]


class WhitespaceTokenizer:
    """Counts whitespace-separated words, for endpoints whose tokenizer is not local."""

    id = "whitespace"

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


class OpenAIEmbedder:
    """Embeds through ``POST {base_url}/embeddings`` (httpx; one client per call, nothing left open)."""

    #: Seconds for connecting and for each read.
    timeout = 60.0

    def __init__(self, model: str, base_url: str, dim: int, api_key: str | None = None) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.dim = dim
        self.api_key = api_key if api_key is not None else (env("OPENAI_API_KEY") or None)
        self.id = f"openai:{model}@{self.base_url}"
        revision = env("RANKLOCK_EMBEDDER_REVISION")
        self.sha256 = hashlib.sha256(f"{self.id}#{revision}".encode()).hexdigest()
        self.tokenizer = WhitespaceTokenizer()

    @classmethod
    def from_spec(cls, spec: str) -> OpenAIEmbedder:
        m = re.fullmatch(r"openai:([^@]+)@(\S+?)(?:#(\d+))?", spec)
        if not m:
            raise EmbedderError(
                f"bad embedder spec {spec!r}: write openai:<model>@<base_url>#<dimension>, "
                "e.g. openai:text-embedding-3-small@http://localhost:8080/v1#1536"
            )
        if m.group(3) is None:
            raise EmbedderError(f"embedder spec {spec!r} lacks the dimension: append #<dimension>.")
        return cls(m.group(1), m.group(2), int(m.group(3)))

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # The body is serialised here, not by httpx's json=, so the bytes sent stay what they were.
        body = json.dumps({"model": self.model, "input": list(texts)}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            with httpx.Client(timeout=self.timeout) as client:
                resp = client.post(f"{self.base_url}/embeddings", content=body, headers=headers)
                resp.raise_for_status()  # urllib raised on 4xx/5xx; httpx must be asked to
                payload = json.loads(resp.content)
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            raise EmbedderError(f"embedding endpoint {self.base_url} failed: {exc}; check the URL and key.") from exc
        rows = sorted(payload.get("data", []), key=lambda d: d["index"])
        m = np.array([r["embedding"] for r in rows], dtype=np.float32)
        if m.shape != (len(texts), self.dim):
            raise EmbedderError(
                f"endpoint {self.base_url} returned vectors of shape {m.shape}, expected "
                f"({len(texts)}, {self.dim}); fix the #dimension in the embedder spec."
            )
        return normalize_rows(m)
