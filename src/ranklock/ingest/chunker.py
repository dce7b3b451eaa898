"""A deterministic token-window chunker that cuts between whole words, so that some vector reads every token.

Windows are counted in the embedder's own tokens (a window only means
something in the model's units): a chunk holds at most ``window`` tokens and
consecutive chunks share at least ``overlap``.  Offsets are character
positions in the normalised document text (title, blank line, body), so a
chunk is always ``text[start:end]``.

Where a window is cut follows a pinned rule set, :data:`BOUNDARY_RULES`,
recorded in every snapshot manifest (a change of rules shows up as a
manifest difference; a snapshot keeps the id it was built with).  It depends
on nothing but the text and the token spans: no locale, no language model.

``ranklock-boundaries/4`` (``/3`` with one fix: a chunk shortened to fit the
model, below, then ends at its last word boundary, never inside a word that
fits the window; hypothesis found a chunk starting inside a word longer than
the window and ending inside a short one)
    * The window is the collection's ``window``: what BM25 indexes and a hit
      shows.  When the tokenizer states what the model reads of one text
      (``max_tokens``: the input limit less the special tokens;
      all-MiniLM-L6-v2 reads 256 - 2 = 254), the window is lowered to at
      most ``max_tokens + overlap``, and the *last* chunk of a document to
      at most ``max_tokens``.  So every token is read by some chunk's vector:
      the tokens of a chunk past the model's limit (at most ``overlap``)
      are also among the first tokens of the next chunk, and nothing
      follows the last chunk, so it is cut where the model stops reading.
      (Version 2 lowered every window to ``max_tokens``: each vector read
      its whole chunk, but every lexical unit lost the model's shortfall,
      which cost SciFact lexical nDCG@10 0.007, p = 0.003; see
      docs/benchmarks.md.)  The overlap is lowered only if it would no
      longer be smaller than the window, or than what the model reads (the
      last chunk would then end inside the one before it).
    * A *word boundary* lies before token ``i`` when ``i`` is the first token
      or the characters between token ``i-1`` and token ``i`` contain
      whitespace (``str.isspace``: Unicode's White_Space, the same on every
      host).  Word pieces of one word and punctuation attached to a word are
      never separated.
    * A *sentence boundary* is a word boundary that is either a paragraph
      break (the gap holds two or more line breaks), or follows one of
      ``. ! ? … 。 ！ ？`` (then optionally closing quotes and brackets) and
      precedes a character that is not a lowercase letter (so "e.g. the"
      is not a sentence end).  The cut rules do not use them: see below.
    * A chunk ends at the last word boundary that keeps it within the
      window (the last chunk: within the model's limit), else (one "word"
      longer than that, e.g. a long URL or unspaced script) after that
      many tokens.
    * The next chunk starts at the last word boundary at or before
      ``overlap`` tokens back from the previous chunk's end, so consecutive
      chunks share at least ``overlap`` tokens and a seam never loses
      context; else (a single word reaches back past that point) at the
      first word boundary after it; else (no boundary at all) exactly
      ``overlap`` tokens back.  It is always at least one token after the
      previous start.  The last chunk ends with the last token.

Version 1 (``ranklock-boundaries/1``) cut at a sentence end when one kept
half the window and started the next chunk at the first boundary *within*
the overlap: its chunks were shorter and shared less, and nDCG@10 dropped on
SciFact and NFCorpus in every mode (docs/benchmarks.md).  Whole words keep
every lexeme intact; full windows and full overlaps keep what a mid-word
window had.

So every token of the document is in some chunk (each chunk starts at or
before the previous one's end), and no chunk starts or ends inside a word
unless that word alone is longer than the window.  A chunk cut inside a
word is re-tokenized on its own and shortened until it fits the window,
since word pieces can tokenize differently once separated from their word,
and then ends at its last word boundary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..embed.base import Tokenizer, token_capacity

__all__ = ["BOUNDARY_RULES", "Chunk", "chunk_text", "document_text", "effective_window", "last_window"]

#: Version of the cut rules (see the module docstring); recorded in snapshot manifests.
BOUNDARY_RULES = "ranklock-boundaries/4"

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


def _next_start(strength: list[int], start: int, end: int, window: int, overlap: int) -> int:
    """Where the chunk after ``[start, end)`` starts (token index; ``end`` < the token count)."""
    back = max(start + 1, end - overlap)
    # At or before `overlap` tokens back, so consecutive chunks share at least `overlap` tokens.
    nxt = _last(strength, start + 1, back, _WORD)
    if nxt is None:
        # One word spans that point: start after it (less overlap), or mid-word if it never ends.
        nxt = _first(strength, back + 1, end, _WORD)
        if nxt is None:
            return back
    if strength[end]:
        # The word at `end` must fit whole in the next chunk, or that chunk would end where this one does:
        # a word longer than `window - overlap` costs overlap, one longer than the window gets a chunk of its own.
        word_end = _first(strength, end + 1, len(strength) - 1, _WORD) or len(strength)
        if nxt < word_end - window:
            fits = _first(strength, word_end - window, end, _WORD)
            return end if fits is None else fits
    return nxt


def effective_window(window: int, overlap: int, tokenizer: Tokenizer) -> tuple[int, int]:
    """The ``(window, overlap)`` the chunker uses: past the model's limit by at most the overlap.

    >>> effective_window(256, 32, default_embedder().tokenizer)  # doctest: +SKIP
    (256, 32)
    >>> effective_window(512, 32, default_embedder().tokenizer)  # doctest: +SKIP
    (286, 32)
    """
    cap = token_capacity(tokenizer)
    if cap is not None:
        # An overlap the model cannot read past would leave the last chunk inside the one before it.
        overlap = min(overlap, cap - 1)
        window = min(window, cap + overlap)
    return window, min(overlap, window - 1)


def last_window(window: int, tokenizer: Tokenizer) -> int:
    """The longest last chunk of a document: no chunk follows it to read the tokens the model does not."""
    cap = token_capacity(tokenizer)
    return window if cap is None else min(window, cap)


def chunk_text(text: str, tokenizer: Tokenizer, window: int, overlap: int) -> list[Chunk]:
    """Cut ``text`` into whole-word chunks of at most ``window`` tokens by :data:`BOUNDARY_RULES`.

    >>> [c.text for c in chunk_text("One two. Three four five.", SpaceTok(), window=3, overlap=1)]  # doctest: +SKIP
    ['One two. Three', 'Three four five.']
    """
    window, overlap = effective_window(window, overlap, tokenizer)
    last = last_window(window, tokenizer)
    spans = tokenizer.offsets(text)
    if not spans:
        return [Chunk(0, 0, len(text), text)] if text.strip() else []
    n = len(spans)
    strength = boundaries(text, spans)
    chunks: list[Chunk] = []
    start = 0
    while True:
        # The chunk that would reach the end is the last: nothing after it reads past the model's limit.
        limit = window if start + window < n else last
        end = min(start + limit, n)  # exclusive token index
        if end < n:
            # Cut before token `end` at the last word boundary in (start, end]: the fullest whole-word window.
            cut = _last(strength, start + 1, end, _WORD)
            end = end if cut is None else cut
        a, b = spans[start][0], spans[end - 1][1]
        if strength[start] == 0 or (end < n and strength[end] == 0):
            # A word split in two: its pieces may tokenize differently alone.
            while end - start > 1 and len(tokenizer.offsets(text[a:b])) > limit:
                end -= 1
                b = spans[end - 1][1]
            # Shortened for the model, the chunk may now end inside a word that was whole in it: end at
            # the last word boundary instead (a chunk starting inside a long word, then ending in a short one).
            if end < n and strength[end] == 0:
                cut = _last(strength, start + 1, end, _WORD)
                if cut is not None:
                    end = cut
                    b = spans[end - 1][1]
        chunks.append(Chunk(len(chunks), a, b, text[a:b]))
        if end >= n:
            break
        start = _next_start(strength, start, end, window, overlap)
    return chunks
