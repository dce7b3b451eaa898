"""A deterministic token-window chunker that cuts between words, at sentence ends when it can.

Windows are counted in the embedder's own tokens (a window only means
something in the model's units): a chunk holds at most ``window`` tokens and
consecutive chunks share at most ``overlap``.  Offsets are character
positions in the normalised document text (title, blank line, body), so a
chunk is always ``text[start:end]``.

Where a window is cut follows a pinned rule set, :data:`BOUNDARY_RULES`,
recorded in every snapshot manifest (a change of rules shows up as a
manifest difference).  It depends on nothing but the text and the token
spans: no locale, no language model.

``ranklock-boundaries/1``
    * A *word boundary* lies before token ``i`` when ``i`` is the first token
      or the characters between token ``i-1`` and token ``i`` contain
      whitespace (``str.isspace``: Unicode's White_Space, the same on every
      host).  Word pieces of one word and punctuation attached to a word are
      never separated.
    * A *sentence boundary* is a word boundary that is either a paragraph
      break (the gap holds two or more line breaks), or follows one of
      ``. ! ? … 。 ！ ？`` (then optionally closing quotes and brackets) and
      precedes a character that is not a lowercase letter (so "e.g. the"
      is not a sentence end).
    * A chunk ends at the last sentence boundary that keeps at least half
      the window, else at the last word boundary, else (one "word" longer
      than the window, e.g. a long URL or unspaced script) after
      ``window`` tokens.
    * The next chunk starts at the first sentence boundary in the last
      ``overlap`` tokens of the previous chunk, else the first word
      boundary there, else (no boundary there) exactly ``overlap`` tokens
      back, and always at least one token after the previous start.  The
      last chunk ends with the last token.

So every token of the document is in some chunk (each chunk starts at or
before the previous one's end), and no chunk starts or ends inside a word
unless that word alone is longer than the window.  A chunk cut inside a
word is re-tokenized on its own and shortened until it fits the window,
since word pieces can tokenize differently once separated from their word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..embed.base import Tokenizer

__all__ = ["BOUNDARY_RULES", "Chunk", "chunk_text", "document_text"]

#: Version of the cut rules (see the module docstring); recorded in snapshot manifests.
BOUNDARY_RULES = "ranklock-boundaries/1"

_WORD, _SENTENCE = 1, 2
#: A sentence-final mark, then optional closing quotes/brackets, at the end of the text before a gap.
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019\u00bb)\]}]*\Z")
#: ``\s`` on a str pattern is exactly ``str.isspace``: Unicode White_Space, locale-independent.
_SPACE = re.compile(r"\s")
_PARAGRAPH = re.compile(r"(?:\r\n|\n|\r)[^\S\r\n]*(?:\r\n|\n|\r)")


@dataclass(frozen=True)
class Chunk:
    number: int
    start: int
    end: int
    text: str


def document_text(title: str, body: str) -> str:
    """The text that is chunked, indexed and embedded: the title heads the first chunk."""
    return f"{title}\n\n{body}" if title else body


def boundaries(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """For each token, the strength of the boundary before it: 0 none, 1 word, 2 sentence."""
    out = [_SENTENCE] * min(1, len(spans))
    for i in range(1, len(spans)):
        prev_end, start = spans[i - 1][1], spans[i][0]
        # (Searched in place, without slicing: this runs once per token.)
        if prev_end >= start or not _SPACE.search(text, prev_end, start):
            out.append(0)
        elif _PARAGRAPH.search(text, prev_end, start) or (
            _SENTENCE_END.search(text, max(0, prev_end - 8), prev_end) and not text[start : start + 1].islower()
        ):
            out.append(_SENTENCE)
        else:
            out.append(_WORD)
    return out


def _last(strength: list[int], lo: int, hi: int, at_least: int) -> int | None:
    """The last token index in [lo, hi] with a boundary of ``at_least`` before it."""
    for i in range(hi, lo - 1, -1):
        if strength[i] >= at_least:
            return i
    return None


def _first(strength: list[int], lo: int, hi: int, at_least: int) -> int | None:
    """The first token index in [lo, hi] with a boundary of ``at_least`` before it."""
    for i in range(lo, hi + 1):
        if strength[i] >= at_least:
            return i
    return None


def chunk_text(text: str, tokenizer: Tokenizer, window: int, overlap: int) -> list[Chunk]:
    """Cut ``text`` into chunks of at most ``window`` tokens by :data:`BOUNDARY_RULES`.

    >>> [c.text for c in chunk_text("One two. Three four.", SpaceTok(), window=3, overlap=1)]  # doctest: +SKIP
    ['One two.', 'two. Three four.']
    """
    spans = tokenizer.offsets(text)
    if not spans:
        return [Chunk(0, 0, len(text), text)] if text.strip() else []
    n = len(spans)
    strength = boundaries(text, spans)
    chunks: list[Chunk] = []
    start = 0
    while True:
        end = min(start + window, n)  # exclusive token index
        if end < n:
            # Cut before token `end`: a boundary in (start, end], sentence first if the chunk keeps half its window.
            cut = _last(strength, start + max(1, window // 2), end, _SENTENCE)
            if cut is None:
                cut = _last(strength, start + 1, end, _WORD)
            end = end if cut is None else cut
        a, b = spans[start][0], spans[end - 1][1]
        if strength[start] == 0 or (end < n and strength[end] == 0):
            # A word split in two: its pieces may tokenize differently alone.
            while end - start > 1 and len(tokenizer.offsets(text[a:b])) > window:
                end -= 1
                b = spans[end - 1][1]
        chunks.append(Chunk(len(chunks), a, b, text[a:b]))
        if end >= n:
            break
        lo = max(start + 1, end - overlap)
        nxt = _first(strength, lo, end, _SENTENCE)
        if nxt is None or (nxt == end and overlap > 0):
            word = _first(strength, lo, end, _WORD)
            nxt = word if word is not None else lo
        start = nxt
    return chunks
