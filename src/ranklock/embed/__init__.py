"""Embedders: the protocol and its implementations."""

from __future__ import annotations

from ..errors import EmbedderError
from .base import Embedder, Tokenizer, normalize_rows, vector_digest

__all__ = ["Embedder", "Tokenizer", "normalize_rows", "resolve_embedder", "vector_digest"]


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
