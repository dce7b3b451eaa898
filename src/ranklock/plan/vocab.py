"""Finding vocabulary values (skills, cities, ...) in text, exactly and deterministically.

Shared by the resume parser and the planner so that a request and a resume
recognise the same spellings.  Values that are also ordinary English words or
one or two letters long ("go", "r", "us") are matched only in a case that marks
them as names ("Go", "R", "US") or through an explicit alias ("golang").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["AMBIGUOUS_WORDS", "Match", "ValueTable", "find_values", "loose_table", "value_table"]

#: Vocabulary values that are ordinary English words; they match only capitalised.
#: "react", "rust" and "spring" are left out on purpose: in requests they are nearly always the skill.
AMBIGUOUS_WORDS = frozenset({"go", "swift", "excel", "none", "mid", "lead", "us"})

#: (pattern, value, needle): the lower-case needle is a cheap substring test before the regex runs.
ValueTable = list[tuple[re.Pattern[str], str, str]]
Match = tuple[int, int, str]


def _bounded(form: str) -> str:
    # A value is a whole token: "c" is not in "c++", "java" is not in "javascript";
    # a one- or two-letter value is not part of a hyphenated word either ("C-level").
    tail = r"(?![\w+#-]|\.\w)" if len(form) <= 2 else r"(?![\w+#]|\.\w)"
    return rf"(?<![\w+#.]){re.escape(form)}{tail}"


def value_table(values: Iterable[str], aliases: Mapping[str, Iterable[str]] | None = None) -> ValueTable:
    """Patterns for each value and its aliases, longest first so that "c++" is tried before "c"."""
    aliases = aliases or {}
    forms: list[tuple[str, str]] = []
    for v in values:
        forms.append((v, v))
        forms.extend((a, v) for a in aliases.get(v, ()))
    forms.sort(key=lambda f: (-len(f[0]), f[0], f[1]))
    table: ValueTable = []
    for form, value in forms:
        if form == value and (len(form) <= 2 or form in AMBIGUOUS_WORDS):
            variants = sorted({form.upper(), form.capitalize()} if len(form) <= 2 else {form.capitalize()})
            table.append((re.compile("|".join(_bounded(x) for x in variants)), value, form.lower()))
        else:
            table.append((re.compile(_bounded(form), re.IGNORECASE), value, form.lower()))
    return table


def find_values(text: str, table: ValueTable) -> list[Match]:
    """Non-overlapping ``(start, end, value)`` matches in text order; a longer match hides a shorter one inside it."""
    taken: list[Match] = []
    low = text.lower()
    for pat, value, needle in table:
        if needle not in low:
            continue
        for m in pat.finditer(text):
            if m.start() == m.end() or any(m.start() < e and s < m.end() for s, e, _ in taken):
                continue
            taken.append((m.start(), m.end(), value))
    return sorted(taken)


def loose_table(values: Iterable[str]) -> ValueTable:
    """Case-insensitive patterns for the ambiguous values only ("lead", "go"), for use next to a sure match."""
    return [
        (re.compile(_bounded(v), re.IGNORECASE), v, v.lower())
        for v in sorted(values, key=lambda v: (-len(v), v))
        if len(v) <= 2 or v in AMBIGUOUS_WORDS
    ]
