"""Numbers with units and comparators, and calendar years: the number/unit lexer and the numeric passes."""

from __future__ import annotations

import math
import re

from ..dates import YearPhrase, calendar_fields, find_years, year_predicate
from ..schema import PlanSchema
from .cues import _claim_cues, _cue_distance
from .state import _Mention, _State

_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "half a": 0.5,
}


_NUM = r"(?:\d+(?:[.,]\d+)*|half a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty)"


_UNIT = r"(?:years?|yrs?|yoe|months?|mos?|weeks?|wks?|days?|eur(?:os?)?|usd|gbp|dollars?|pounds?)(?![a-z])"


_CMP = (
    r"at least|minimum of|minimum|min\.?|no less than|not less than|more than|over|above|greater than|"
    r"at most|maximum of|maximum|max\.?|no more than|not more than|up to|less than|under|below|fewer than|"
    r"within|exactly|>=|<=|≥|≤|>|<"
)


_POST = (
    r"or more|or above|or higher|or longer|or greater|plus|minimum|at least|or less|or fewer|or under|"
    r"or below|or shorter|maximum|max|at most"
)


_AMOUNT = rf"(?P<{{p}}cur>[$€£])?\s*(?P<{{p}}num>{_NUM})(?:\s*(?P<{{p}}k>k|thousand)(?![a-z]))?"


_SINGLE = re.compile(
    rf"(?:(?<![a-z])(?P<cmp>{_CMP})\s*)?(?<![\w.]){_AMOUNT.format(p='')}(?![\d.,]?\d)"
    # Travel distances and times ("within 30 minutes", "10 km") are not quantities of any field.
    r"(?!\s*(?:km|kilomet|miles?\b|mi\b|minutes?\b|mins?\b|hours?\b|hrs?\b))"
    rf"\s*(?P<plus>\+)?\s*(?:(?P<pre>{_POST})\s+)?(?P<unit>{_UNIT})?"
    rf"(?:\s+(?:of\s+)?(?P<post>{_POST})(?![a-z]))?",
    re.IGNORECASE,
)


_RANGE = re.compile(
    rf"(?:between\s+{_AMOUNT.format(p='a')}\s*(?P<aunit>{_UNIT})?\s*(?:and|-|–|to)\s*"
    rf"{_AMOUNT.format(p='b')}\s*(?P<bunit>{_UNIT})?)"
    rf"|(?:(?:from\s+)?{_AMOUNT.format(p='c')}\s*(?P<cunit>{_UNIT})?\s*(?:-|–|to)\s*"
    rf"{_AMOUNT.format(p='d')}\s*(?P<dunit>{_UNIT}))",
    re.IGNORECASE,
)


_OPS = {
    ">=": (
        "at least",
        "minimum of",
        "minimum",
        "min",
        "min.",
        "no less than",
        "not less than",
        ">=",
        "≥",
        "+",
        "or more",
        "or above",
        "or higher",
        "or longer",
        "or greater",
        "plus",
    ),
    ">": ("more than", "over", "above", "greater than", ">"),
    "<=": (
        "at most",
        "maximum of",
        "maximum",
        "max",
        "max.",
        "no more than",
        "not more than",
        "up to",
        "within",
        "<=",
        "≤",
        "or less",
        "or fewer",
        "or under",
        "or below",
        "or shorter",
    ),
    "<": ("less than", "under", "below", "fewer than", "<"),
    "=": ("exactly",),
}


_OP_OF = {w: op for op, words in _OPS.items() for w in words}


_DAYS_PER = {"years": 365.0, "months": 365.0 / 12, "weeks": 7.0, "days": 1.0}


def _num(text: str) -> float:
    t = text.lower().strip()
    if t in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[t])
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", t):
        return float(t.replace(",", ""))
    return float(t.replace(",", "."))


def _unit(raw: str | None, cur: str | None, k: str | None) -> str | None:
    if cur or k:
        return "money"
    if not raw:
        return None
    r = raw.lower()
    if r.startswith(("eur", "usd", "gbp", "dollar", "pound")):
        return "money"
    if r.startswith("y"):
        return "years"
    if r.startswith("mo"):
        return "months"
    if r.startswith("w"):
        return "weeks"
    if r.startswith("d"):
        return "days"
    return None


def _amount(m: re.Match[str], p: str) -> float:
    n = _num(m.group(f"{p}num"))
    return n * 1000 if m.group(f"{p}k") else n


