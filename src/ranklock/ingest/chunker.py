"""A deterministic token-window chunker.

Windows are counted in the embedder's own tokens (a window only means
something in the model's units), step ``window - overlap``.  Offsets are
character positions in the normalised document text (title, blank line,
body), so a chunk can always be cut back out of the stored document.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..embed.base import Tokenizer

__all__ = ["Chunk", "chunk_text", "document_text"]


@dataclass(frozen=True)
class Chunk:
    number: int
    start: int
    end: int
    text: str


def document_text(title: str, body: str) -> str:
    """The text that is chunked, indexed and embedded: the title heads the first chunk."""
    return f"{title}\n\n{body}" if title else body


def chunk_text(text: str, tokenizer: Tokenizer, window: int, overlap: int) -> list[Chunk]:
    spans = tokenizer.offsets(text)
    if not spans:
        return [Chunk(0, 0, len(text), text)] if text.strip() else []
    step = window - overlap
    chunks: list[Chunk] = []
    start_tok = 0
    while True:
        end_tok = min(start_tok + window, len(spans))
        a, b = spans[start_tok][0], spans[end_tok - 1][1]
        chunks.append(Chunk(len(chunks), a, b, text[a:b]))
        if end_tok >= len(spans):
            break
        start_tok += step
    return chunks
