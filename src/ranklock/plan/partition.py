"""How a request is cut into parts, and which words may belong to no part.

Every plan of the rule extractor partitions its request (see
:class:`ranklock.plan.model.Part`): each *content word* lies in exactly one
part.  A word is a run of letters and digits (``[^\\W_](?:[\\w+#.'-]*[^\\W_])?``,
so "2020", "80k", "c#" and "master's" are words); punctuation and symbols
("+", "$", ">=") are never words.  A word is *not* a content word, and may be
left out of every part, in exactly two cases:

* it is in :data:`STOP_WORDS` (function words, the words of a request's
  frame such as "candidates" or "looking", and intensifiers such as "strong")
  and no pass claimed it for a constraint or a question;
* it is part of the request's opening, matched by :data:`PREAMBLE`
  ("find me", "we're looking for", "hiring").

Numbers are content words: a number the planner cannot place is ranking text
or a question, never silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from typing import Any

__all__ = ["PREAMBLE", "STOP_WORDS", "WORD", "content_words", "is_stop_word", "runs", "uncovered", "words"]

#: A word of a request.
WORD = re.compile(r"[^\W_](?:[\w+#.'-]*[^\W_])?")

# How requests open ("find me", "we're looking for"): not content.
PREAMBLE = re.compile(
    r"\s*(?:please\s+)?(?:(?:can you\s+|could you\s+)?(?:find|search for|look for|show|get|give|list)(?: me| us)?|"
    r"(?:i'?m|we'?re|we are|i am)\s+(?:looking for|searching for|hiring|seeking)|(?:i|we)\s+(?:need|want)|"
    r"looking for|seeking|hiring)\b",
    re.IGNORECASE,
)

#: Words that carry no requirement and no topic on their own; left out of the ranking text.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "for",
        "to",
        "in",
        "on",
        "at",
        "with",
        "who",
        "whom",
        "whose",
        "that",
        "which",
        "is",
        "are",
        "be",
        "been",
        "being",
        "was",
        "were",
        "has",
        "have",
        "having",
        "had",
        "can",
        "could",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "we",
        "i",
        "me",
        "us",
        "our",
        "my",
        "you",
        "your",
        "they",
        "them",
        "their",
        "it",
        "its",
        "some",
        "any",
        "all",
        "both",
        "either",
        "neither",
        "nor",
        "one",
        "ones",
        "looking",
        "look",
        "find",
        "finding",
        "show",
        "get",
        "give",
        "list",
        "want",
        "wanted",
        "seeking",
        "seek",
        "hire",
        "hiring",
        "hires",
        "candidates",
        "candidate",
        "people",
        "person",
        "persons",
        "someone",
        "somebody",
        "anyone",
        "profiles",
        "profile",
        "resumes",
        "resume",
        "cv",
        "cvs",
        "applicants",
        "applicant",
        "talent",
        "please",
        "also",
        "least",
        "more",
        "less",
        "than",
        "experience",
        "experienced",
        "background",
        "knowledge",
        "skills",
        "skill",
        "proficiency",
        "proficient",
        "familiar",
        "familiarity",
        "expertise",
        "expert",
        "strong",
        "solid",
        "good",
        "great",
        "excellent",
        "deep",
        "hands-on",
        "working",
        "work",
        "worked",
        "using",
        "use",
        "used",
        "know",
        "knows",
        "knowing",
        "level",
        "as",
        "well",
        "from",
        "into",
        "about",
        "like",
        "such",
        "etc",
        "must",
        "should",
        "need",
        "needs",
        "needed",
        "required",
        "requires",
        "require",
        "only",
        "mandatory",
        "essential",
        "very",
        "really",
        "just",
        "do",
        "does",
        "did",
        "able",
        "willing",
        "open",
        "other",
        "who's",
        "based",
        "located",
        "currently",
        "preferably",
        "ideally",
        "plus",
        "bonus",
        "nice",
        "must-have",
        "years",
        "year",
        "months",
        "month",
        "weeks",
        "week",
        "days",
        "day",
        "total",
        "professional",
        "relevant",
        "prior",
        "previous",
        "something",
        "time",
        "period",
        "current",
        "same",
        "new",
    ]
)


def words(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of every word of ``text[start:end]``, in order."""
    stop = len(text) if end is None else end
    return [(start + m.start(), start + m.end()) for m in WORD.finditer(text[start:stop])]


def is_stop_word(word: str) -> bool:
    """Whether ``word`` is in :data:`STOP_WORDS` (case-insensitive, surrounding quotes ignored)."""
    return word.lower().strip("'") in STOP_WORDS


def content_words(text: str) -> list[str]:
    """The content words of ``text`` by the rule above, lower-cased, in order.

    >>> content_words("Find me python developers from 2020 or later")
    ['python', 'developers', '2020', 'later']
    """
    pre = PREAMBLE.match(text)
    skip = pre.end() if pre else 0
    return [text[s:e].lower() for s, e in words(text) if s >= skip and not is_stop_word(text[s:e])]


def uncovered(request: str, phrases: Iterable[str]) -> list[str]:
    """How the parts' ``phrases`` fail to partition ``request``: the content words missing from them,
    then those they hold in excess (each prefixed ``-`` / ``+``); empty when every content word of
    the request lies in exactly one phrase.

    >>> uncovered("python developers since 2019", ["python", "developers"])
    ['-since', '-2019']
    """
    want = content_words(request)
    got = [text[s:e].lower() for text in phrases for s, e in words(text) if not is_stop_word(text[s:e])]
    missing, extra = list(want), []
    for w in got:
        if w in missing:
            missing.remove(w)
        else:
            extra.append(w)
    return [f"-{w}" for w in missing] + [f"+{w}" for w in extra]


def runs(
    labelled: Iterable[tuple[int, int, Hashable | None]], key_of: Callable[[Hashable], Any] = lambda k: k
) -> list[tuple[int, int, Hashable]]:
    """Merge labelled words into phrases: consecutive words with the same label are one phrase.

    ``labelled`` holds ``(start, end, label)`` per word in text order; a label of ``None``
    marks a word that belongs to no part (a stop word or the opening): it neither
    starts a phrase nor ends one, so "python and docker" stays one phrase when both
    values belong to one constraint.
    """
    out: list[tuple[int, int, Hashable]] = []
    for s, e, label in labelled:
        if label is None:
            continue
        if out and key_of(out[-1][2]) == key_of(label):
            out[-1] = (out[-1][0], e, out[-1][2])
        else:
            out.append((s, e, label))
    return out