def _numeric_fields(schema: PlanSchema) -> list[str]:
    """Fields a quantity can go to; a calendar-year field takes only year phrases (see :func:`_years`)."""
    years = {f.name for f in calendar_fields(schema.fields)}
    return [f.name for f in schema.fields if f.type in ("int", "float") and f.name not in years]


def _compatible(schema: PlanSchema, name: str, unit: str | None) -> bool:
    fu = schema.unit(name)
    if unit is None:
        return True
    if unit == "money":
        return fu == "money"
    return fu in _DAYS_PER


def _choose_numeric_field(st: _State, unit: str | None, start: int, end: int) -> tuple[str | None, str | None]:
    """The field a number belongs to, or (None, question) when it cannot be told."""
    phrase = st.text[start:end]
    cands = [n for n in _numeric_fields(st.schema) if _compatible(st.schema, n, unit)]
    if not cands:
        return None, (
            f"{phrase!r} is a quantity, but no numeric field can hold it; numeric fields: "
            f"{', '.join(f.name for f in st.schema.fields if f.type in ('int', 'float')) or 'none'}. "
            "Which requirement did you mean?"
        )
    cued = [(d, i, n) for i, n in enumerate(cands) if (d := _cue_distance(st, n, start, end)) is not None]
    if cued:
        return min(cued)[2], None
    if len(cands) == 1:
        return cands[0], None
    native = [n for n in cands if st.schema.unit(n) == unit]
    if len(native) == 1:
        return native[0], None
    return None, (
        f"{phrase!r} could be any of {', '.join(cands)}. Which one do you mean (e.g. '{phrase} of experience')?"
    )


_EITHER_GLUE = re.compile(r"\s*,?\s*(?:or|either|or else)\s*", re.IGNORECASE)


def _year_field(st: _State, start: int, end: int) -> tuple[str | None, str]:
    """The one field a year phrase at ``[start, end)`` constrains, or (None, the question to ask)."""
    phrase = st.text[start:end]
    cands = [f.name for f in calendar_fields(st.schema.fields)]
    if not cands:
        return None, (
            f"{phrase!r} is a condition on a date, but no field holds a year or a date (fields: "
            f"{', '.join(st.schema.names()) or 'none'}). Should it be dropped, or which field did you mean?"
        )
    if len(cands) == 1:
        return cands[0], ""
    cued = sorted((d, n) for n in cands if (d := _cue_distance(st, n, start, end)) is not None)
    if cued and (len(cued) == 1 or cued[0][0] < cued[1][0]):
        return cued[0][1], ""
    return None, (
        f"{phrase!r} could be a condition on any of {', '.join(cands)}. Which one do you mean "
        f"(e.g. '{cands[0]} {phrase}')?"
    )


def _years(st: _State) -> None:
    """Year phrases with a direction ("from 2020 or later", "before 2015") -> the field holding years, or a question.

    Hard constraints are combined with "and", so "before 2015 or after 2020" cannot be two of
    them: the planner asks instead of silently requiring both.
    """
    found = [y for y in find_years(st.text) if y.op is not None and st.free(y.start, y.end)]
    chains: list[list[YearPhrase]] = []
    for y in found:
        if chains and _EITHER_GLUE.fullmatch(st.text[chains[-1][-1].end : y.start]):
            chains[-1].append(y)
        else:
            chains.append([y])
    for chain in chains:
        start, end = chain[0].start, chain[-1].end
        if len(chain) > 1:
            phrase = st.text[start:end]
            st.ask(
                start,
                end,
                f"{phrase!r} asks for one date range or another; hard constraints all have to hold, so they cannot "
                "say 'or'. Which single range should it be (e.g. 'between 2015 and 2020')?",
            )
            continue
        y = chain[0]
        name, question = _year_field(st, start, end)
        spec = st.schema.field(name) if name else None
        pred = year_predicate(spec, y.op, y.values) if spec is not None and y.op is not None else None
        if spec is not None and pred is None:
            question = (
                f"{st.text[start:end]!r} names a day, but {spec.name} holds years. Which year should it be "
                f"(e.g. 'since {y.values[0][:4]}')?"
            )
        if spec is None or pred is None:
            st.ask(start, end, question)
            continue
        mention = st.mention(_Mention(start, end, spec.name, pred[1], "year", pred[0]))
        # The field's name right before the phrase ("*released* since 2022") is part of the condition.
        before = st.text[max(0, start - 40) : start]
        for cue in sorted(st.schema.cues(spec.name), key=len, reverse=True):
            cm = re.search(rf"\b{re.escape(cue)}\s*:?\s*$", before, re.IGNORECASE)
            if cm:
                st.claim(start - len(before) + cm.start(), start, mention)
                break


