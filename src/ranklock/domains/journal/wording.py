"""Content words, normalised, for checking that a paraphrase shares no word with its note.

The rule (pinned, independent of any locale or stemmer library):

1. lower-case; split on anything that is not a letter or a digit (so
   ``two-wheeler`` is ``two`` and ``wheeler``, ``flat's`` is ``flat`` and ``s``);
2. drop function words (:data:`STOP_WORDS`) and one-letter tokens;
3. strip one English suffix (``ing``, ``ed``, ``es``, ``s``, ``ly``, ``er``),
   keeping at least three letters, then a final ``e`` (same floor), so
   ``named`` and ``name``, ``pipes`` and ``pipe`` normalise alike.

Two words clash when their normalised forms are equal.  The rule over-matches
rather than under-matches (``news`` and ``new`` clash), which errs on the
strict side for the no-shared-words guarantee.

    >>> sorted(content_words("Where was my two-wheeler pinched?"))
    ['pinch', 'two', 'wheel']
"""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "content_words", "normalise_word", "shared_content_words"]

STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "after",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "before",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "more",
        "most",
        "much",
        "must",
        "my",
        "no",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "he",
        "her",
        "him",
        "his",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "each",
        "many",
        "long",
    ]
)

_SUFFIXES = ("ing", "ed", "es", "s", "ly", "er")


def normalise_word(word: str) -> str:
    """Lower-case ``word``, strip one suffix of :data:`_SUFFIXES`, then a final ``e`` (three letters kept)."""
    w = word.lower()
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            break
    return w[:-1] if w.endswith("e") and len(w) > 3 else w


def content_words(text: str) -> set[str]:
    """The normalised content words of ``text`` (see the module docstring for the rule)."""
    tokens = re.split(r"[^\w]+|_", text.lower())
    return {normalise_word(t) for t in tokens if len(t) > 1 and t not in STOP_WORDS}


def shared_content_words(question: str, text: str) -> set[str]:
    """Normalised content words the question shares with ``text``; empty for a true paraphrase."""
    return content_words(question) & content_words(text)
