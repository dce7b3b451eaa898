"""The deterministic, schema-driven extractor: request text -> :class:`Plan`.

The same request against the same schema always gives the same plan.  It
works in passes over the request, each claiming the characters it explains:

1. protected attributes and their proxies -> ``refusal`` (checked first: a
   request that selects on age is refused whatever else it says);
2. numbers with units and comparators ("2+ years", "under 90k", "between 3
   and 5 years", "within 2 weeks") -> numeric fields, chosen by unit and by the
   nearest cue word ("experience", "notice", "salary");
3. vocabulary values ("python", "berlin", "master's") -> keyword fields, and
   cue phrases ("remote", "sponsorship") -> bool fields;
4. scopes: negation ("no", "without", "except") flips what it covers,
   preference words ("ideally", "a plus") turn what they cover into soft
   preferences;
5. what is left: phrases that state a requirement no field can express
   ("near the office", "culture fit", "must know cobol"), and vocabulary
   values written as ordinary words that no context settles ("team lead") ->
   a ``clarification_request`` naming the phrase; other content words become
   the ranking text.

Every constraint the extractor emits names a declared field and an operator
valid for its type; :func:`ranklock.plan.validate.validate_plan` checks that
again, so plans proposed by other extractors meet the same bar.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from .model import Constraint, Plan, Preference
from .protected import find_protected, safe_spans
from .schema import PlanSchema
from .vocab import find_values, loose_table

__all__ = ["RuleExtractor", "extract_plan"]

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

_NEGATION = re.compile(
    r"\b(?:no|not|non|without|excluding|exclude|excluded|except|other than|never|neither|nor|isn't|aren't|"
    r"doesn't|don't|do not|does not|cannot|can't|can not|avoid|minus|but not)\b|\bnon-",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:prefer(?:ably|red|ence|s)?|ideally|nice[- ]to[- ]have|(?:is |are |would be )?(?:a )?(?:big |real )?plus|"
    r"bonus(?: points)?|desirable|good to have|optional(?:ly)?|if possible|extra points|would be nice|"
    r"advantage(?:ous)?)\b",
    re.IGNORECASE,
)
_REQUIREMENT = re.compile(
    r"\b(?:must(?: have| know| be| speak| hold)?|need(?:s)? to (?:have|know|be|speak|hold)|has to (?:have|know|be)|"
    r"have to (?:have|know|be)|required|mandatory|essential|is a must|a must)\b",
    re.IGNORECASE,
)
_SCOPE_BREAK = re.compile(
    r"[,;.!?()]|\b(?:but|who|which|that|with|and|in|based|located|having|has|have|must|should|plus|preferably|"
    r"ideally|for|at|from)\b",
    re.IGNORECASE,
)
_CLAUSE_BREAK = re.compile(r"[,;.!?()]|\bbut\b", re.IGNORECASE)
_LIST_GLUE = re.compile(r"^(?:\s*(?:,|/|&|\bor\b|\band\b|\bnor\b|\band/or\b|\beither\b)\s*)+$", re.IGNORECASE)
_ORDINAL_UP_BEFORE = re.compile(r"(?:at least|minimum|min\.?|no less than)\s+(?:an?\s+)?$", re.IGNORECASE)
_ORDINAL_UP_AFTER = re.compile(
    r"^(?:'s)?\s*(?:degree\s*|level\s*)?(?:or (?:higher|above|better|more senior)|and (?:above|up|higher)|\+)",
    re.IGNORECASE,
)
_ORDINAL_DOWN_BEFORE = re.compile(r"(?:at most|up to|no more than|maximum)\s+(?:an?\s+)?$", re.IGNORECASE)
_ORDINAL_DOWN_AFTER = re.compile(
    r"^(?:'s)?\s*(?:degree\s*|level\s*)?(?:or (?:lower|below|less|more junior)|and (?:below|lower|under))",
    re.IGNORECASE,
)

# How requests open ("find me", "we're looking for"): not content.
_PREAMBLE = re.compile(
    r"\s*(?:please\s+)?(?:(?:can you\s+|could you\s+)?(?:find|search for|look for|show|get|give|list)(?: me| us)?|"
    r"(?:i'?m|we'?re|we are|i am)\s+(?:looking for|searching for|hiring|seeking)|(?:i|we)\s+(?:need|want)|"
    r"looking for|seeking|hiring)\b",
    re.IGNORECASE,
)
_FILLER = frozenset(
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
        "have",
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
        "currently",
        "same",
        "new",
    ]
)


@dataclass(frozen=True)
class _Concept:
    name: str
    pattern: re.Pattern[str]
    question: str  # {phrase} and {fields} are filled in
    fields: tuple[str, ...] = ()  # fields that would express it if the schema had them


def _concept(name: str, pattern: str, question: str, fields: tuple[str, ...] = ()) -> _Concept:
    return _Concept(name, re.compile(pattern, re.IGNORECASE), question, fields)


# Requirements that read like filters but name something no typed field holds.
_CONCEPTS: tuple[_Concept, ...] = (
    _concept(
        "proximity",
        r"\b(?:near(?:by)?|close to|close by|walking distance|commut\w*|within \d+\s*(?:km|kilometers|kilometres|"
        r"miles|mi|minutes|mins)|local(?:ly)?|on-?site|in[- ]office|in the office|relocat\w*)\b",
        "{phrase!r} is not a field. Which locations should count (the locations field holds cities, "
        "e.g. 'in berlin or hamburg')?",
    ),
    _concept(
        "judgement",
        r"\b(?:(?:good |great |strong )?(?:culture|cultural|team) fit|good fit|fits? (?:in|with) (?:the|our) "
        r"(?:team|culture)|personality|attitude|vibes?|team players?|passionate|rock ?stars?|ninjas?|hungry|"
        r"hard[- ]working|top (?:talent|performers?)|high performers?|job[- ]hopp\w*|gaps? in (?:their |the )?"
        r"(?:cv|resume|employment)|over-?qualified|under-?qualified|loyal|reliable|(?:good |great |strong |excellent )?"
        r"communication skills|communicators?|self-starters?|go-getters?|smart|brilliant|best)\b",
        "{phrase!r} is a judgement that no typed field records. Which checkable requirement should stand for "
        "it (fields: {fields}), or should it be dropped?",
    ),
    _concept(
        "seniority",
        r"\b(?:senior|junior|entry[- ]level|mid[- ]level|principal|staff)\b",
        "{phrase!r} is not a typed value here. How many years of experience should it mean "
        "(e.g. 'at least 5 years of experience')?",
        ("seniority",),
    ),
    _concept(
        "experienced",
        r"\b(?:experienced|seasoned|veteran)\b",
        "{phrase!r} has no exact meaning. How many years of experience should it mean (e.g. 'at least 5 years "
        "of experience')?",
    ),
    _concept(
        "availability",
        r"\b(?:available (?:immediately|now|asap|soon|right away)|immediately available|asap|"
        r"start (?:immediately|asap|soon|right away)|immediate joiners?|short notice)\b",
        "{phrase!r} has no exact meaning. What is the longest notice period to accept (e.g. 'notice under 30 days')?",
    ),
    _concept(
        "salary",
        r"\b(?:cheap|affordable|inexpensive|low salary|low cost|within (?:our|the) budget|reasonable salary)\b",
        "{phrase!r} has no exact meaning. What is the highest salary expectation to accept (e.g. 'salary under 80k')?",
    ),
    _concept(
        "education",
        r"\b(?:(?:a |any )?(?:university |college )?degree|graduated?|university|college|diploma|educated)\b",
        "{phrase!r} is not one typed value. Which degree is the minimum ({fields})?",
    ),
    _concept(
        "certification",
        r"\b(?:certified|certifications?|certificates?)\b",
        "{phrase!r}: certifications are not a typed field. Should it be ranking text rather than a requirement?",
    ),
)


@dataclass
class _Mention:
    start: int
    end: int
    field: str
    value: Any
    kind: str  # "value", "number", "bool"
    op: str | None = None  # numbers: the comparison; values: ordinal direction ("up"/"down")
    negated: bool = False
    soft: bool = False


@dataclass
class _State:
    text: str
    schema: PlanSchema
    claimed: list[bool] = field(default_factory=list)
    mentions: list[_Mention] = field(default_factory=list)
    issues: list[tuple[int, str, str]] = field(default_factory=list)  # (position, phrase, question)

    def claim(self, start: int, end: int) -> None:
        for i in range(max(start, 0), min(end, len(self.text))):
            self.claimed[i] = True

    def free(self, start: int, end: int) -> bool:
        return not any(self.claimed[start:end])


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


class RuleExtractor:
    """The default extractor: deterministic, no model, driven by the schema."""

    name = "rules"

    def extract(self, request: str, schema: PlanSchema, collection: str | None = None) -> Plan:
        return extract_plan(request, schema, collection)


def extract_plan(request: str, schema: PlanSchema, collection: str | None = None) -> Plan:
    """Turn ``request`` into a plan for a collection with ``schema``.

    >>> from ranklock.plan.schema import build_schema
    >>> s = build_schema(["skills:keyword[]", "years_experience:float"], {"skills": ["python"]})
    >>> p = extract_plan("python developers with 5+ years of experience", s)
    >>> p.kind, [c.to_filter() for c in p.constraints], p.ranking_text
    ('answer', [{'field': 'skills', 'op': 'has', 'value': 'python'}, {'field': 'years_experience', 'op': '>=', 'value': 5}], 'developers')
    """
    text = " ".join(request.replace("\u2013", "-").replace("\u2014", "-").split())
    base: dict[str, Any] = {"request": request, "collection": collection}
    if not text:
        return Plan(
            kind="clarification_request",
            phrase="",
            question=f"The request is empty. What should the results have (fields: {', '.join(schema.names())})?",
            **base,
        )
    hit = find_protected(text)
    if hit is not None:
        return Plan(kind="refusal", phrase=hit.phrase, attribute=hit.attribute, reason=hit.reason, **base)
    st = _State(text, schema, [False] * len(text))
    for s, e in safe_spans(text):
        st.claim(s, e)
    pre = _PREAMBLE.match(text)
    if pre:
        st.claim(0, pre.end())
    _numbers(st)
    _values(st)
    _bools(st)
    _concepts(st)
    _negations(st)
    _preferences(st)
    _requirements(st)
    _ambiguous_leftovers(st)
    if st.issues:
        _, phrase, question = sorted(st.issues)[0]
        return Plan(kind="clarification_request", phrase=phrase, question=question, **base)
    constraints, preferences = _group(st)
    ranking = _ranking_text(st)
    if not constraints and not ranking and not preferences:
        return Plan(
            kind="clarification_request",
            phrase=text,
            question="Nothing in the request names a "
            f"requirement or a topic. What should the candidates have (fields: {', '.join(schema.names())})?",
            **base,
        )
    return Plan(kind="answer", constraints=constraints, preferences=preferences, ranking_text=ranking, **base)


# -- pass 2: numbers -------------------------------------------------------------------------


def _numeric_fields(schema: PlanSchema) -> list[str]:
    return [f.name for f in schema.fields if f.type in ("int", "float")]


def _compatible(schema: PlanSchema, name: str, unit: str | None) -> bool:
    fu = schema.unit(name)
    if unit is None:
        return True
    if unit == "money":
        return fu == "money"
    return fu in _DAYS_PER


def _clause_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    left = max((m.end() for m in _CLAUSE_BREAK.finditer(text, 0, start)), default=0)
    right_m = _CLAUSE_BREAK.search(text, end)
    return left, right_m.start() if right_m else len(text)


def _cue_distance(st: _State, name: str, start: int, end: int) -> int | None:
    """Distance from the mention to the nearest cue word of field ``name`` in the same clause."""
    lo, hi = _clause_bounds(st.text, start, end)
    best: int | None = None
    for cue in st.schema.cues(name):
        if cue in ("years", "in"):
            continue  # a unit or a preposition, not a cue
        for m in re.finditer(rf"\b{re.escape(cue)}\b", st.text[lo:hi], re.IGNORECASE):
            s, e = lo + m.start(), lo + m.end()
            d = s - end if s >= end else start - e
            if best is None or d < best:
                best = max(d, 0)
    return best


def _choose_numeric_field(st: _State, unit: str | None, start: int, end: int) -> tuple[str | None, str | None]:
    """The field a number belongs to, or (None, question) when it cannot be told."""
    phrase = st.text[start:end]
    cands = [n for n in _numeric_fields(st.schema) if _compatible(st.schema, n, unit)]
    if not cands:
        return None, (
            f"{phrase!r} is a quantity, but no numeric field can hold it; numeric fields: "
            f"{', '.join(_numeric_fields(st.schema)) or 'none'}. Which requirement did you mean?"
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
        a, b = ("a", "b") if m.group("anum") else ("c", "d")
        u = _unit(
            m.group(f"{b}unit") or m.group(f"{a}unit"),
            m.group(f"{a}cur") or m.group(f"{b}cur"),
            m.group(f"{b}k") or m.group(f"{a}k"),
        )
        if u is None and not m.group(0).lower().startswith("between"):
            continue
        name, question = _choose_numeric_field(st, u, m.start(), m.end())
        st.claim(m.start(), m.end())
        if name is None:
            st.issues.append((m.start(), m.group(0), question or ""))
            continue
        lo = _convert(st.schema, name, _amount(m, a) * (1000 if m.group(f"{b}k") and not m.group(f"{a}k") else 1), u)
        hi = _convert(st.schema, name, _amount(m, b), u)
        lo_v, hi_v = _fit(st.schema, name, min(lo, hi), ">="), _fit(st.schema, name, max(lo, hi), "<=")
        st.mentions.append(_Mention(m.start(), m.end(), name, [lo_v, hi_v], "number", "between"))
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
        st.claim(start, m.end())
        if name is None:
            st.issues.append((start, m.group(0).strip(), question or ""))
            continue
        word = (
            (m.group("cmp") or "").lower()
            or ("+" if m.group("plus") else "")
            or (m.group("pre") or m.group("post") or "").lower()
        )
        op = _OP_OF.get(word, st.schema.bare_op(name))
        value = _fit(st.schema, name, _convert(st.schema, name, _amount(m, ""), u), op)
        st.mentions.append(_Mention(start, m.end(), name, value, "number", op))
    # Claim the cue words of the fields numbers were assigned to ("of experience", "notice period").
    for mention in list(st.mentions):
        _claim_cues(st, mention.field, mention.start, mention.end)


def _claim_cues(st: _State, name: str, start: int, end: int) -> None:
    lo, hi = _clause_bounds(st.text, start, end)
    for cue in (*st.schema.cues(name), "period", "of"):
        if cue == "in":
            continue
        for m in re.finditer(rf"\b{re.escape(cue)}\b", st.text[lo:hi], re.IGNORECASE):
            st.claim(lo + m.start(), lo + m.end())


# -- pass 3: vocabulary values and bool cues ----------------------------------------------------


def _values(st: _State) -> None:
    found: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for f in st.schema.fields:
        table = st.schema.tables.get(f.name)
        if not table:
            continue
        for s, e, v in find_values(st.text, table):
            if st.free(s, e):
                found.setdefault((s, e), []).append((f.name, v))
    taken: list[tuple[int, int]] = []
    for s, e in sorted(found, key=lambda se: (-(se[1] - se[0]), se[0])):
        if any(s < te and ts < e for ts, te in taken):
            continue
        taken.append((s, e))
        options = found[(s, e)]
        if len(options) > 1:
            # One word, several fields ("singapore": a city and a work authorisation): the nearest cue decides.
            cued = [(d, i, o) for i, o in enumerate(options) if (d := _cue_distance(st, o[0], s, e)) is not None]
            name, value = min(cued)[2] if cued else options[0]
        else:
            name, value = options[0]
        direction = None
        if st.schema.hints[name].ordinal and value in st.schema.hints[name].ordinal:
            before, after = st.text[max(0, s - 30) : s], st.text[e : e + 30]
            if _ORDINAL_UP_BEFORE.search(before) or _ORDINAL_UP_AFTER.search(after):
                direction = "up"
            elif _ORDINAL_DOWN_BEFORE.search(before) or _ORDINAL_DOWN_AFTER.search(after):
                direction = "down"
            for rx in (_ORDINAL_UP_AFTER, _ORDINAL_DOWN_AFTER):
                am = rx.search(after)
                if am:
                    st.claim(e, e + am.end())
            for rx in (_ORDINAL_UP_BEFORE, _ORDINAL_DOWN_BEFORE):
                bm = rx.search(before)
                if bm:
                    st.claim(s - len(before) + bm.start(), s)
        st.mentions.append(_Mention(s, e, name, value, "value", direction))
        st.claim(s, e)
        _claim_field_cue_before(st, name, s)
        _claim_field_cue_after(st, name, e)
    _loose_values(st)


# "experience in excel", "proficient in go": a lower-case ambiguous word right after these is the value.
_LOOSE_CUE = re.compile(
    r"\b(?:experience|experienced|skilled|proficient|proficiency|expertise|knowledge|background|know|knows|"
    r"using|uses|written in|coding in|programming in)\s+(?:in\s+|with\s+|of\s+)?$",
    re.IGNORECASE,
)


_ROLE_AFTER = re.compile(
    r"\s+(?:engineers?|developers?|devs?|programmers?|scientists?|analysts?|designers?|architects?|managers?|"
    r"specialists?|consultants?|recruiters?|accountants?)\b",
    re.IGNORECASE,
)


def _loose_values(st: _State) -> None:
    """Accept an ambiguous word in any case next to a sure value of its field or after a skill cue.

    "senior or lead" and "python, go and rust" name a list of values; "lead a team" does not.
    """
    changed = True
    while changed:
        changed = False
        for f in st.schema.fields:
            values = st.schema.vocab.get(f.name, [])
            for s, e, v in find_values(st.text, loose_table(values)):
                if not st.free(s, e):
                    continue
                sure = [x for x in st.mentions if x.field == f.name and x.kind == "value"]
                glued = any(
                    _LIST_GLUE.match(st.text[x.end : s]) or _LIST_GLUE.match(st.text[e : x.start]) for x in sure
                )
                lo, hi = _clause_bounds(st.text, s, e)
                alone = _content_words(st, lo, hi) == [(s, e)]  # "excel, 2+ years": the clause is the value
                role = _ROLE_AFTER.match(st.text, e)  # "go developer", "lead engineer"
                if glued or alone or role or _LOOSE_CUE.search(st.text[max(0, s - 40) : s]):
                    st.mentions.append(_Mention(s, e, f.name, v, "value"))
                    st.claim(s, e)
                    changed = True


def _claim_field_cue_after(st: _State, name: str, end: int) -> None:
    """Claim a cue word right after a value ("master's *degree*", "senior *level*")."""
    after = st.text[end : end + 20]
    for cue in sorted(st.schema.cues(name), key=len, reverse=True):
        m = re.match(rf"(?:'s)?\s+{re.escape(cue)}\b", after, re.IGNORECASE)
        if m and cue not in ("in", "years"):
            st.claim(end, end + m.end())
            return


def _claim_field_cue_before(st: _State, name: str, start: int) -> None:
    """Claim a cue phrase right before a value ("fluent in", "authorised to work in the")."""
    before = st.text[max(0, start - 40) : start]
    for cue in sorted(st.schema.cues(name), key=len, reverse=True):
        if cue == "in":
            continue
        m = re.search(rf"\b{re.escape(cue)}\b(?:\s+(?:in|the|with|for))*\s*$", before, re.IGNORECASE)
        if m:
            st.claim(start - len(before) + m.start(), start)
            return


def _bools(st: _State) -> None:
    for f in st.schema.fields:
        if f.type != "bool":
            continue
        hints = st.schema.hints[f.name]
        pats = hints.true_cues or (rf"\b{re.escape(f.name.replace('_', ' '))}\b",)
        for p in pats:
            for m in re.finditer(p, st.text, re.IGNORECASE):
                if st.free(m.start(), m.end()):
                    st.mentions.append(_Mention(m.start(), m.end(), f.name, True, "bool"))
                    st.claim(m.start(), m.end())


# -- pass 4: scopes ---------------------------------------------------------------------------


def _negations(st: _State) -> None:
    for m in _NEGATION.finditer(st.text):
        if not st.free(m.start(), m.end()):
            continue
        end = _scope_end(st.text, m.end())
        inside = [x for x in st.mentions if m.end() <= x.start < end]
        st.claim(m.start(), m.end())
        if not inside:
            words = _content_words(st, m.end(), end)
            if words:
                phrase = st.text[m.start() : end].strip()
                st.issues.append(
                    (
                        m.start(),
                        phrase,
                        f"{phrase!r} excludes something no typed field records "
                        f"(fields: {', '.join(st.schema.names())}). Which field and value should be "
                        "excluded?",
                    )
                )
                st.claim(m.start(), end)
            continue
        for x in inside:
            x.negated = not x.negated
        # The rest of a negated phrase ("no agency *recruiters*") describes what is excluded;
        # it must not become ranking text, which would pull those candidates up.
        st.claim(m.end(), end)


_BREAK_WORDS = frozenset(
    [
        "but",
        "who",
        "which",
        "that",
        "with",
        "and",
        "in",
        "based",
        "located",
        "having",
        "has",
        "have",
        "must",
        "should",
        "plus",
        "preferably",
        "ideally",
        "for",
        "at",
        "from",
        "whose",
        "while",
    ]
)
# Words that do not end a negation before its object: "no *experience in* java", "not *based in* paris".
_LIST_WORDS = frozenset(
    {
        "or",
        "nor",
        "and/or",
        "either",
        "any",
        "/",
        "&",
        "a",
        "an",
        "the",
        "based",
        "located",
        "living",
        "in",
        "from",
        "with",
        "experience",
        "background",
        "knowledge",
        "of",
        "at",
        "worked",
        "working",
    }
)


def _scope_end(text: str, start: int) -> int:
    """Where a negation that starts at ``start`` stops: punctuation, or a break word after its first word."""
    seen_word = False
    for m in re.finditer(r"[,;.!?()]|[^\s,;.!?()]+", text[start:]):
        tok = m.group(0)
        if tok in ",;.!?()":
            return start + m.start()
        low = tok.lower()
        if low in _BREAK_WORDS and seen_word:
            return start + m.start()
        if low not in _LIST_WORDS:
            seen_word = True
    return len(text)


def _extend(st: _State, pos: int) -> int:
    """Extend a phrase from ``pos`` over following words up to punctuation, a break word or a claimed word."""
    end = pos
    for m in re.finditer(r"[,;.!?()]|[^\s,;.!?()]+", st.text[pos:]):
        tok = m.group(0)
        s, e = pos + m.start(), pos + m.end()
        if tok in ",;.!?()" or tok.lower() in _BREAK_WORDS or not st.free(s, e):
            break
        end = e
    return end


def _preferences(st: _State) -> None:
    for m in _PREFERENCE.finditer(st.text):
        if not st.free(m.start(), m.end()):
            continue
        lo, hi = _clause_bounds(st.text, m.start(), m.end())
        postfix = not st.text[m.end() : hi].strip()
        s, e = (lo, m.start()) if postfix else (m.end(), hi)
        st.claim(m.start(), m.end())
        for x in st.mentions:
            if s <= x.start < e:
                if x.kind != "value":
                    phrase = st.text[x.start : x.end]
                    st.issues.append(
                        (
                            x.start,
                            st.text[min(s, m.start()) : max(e, m.end())].strip(),
                            f"{phrase!r} is stated as a preference, but a number or yes/no can only be a "
                            "hard requirement here. Should it be required, or dropped?",
                        )
                    )
                x.soft = True
        for w in _content_words(st, s, e):
            st.mentions.append(_Mention(w[0], w[1], "", st.text[w[0] : w[1]], "text", soft=True))
            st.claim(w[0], w[1])


def _requirements(st: _State) -> None:
    """A requirement whose object maps to no field must be asked about, not silently ranked."""
    for m in _REQUIREMENT.finditer(st.text):
        lo, hi = _clause_bounds(st.text, m.start(), m.end())
        word = m.group(0).lower()
        postfix = word in ("required", "mandatory", "essential", "is a must", "a must")
        if postfix and not st.text[m.end() : hi].strip(" :"):
            s, e = lo, m.start()
        else:
            s, e = m.end(), hi
        st.claim(m.start(), m.end())
        if any(s <= x.start < e for x in st.mentions):
            continue
        words = _content_words(st, s, e)
        if words:
            phrase = st.text[words[0][0] : words[-1][1]]
            st.issues.append(
                (
                    words[0][0],
                    phrase,
                    f"{phrase!r} is stated as a requirement, but it is not a value of "
                    f"any typed field (fields: {', '.join(st.schema.names())}). Should it be ranking "
                    "text instead, or which field value did you mean?",
                )
            )


def _ambiguous_leftovers(st: _State) -> None:
    """A vocabulary value written as an ordinary word ("excel", "lead") is asked about, not silently ranked."""
    for f in st.schema.fields:
        for s, e, v in find_values(st.text, loose_table(st.schema.vocab.get(f.name, []))):
            if v in _NEVER_ASK or not st.free(s, e):
                continue
            word = st.text[s:e]
            st.issues.append(
                (
                    s,
                    word,
                    f"{word!r} is also the {f.name} value {v!r}. Is it a requirement (write it "
                    f"as {v.capitalize()!r} to require it) or just a word to rank by?",
                )
            )
            st.claim(s, e)


# Ambiguous values that are almost always ordinary words in a request.
_NEVER_ASK = frozenset({"us", "none"})


def _concepts(st: _State) -> None:
    for c in _CONCEPTS:
        if any(st.schema.field(f) is not None for f in c.fields):
            continue  # the schema can express it; an unmatched word is just text
        for m in c.pattern.finditer(st.text):
            if not st.free(m.start(), m.end()):
                continue
            end = _extend(st, m.end()) if c.name in _EXTENDED else m.end()
            phrase = st.text[m.start() : end].strip()
            fields = ", ".join(st.schema.names())
            if c.name == "education" and st.schema.field("degree") is not None:
                order = st.schema.hints["degree"].ordinal or tuple(st.schema.vocab.get("degree", []))
                fields = "degree: " + " < ".join(order)
            st.issues.append((m.start(), phrase, c.question.format(phrase=phrase, fields=fields)))
            st.claim(m.start(), end)


_EXTENDED = frozenset({"proximity", "judgement", "certification"})


# -- pass 5: assemble -----------------------------------------------------------------------------


def _content_words(st: _State, start: int, end: int) -> list[tuple[int, int]]:
    out = []
    for m in re.finditer(r"[A-Za-z][\w+#.'-]*\w|[A-Za-z]", st.text[start:end]):
        s, e = start + m.start(), start + m.end()
        if st.free(s, e) and m.group(0).lower().strip("'") not in _FILLER:
            out.append((s, e))
    return out


def _ranking_text(st: _State) -> str:
    return " ".join(st.text[s:e] for s, e in _content_words(st, 0, len(st.text)))


def _group(st: _State) -> tuple[list[Constraint], list[Preference]]:
    constraints: list[Constraint] = []
    preferences: list[Preference] = []
    ms = sorted(st.mentions, key=lambda x: (x.start, x.end))
    i = 0
    while i < len(ms):
        x = ms[i]
        if x.soft:
            if x.kind in ("value", "text"):
                preferences.append(
                    Preference(
                        kind="preferred_value" if x.kind == "value" else "ranking_text",
                        value=str(x.value),
                        field=x.field or None,
                        phrase=st.text[x.start : x.end],
                    )
                )
            i += 1
            continue
        if x.kind in ("number", "bool"):
            value = x.value
            negate = x.negated
            if x.kind == "bool" and negate:
                value, negate = not value, False
            constraints.append(
                Constraint(field=x.field, op=x.op or "=", value=value, negate=negate, phrase=st.text[x.start : x.end])
            )
            i += 1
            continue
        # A run of values of the same field joined by list glue is one list: "python, go or rust".
        group = [x]
        any_or = False
        j = i + 1
        while j < len(ms):
            y = ms[j]
            glue = st.text[group[-1].end : y.start]
            if (
                y.kind != "value"
                or y.field != x.field
                or y.negated != x.negated
                or y.soft
                or not _LIST_GLUE.match(glue)
            ):
                break
            any_or = any_or or bool(re.search(r"\bor\b|/|\bnor\b", glue, re.IGNORECASE))
            group.append(y)
            j += 1
        before = st.text[max(0, x.start - 12) : x.start].lower()
        any_or = any_or or bool(re.search(r"\b(?:any of|one of|either)\s*$", before))
        constraints.append(_list_constraint(st, group, any_or))
        i = j
    return _merge_has(constraints), preferences


def _merge_has(constraints: list[Constraint]) -> list[Constraint]:
    """Positive ``has``/``has_all`` on one field are one ``has_all``: "python ... and also docker"."""
    out: list[Constraint] = []
    first: dict[str, int] = {}
    for c in constraints:
        if c.negate or c.op not in ("has", "has_all"):
            out.append(c)
            continue
        if c.field not in first:
            first[c.field] = len(out)
            out.append(c)
            continue
        prev = out[first[c.field]]
        merged = sorted(
            set(prev.value if prev.op == "has_all" else [prev.value]) | set(c.value if c.op == "has_all" else [c.value])
        )
        out[first[c.field]] = Constraint(
            field=c.field,
            op="has" if len(merged) == 1 else "has_all",
            value=merged[0] if len(merged) == 1 else merged,
            phrase=f"{prev.phrase} … {c.phrase}",
        )
    return out


def _list_constraint(st: _State, group: list[_Mention], any_or: bool) -> Constraint:
    x = group[0]
    name = x.field
    spec = st.schema.field(name)
    values = sorted({str(g.value) for g in group})
    phrase = st.text[group[0].start : group[-1].end]
    ordinal = st.schema.hints[name].ordinal
    if len(group) == 1 and x.op in ("up", "down") and ordinal:
        idx = ordinal.index(str(x.value))
        chosen = ordinal[idx:] if x.op == "up" else ordinal[: idx + 1]
        values = sorted(v for v in chosen if v != "none")
        if spec is not None and spec.type == "keyword":
            return Constraint(field=name, op="in", value=values, negate=x.negated, phrase=phrase)
        return Constraint(field=name, op="has_any", value=values, negate=x.negated, phrase=phrase)
    if spec is not None and spec.type == "keyword":
        if len(values) == 1:
            return Constraint(field=name, op="=", value=values[0], negate=x.negated, phrase=phrase)
        return Constraint(field=name, op="in", value=values, negate=x.negated, phrase=phrase)
    if len(values) == 1:
        return Constraint(field=name, op="has", value=values[0], negate=x.negated, phrase=phrase)
    # "no java or php" and "no java, php" both exclude anyone with either.
    op = "has_any" if any_or or x.negated else "has_all"
    return Constraint(field=name, op=op, value=values, negate=x.negated, phrase=phrase)