def _bare_years(st: _State) -> None:
    """A year-shaped number with no direction ("vaccine 2020") is asked about when a field holds years."""
    cands = [f.name for f in calendar_fields(st.schema.fields)]
    if not cands:
        return  # nothing could hold it: an ordinary word of the ranking text
    for y in find_years(st.text):
        if y.op is None and st.free(y.start, y.end):
            phrase = st.text[y.start : y.end]
            st.ask(
                y.start,
                y.end,
                f"{phrase!r} looks like a date. Is it a condition on {' or '.join(cands)} (write e.g. 'since {phrase}' "
                f"or 'before {phrase}'), or a word to rank by?",
            )


def _convert(schema: PlanSchema, name: str, value: float, unit: str | None) -> float:
    fu = schema.unit(name)
    if unit in _DAYS_PER and fu in _DAYS_PER and unit != fu:
        return value * _DAYS_PER[unit] / _DAYS_PER[fu]
    return value


def _fit(schema: PlanSchema, name: str, value: float, op: str) -> int | float:
    """The value in the field's type; an integer field rounds so the predicate keeps its meaning."""
    spec = schema.field(name)
    value = round(value, 6)
    if spec is not None and spec.type == "int" and value != int(value):
        value = math.ceil(value) if op in (">=", "<") else math.floor(value)
    return int(value) if value == int(value) else value


def _numbers(st: _State) -> None:
    text = st.text
    for m in _RANGE.finditer(text):
        if not st.free(m.start(), m.end()):
            continue
        a, b = ("a", "b") if m.group("anum") else ("c", "d")
        u = _unit(
            m.group(f"{b}unit") or m.group(f"{a}unit"),
            m.group(f"{a}cur") or m.group(f"{b}cur"),
            m.group(f"{b}k") or m.group(f"{a}k"),
        )
        if u is None and not m.group(0).lower().startswith("between"):
            continue
        name, question = _choose_numeric_field(st, u, m.start(), m.end())
        if name is None:
            st.ask(m.start(), m.end(), question or "", m.group(0))
            continue
        lo = _convert(st.schema, name, _amount(m, a) * (1000 if m.group(f"{b}k") and not m.group(f"{a}k") else 1), u)
        hi = _convert(st.schema, name, _amount(m, b), u)
        lo_v, hi_v = _fit(st.schema, name, min(lo, hi), ">="), _fit(st.schema, name, max(lo, hi), "<=")
        st.mention(_Mention(m.start(), m.end(), name, [lo_v, hi_v], "number", "between"))
    for m in _SINGLE.finditer(text):
        if not st.free(m.start(), m.end()):
            continue
        u = _unit(m.group("unit"), m.group("cur"), m.group("k"))
        if m.group("pre") and not m.group("unit"):
            continue  # "4 or more" with no unit after it: not a quantity we can place
        has_op = bool(m.group("cmp") or m.group("plus") or m.group("post") or m.group("pre"))
        numword = m.group("num").lower() in _NUMBER_WORDS
        if u is None and not has_op:
            continue  # a bare number ("python 3") is text, not a quantity
        if numword and m.group("unit") is None:
            continue  # "one" or "a" without a unit is an ordinary word
        start = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
        name, question = _choose_numeric_field(st, u, start, m.end())
        if name is None:
            st.ask(start, m.end(), question or "", m.group(0).strip())
            continue
        word = (
            (m.group("cmp") or "").lower()
            or ("+" if m.group("plus") else "")
            or (m.group("pre") or m.group("post") or "").lower()
        )
        op = _OP_OF.get(word, st.schema.bare_op(name))
        value = _fit(st.schema, name, _convert(st.schema, name, _amount(m, ""), u), op)
        st.mention(_Mention(start, m.end(), name, value, "number", op))
    # Claim the cue words of the fields numbers were assigned to ("of experience", "notice period").
    for mention in list(st.mentions):
        if mention.kind == "number":
            _claim_cues(st, mention)
