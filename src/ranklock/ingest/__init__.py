"""Loading, normalising, hashing and chunking documents."""

from __future__ import annotations

from .chunker import Chunk, chunk_text
from .loaders import Document, load_corpus
from .normalize import NORMALIZATION, content_hash, normalize

__all__ = ["NORMALIZATION", "Chunk", "Document", "chunk_text", "content_hash", "load_corpus", "normalize"]
