"""Embedders: the protocol and its implementations."""

from __future__ import annotations

from pathlib import Path

from ..errors import EmbedderError
from .base import Embedder, Tokenizer, normalize_rows, vector_digest

__all__ = ["Embedder", "Tokenizer", "home_embedder", "normalize_rows", "resolve_embedder", "vector_digest"]


def home_embedder(emb: Embedder, home: Path, *, served: bool, idle_s: float) -> Embedder:
    """``emb`` (:func:`resolve_embedder`'s) as a process working in the data directory ``home`` runs it.

    ``served`` (``RANKLOCK_EMBED_SERVICE``, on by default; ``Engine(embed_service=False)``): a local
    sentence-transformers model runs in the home's embedding service (ranklock.embed.service), started
    by the first process that needs it and shared by every CLI command, script, server and MCP
    server of the home, so the model is in memory once; the vectors are the bits this process would
    compute (ranklock.embed.served).  Otherwise, and for an HTTP embedder, it runs here.
    """
    if not served:
        return emb
    from .served import serve_through

    return serve_through(emb, home, idle_s=idle_s)


def resolve_embedder(spec: str | None) -> Embedder:
    """Build an embedder from a spec string.

    ``None`` or ``"default"`` or the MiniLM id: the bundled all-MiniLM-L6-v2.
    A local directory path: any sentence-transformers model.
    ``openai:<model>@<base_url>``: an OpenAI-compatible HTTP endpoint.
    """
    # An HTTP embedder needs none of ranklock[models]: resolve it before touching .sentence.
    if spec is not None and spec.startswith("openai:"):
        from .http import OpenAIEmbedder

        return OpenAIEmbedder.from_spec(spec)
    from ..settings import DEFAULT_EMBEDDER
    from .sentence import MINILM_ID, SentenceTransformerEmbedder, default_embedder

    if spec in (None, "", "default", MINILM_ID, DEFAULT_EMBEDDER):
        return default_embedder()
    assert spec is not None
    import os

    if os.path.isdir(spec):
        return SentenceTransformerEmbedder(spec)
    raise EmbedderError(
        f"unknown embedder {spec!r}: use 'default' (all-MiniLM-L6-v2), a local sentence-transformers "
        "model directory, or 'openai:<model>@<base_url>' for an OpenAI-compatible endpoint."
    )
