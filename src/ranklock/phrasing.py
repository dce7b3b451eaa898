"""Counts and lists in messages, said as a person would: "1 entry", "3 entries", "'a', 'b' and 2 more".

>>> plural(1, "entry"), plural(3, "query-log entry"), plural(2, "document")
('1 entry', '3 query-log entries', '2 documents')
>>> named(["a", "b", "c"], limit=2)
"'a', 'b' and 1 more"
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["named", "plural"]


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1, with thousands separated: ``1 entry``, ``1,200 entries``.

    English's regular rules, on the last word: ``entry`` -> ``entries``, ``index`` -> ``indexes``, else + ``s``.
    """
    if n == 1:
        return f"{n:,} {word}"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return f"{n:,} {word[:-1]}ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return f"{n:,} {word}es"
    return f"{n:,} {word}s"


def named(items: Sequence[str], limit: int = 10) -> str:
    """The first ``limit`` of ``items`` quoted, then how many more: ``'a', 'b' and 3 more``."""
    shown = ", ".join(repr(i) for i in items[:limit])
    return f"{shown} and {len(items) - limit} more" if len(items) > limit else shown
