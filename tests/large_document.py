"""A deterministic large document of varied, Zipf-distributed words, for size tests and bench/large_document.py.

The words are pronounceable syllable strings (real stems to the English
stemmer, so every one is its own lexeme), drawn with Zipf frequencies like a
natural text: a few very common terms with long postings lists and a long
tail of rare ones, in sentences of 6 to 24 words.  The same ``seed`` and
size always give the same text.
"""

from __future__ import annotations

import itertools
import random

_ONSETS = ["b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "pl"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "n", "r", "s", "l", "m", "x"]


def vocabulary(size: int, seed: int = 11) -> list[str]:
    """``size`` distinct pseudo-words, most common first."""
    rng = random.Random(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(1, 3)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def large_document_text(
    n_bytes: int, *, seed: int = 11, vocab: int = 30_000, markers: dict[int, str] | None = None
) -> str:
    """About ``n_bytes`` of text (never less); ``markers`` puts word ``w`` at about byte offset ``k``."""
    rng = random.Random(seed)
    words = vocabulary(vocab, seed)
    cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(vocab)))
    pending = sorted((markers or {}).items())
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        drawn = rng.choices(words, cum_weights=cum, k=rng.randint(6, 24))
        if pending and size >= pending[0][0]:
            drawn[len(drawn) // 2] = pending.pop(0)[1]
        sentence = " ".join(drawn).capitalize() + ". "
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts).rstrip()
