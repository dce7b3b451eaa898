"""The embedder protocol.

An embedder turns texts into L2-normalised float32 vectors and tells what it
is: an id, the sha256 of its weights (so vectors of two models are never
compared) and its dimension.  It also owns the tokenizer the chunker counts
with, because a chunk window only means something in the model's tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "Tokenizer", "normalize_rows", "token_capacity", "vector_digest"]

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Tokenizer(Protocol):
    id: str

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the tokens of ``text`` (no special tokens)."""
        ...


def token_capacity(tokenizer: Tokenizer) -> int | None:
    """How many of a text's own tokens the model reads, or None when the tokenizer does not say.

    A tokenizer may carry ``max_tokens`` (the model's input limit less its
    special tokens); tokenizers of endpoints and tests need not.

    >>> token_capacity(default_embedder().tokenizer)  # doctest: +SKIP
    254
    """
    cap = getattr(tokenizer, "max_tokens", None)
    return cap if isinstance(cap, int) and cap > 0 else None


@runtime_checkable
class Embedder(Protocol):
    id: str
    dim: int

    @property
    def sha256(self) -> str: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Return one L2-normalised float32 row per text."""
        ...


def normalize_rows(m: npt.NDArray[np.floating]) -> Matrix:
    """L2-normalise each row once, in float32, so stored vectors are unit length."""
    m32 = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m32, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(m32 / norms, dtype=np.float32)


def vector_digest(v: npt.NDArray[np.float32]) -> str:
    """sha256 of the little-endian float32 bytes: a silent change in a model shows up here."""
    return hashlib.sha256(np.asarray(v, dtype="<f4").tobytes()).hexdigest()


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
