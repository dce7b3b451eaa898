"""Calendar years and dates in a request ("from 2020 or later", "before 2015", "since 2021-03-01").

A year phrase is a condition on *when*, so it belongs to a field that holds a
calendar year or a date: an ``int`` field whose name has the word ``year``
(``year``, ``pub_year``; not ``years_experience``, which counts a duration) or
a ``date``/``timestamp`` field.  A day ("since 2021-03-01") fits only a
``date`` or ``timestamp`` field: a year field cannot say which day.  This module finds the phrases and turns one
into a predicate for such a field; :mod:`ranklock.plan.extract` decides
whether the mapping is certain (exactly one such field, or a cue word that
names one) and asks otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from ..collection import FieldSpec

__all__ = ["YearPhrase", "calendar_fields", "find_years", "year_predicate"]

# A year is four digits from 1800 to 2099, not part of an amount ("$2000", "2000 euros", "2000 to 3000").
_Y = (
    r"(?<![\w$€£.,])(?:1[89]\d\d|20\d\d)(?![\d.,]?\d)(?!\w)"
    r"(?!\s*(?:k|eur|euros?|usd|gbp|dollars?|pounds?|km|miles?|hours?|minutes?|words|people|employees)\b)"
)
# An ISO day, "2021-03-01".
_ISO = r"(?<![\w$€£.,])(?:1[89]|20)\d\d-[01]\d-[0-3]\d(?!\w)"
_WHEN = rf"(?:{_ISO}|{_Y})"
_NOT_A_RANGE_START = r"(?!\s*(?:-|to|and)\s*[$€£]?\d)"
# Words that make a year a condition on time.  Plain comparators ("over", ">=") count only after the word
# "year": "over 2000 citations" is a quantity, not a year.
_PRE = (
    r"no earlier than|no later than|not earlier than|not later than|not before|not after|later than|earlier than|"
    r"newer than|older than|on or after|on or before|as of|since|after|from|before|until|till|through|in|during|on"
)
_CMP = r"at least|at most|over|under|above|below|>=|<=|≥|≤|>|<|="
_POST = (
    r"or later|or after|or newer|or more recent|and later|and after|and newer|onwards?|and up|or earlier|or before|"
    r"or older|and earlier|and before|\+"
)
_YEAR_WORD = r"(?:(?:the\s+)?year\s+)"
_PATTERN = re.compile(
    rf"(?<![\w-])(?:(?:between|from)\s+{_YEAR_WORD}?(?P<a>{_WHEN})\s*(?:and|to|-|until|till|through)\s*(?P<b>{_WHEN})"
    rf"|(?P<c>{_Y})\s*(?:-|to)\s*(?P<d>{_Y})"
    rf"|(?P<word2>year\s*)(?P<cmp>{_CMP})\s*(?P<y2>{_Y})"
    rf"|(?:(?P<pre>{_PRE})\s+)?(?P<word>{_YEAR_WORD})?(?P<y>{_WHEN}){_NOT_A_RANGE_START}(?:\s*(?P<post>{_POST})(?!\w)(?!\s*\d))?)",
    re.IGNORECASE,
)
_OP_OF = {
    **dict.fromkeys(
        ("since", "at least", ">=", "≥", "no earlier than", "not earlier than", "not before", "as of", "on or after"),
        ">=",
    ),
    **dict.fromkeys(("after", "later than", "newer than", "over", "above", ">"), ">"),
    **dict.fromkeys(("before", "earlier than", "older than", "under", "below", "<"), "<"),
    **dict.fromkeys(
        (
            "until",
            "till",
            "through",
            "at most",
            "no later than",
            "not later than",
            "not after",
            "<=",
            "≤",
            "on or before",
        ),
        "<=",
    ),
    **dict.fromkeys(("in", "during", "from", "on", "="), "="),
}
_POST_OP = {
    **dict.fromkeys(
        ("or later", "or after", "or newer", "or more recent", "and later", "and after", "and newer"), ">="
    ),
    **dict.fromkeys(("onward", "onwards", "and up", "+"), ">="),
    **dict.fromkeys(("or earlier", "or before", "or older", "and earlier", "and before"), "<="),
}


@dataclass(frozen=True)
class YearPhrase:
    """A year or day phrase: ``op`` is a comparison, ``between``, or None for a bare one ("vaccine 2020").

    ``values`` are years ("2020") or ISO days ("2021-03-01") as written.
    """

    start: int
    end: int
    op: str | None
    values: tuple[str, ...]


def find_years(text: str) -> list[YearPhrase]:
    """Every year or day phrase of ``text`` in order.

    >>> [(p.op, p.values) for p in find_years("papers from 2020 or later, not before 2015, 2018-2019")]
    [('>=', ('2020',)), ('>=', ('2015',)), ('between', ('2018', '2019'))]
    """
    out = []
    for m in _PATTERN.finditer(text):
        if m.group("a") or m.group("c"):
            lo, hi = (m.group("a"), m.group("b")) if m.group("a") else (m.group("c"), m.group("d"))
            lo, hi = sorted((lo, hi))
            out.append(YearPhrase(m.start(), m.end(), "between", (lo, hi)))
            continue
        if m.group("y2"):
            out.append(YearPhrase(m.start(), m.end(), _OP_OF[m.group("cmp").lower()], (m.group("y2"),)))
            continue
        pre = " ".join((m.group("pre") or "").lower().split())
        post = " ".join((m.group("post") or "").lower().split())
        op = _POST_OP.get(post) or _OP_OF.get(pre) or ("=" if m.group("word") else None)
        if pre == "on" and not post and len(m.group("y")) == 4:
            op = None  # "on a day" is a date; "papers on 2019 elections" is a topic
        out.append(YearPhrase(m.start(), m.end(), op, (m.group("y"),)))
    return out


def calendar_fields(fields: list[FieldSpec]) -> list[FieldSpec]:
    """The fields a year phrase can constrain: ``int`` fields named for a year, ``date`` and ``timestamp`` fields."""
    return [f for f in fields if (f.type == "int" and "year" in f.name.split("_")) or f.type in ("date", "timestamp")]


def _days(value: str) -> tuple[date, date]:
    """The first and last day a year or a day covers."""
    if len(value) == 4:
        return date(int(value), 1, 1), date(int(value), 12, 31)
    d = date.fromisoformat(value)
    return d, d


def year_predicate(spec: FieldSpec, op: str, values: tuple[str, ...]) -> tuple[str, Any] | None:
    """``(op, value)`` for ``spec`` meaning "the time ``op`` ``values``", or None when ``spec`` cannot hold it.

    A year field compares years; a date or timestamp field compares whole days, so a year is
    every day of it ("after 2019" is ``>= 2020-01-01``).  A year field cannot hold a day.

    >>> from ranklock.collection import parse_field_spec
    >>> year_predicate(parse_field_spec("published:date"), "<=", ("2019",))
    ('<', '2020-01-01')
    """
    if spec.type == "int":
        if any(len(v) != 4 for v in values):
            return None
        years = [int(v) for v in values]
        return (op, years) if op == "between" else (op, years[0])
    first, last = _days(values[0])[0], _days(values[-1])[1]
    after = last + timedelta(days=1)

    def day(d: date) -> str:
        return f"{d.isoformat()}T00:00:00Z" if spec.type == "timestamp" else d.isoformat()

    if op == ">=":
        return ">=", day(first)
    if op == ">":
        return ">=", day(after)
    if op == "<":
        return "<", day(first)
    if op == "<=":
        return "<", day(after)
    if spec.type == "timestamp":
        # "in 2020" is [2020-01-01, 2021-01-01): as one inclusive range it ends at the last microsecond.
        return "between", [day(first), f"{last.isoformat()}T23:59:59.999999Z"]
    if first == last:
        return "=", day(first)
    return "between", [day(first), day(last)]
