"""The deterministic, schema-driven extractor: request text -> :class:`Plan`.

The same request against the same schema always gives the same plan.  It
works in passes over the request, each claiming the characters it explains:

1. protected attributes and their proxies -> ``refusal`` (checked first: a
   request that selects on age is refused whatever else it says);
2. calendar years with a direction ("since 2019", "from 2020 or later") ->
   the one field holding years or dates (:mod:`ranklock.plan.dates`); then
   numbers with units and comparators ("2+ years", "under 90k", "between 3
   and 5 years", "within 2 weeks") -> numeric fields, chosen by unit and by the
   nearest cue word ("experience", "notice", "salary");
3. vocabulary values ("python", "berlin", "master's") -> keyword fields,
   cue phrases ("remote", "sponsorship") -> bool fields, and a keyword field
   named with a value after it ("tagged parts") -> that field, or a question
   when the value is known not to be one of its values;
4. scopes: negation ("no", "without", "except") flips what it covers,
   preference words ("ideally", "a plus") turn what they cover into soft
   preferences;
5. what is left: phrases that state a requirement no field can express
   ("near the office", "culture fit", "must know cobol"), and vocabulary
   values written as ordinary words that no context settles ("team lead") ->
   a ``clarification_request`` naming the phrase; other content words become
   the ranking text.

Each claim records its owner (a mention that becomes a constraint or a
preference, a question, or a deliberate no-op), so the plan's ``parts`` say
where every word of the request went (:mod:`ranklock.plan.partition`).

Every constraint the extractor emits names a declared field and an operator
valid for its type; :func:`ranklock.plan.validate.validate_plan` checks that
again, so plans proposed by other extractors meet the same bar.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from .dates import YearPhrase, calendar_fields, find_years, year_predicate
from .model import Constraint, Part, Plan, Preference, describe_constraint
from .partition import PREAMBLE, is_stop_word, runs, words
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
    r"have to (?:have|know|be)|required|mandatory|essential|is a must|a must|holds?|holding|possess(?:es|ing)?)\b",
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


@dataclass(frozen=True)
class _Concept:
    name: str
    pattern: re.Pattern[str]
    question: str  # {phrase}, {fields} and {field} (the field of unit `needs`) are filled in
    fields: tuple[str, ...] = ()  # fields that would express it if the schema had them
    needs: str | None = None  # the question suggests a field: of this unit ("years", "days", "money") or name


def _concept(
    name: str, pattern: str, question: str, fields: tuple[str, ...] = (), needs: str | None = None
) -> _Concept:
    return _Concept(name, re.compile(pattern, re.IGNORECASE), question, fields, needs)


# Asked when a concept's question would suggest a field the collection does not have.
_NO_FIELD_QUESTION = (
    "{phrase!r} is a requirement that no typed field records (fields: {fields}). Should it be ranking text, or dropped?"
)


# Requirements that read like filters but name something no typed field holds.
_CONCEPTS: tuple[_Concept, ...] = (
    _concept(
        "proximity",
        r"\b(?:near(?:by)?|close to|close by|walking distance|commut\w*|within \d+\s*(?:km|kilometers|kilometres|"
        r"miles|mi|minutes|mins)|local(?:ly)?|on-?site|in[- ]office|in the office|relocat\w*)\b",
        "{phrase!r} is not a field. Which locations should count (the locations field holds cities, "
        "e.g. 'in berlin or hamburg')?",
        needs="locations",
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
        needs="years",
    ),
    _concept(
        "experienced",
        r"\b(?:experienced|seasoned|veteran)\b",
        "{phrase!r} has no exact meaning. How many years of experience should it mean (e.g. 'at least 5 years "
        "of experience')?",
        needs="years",
    ),
    _concept(
        "availability",
        r"\b(?:available (?:immediately|now|asap|soon|right away)|immediately available|asap|"
        r"start (?:immediately|asap|soon|right away)|immediate joiners?|short notice)\b",
        "{phrase!r} has no exact meaning. What is the longest notice period to accept (e.g. 'notice under 30 days')?",
        needs="days",
    ),
    _concept(
        "salary",
        r"\b(?:cheap|affordable|inexpensive|low salary|low cost|within (?:our|the) budget|reasonable salary)\b",
        "{phrase!r} has no exact meaning. What is the highest {field} to accept (e.g. '{field} under 80k')?",
        needs="money",
    ),
    _concept(
        "education",
        r"\b(?:(?:a |any )?(?:university |college )?degree|graduated?|university|college|diploma|educated)\b",
        "{phrase!r} is not one typed value. Which degree is the minimum ({fields})?",
        needs="degree",
    ),
    _concept(
        "clearance",
        r"\b(?:(?:active |valid |current )?(?:security|government|secret|top[- ]secret|ts/sci|sc|dv|nv1|nv2|baseline) )?"
        r"clearances?\b|\b(?:security[- ])?cleared\b",
        "{phrase!r}: no typed field records a security clearance (fields: {fields}). Should it be ranking text, "
        "or dropped?",
        ("clearance", "clearances", "security_clearance"),
    ),
    _concept(
        "licence",
        r"\b(?:(?:valid |clean |full )?(?:driver'?s|driving|drivers|commercial driving|cdl|forklift|pilot'?s?) "
        r"licen[cs]es?|licen[cs]ed)\b",
        "{phrase!r}: no typed field records licences (fields: {fields}). Should it be ranking text, or dropped?",
        ("licenses", "licences", "license", "licence"),
    ),
    _concept(
        "shifts",
        r"\b(?:(?:available|availability|able|willing|open) (?:for|to work|to do) )?(?:(?:night|day|evening|weekend|"
        r"early|late|rotating|split|double) shifts?|shift work|on[- ]call(?: duty)?|weekend work|"
        r"(?:work(?:ing)? )?(?:nights|weekends))\b",
        "{phrase!r}: no typed field records shift availability (fields: {fields}). Should it be ranking text, "
        "or dropped?",
        ("shifts", "shift_availability", "availability"),
    ),
    _concept(
        "start_date",
        r"\b(?:(?:who )?(?:can|could|able to|available to|ready to) )?(?:start|join|begin)(?:s|ing)? "
        r"(?:next|this|in|within|by|on|from|before|early|mid|end of) (?:\w+ ){0,2}?"
        r"(?:week|weeks|month|months|monday|tuesday|wednesday|thursday|friday|january|february|march|april|may|"
        r"june|july|august|september|october|november|december|spring|summer|autumn|fall|winter|year|days?)\b|"
        r"\bavailable (?:from|next|this|by|in) (?:\w+ ){0,2}?(?:week|month|monday|january|february|march|april|may|"
        r"june|july|august|september|october|november|december|year)\b",
        "{phrase!r} is a start date, and no field records one (fields: {fields}); a notice period is not the same "
        "thing. Should it be a notice period (e.g. 'notice under 14 days'), ranking text, or dropped?",
        ("start_date", "available_from"),
    ),
    _concept(
        "certification",
        r"\b(?:certified|certifications?|certificates?)\b",
        "{phrase!r}: certifications are not a typed field. Should it be ranking text rather than a requirement?",
        ("certifications", "certification", "certificates"),
    ),
)


@dataclass(eq=False)
class _Mention:
    start: int
    end: int
    field: str
    value: Any
    kind: str  # "value", "number", "year", "bool", "text" (soft words)
    op: str | None = None  # numbers: the comparison; values: ordinal direction ("up"/"down")
    negated: bool = False
    soft: bool = False


@dataclass(eq=False)
class _Issue:
    """A phrase the planner cannot turn into a constraint with certainty: it becomes a question."""

    pos: int
    phrase: str
    question: str


@dataclass(eq=False)
class _Note:
    """Words claimed on purpose for no effect: "ignored" (shown as a part) or "dropped" (the opening)."""

    role: str
    note: str


_Owner = _Mention | _Issue | _Note
_DROPPED = _Note("dropped", "the request's opening")


@dataclass
class _State:
    """The request being read: which pass claimed each character, and for what (its owner)."""

    text: str
    schema: PlanSchema
    owner: list[int] = field(default_factory=list)  # per character: index into owners, -1 when free
    owners: list[_Owner] = field(default_factory=list)
    mentions: list[_Mention] = field(default_factory=list)
    issues: list[_Issue] = field(default_factory=list)
    _ids: dict[int, int] = field(default_factory=dict)  # id(owner) -> index into owners

    def __post_init__(self) -> None:
        self.owner = [-1] * len(self.text)

    def _index(self, who: _Owner) -> int:
        if id(who) not in self._ids:
            self._ids[id(who)] = len(self.owners)
            self.owners.append(who)
        return self._ids[id(who)]

    def claim(self, start: int, end: int, who: _Owner) -> None:
        """Give the free characters of ``[start, end)`` to ``who``; claimed ones keep their owner."""
        idx = self._index(who)
        for i in range(max(start, 0), min(end, len(self.text))):
            if self.owner[i] < 0:
                self.owner[i] = idx

    def force(self, start: int, end: int, who: _Owner) -> None:
        """Give every character of ``[start, end)`` to ``who``, whoever claimed it before."""
        idx = self._index(who)
        for i in range(max(start, 0), min(end, len(self.text))):
            self.owner[i] = idx

    def owner_of(self, start: int, end: int) -> _Owner | None:
        """The owner of the first claimed character of ``[start, end)``; None when all are free."""
        for i in range(start, end):
            if self.owner[i] >= 0:
                return self.owners[self.owner[i]]
        return None

    def free(self, start: int, end: int) -> bool:
        return all(o < 0 for o in self.owner[start:end])

    def mention(self, m: _Mention) -> _Mention:
        """Record ``m`` and claim its characters for it."""
        self.mentions.append(m)
        self.claim(m.start, m.end, m)
        return m

    def ask(self, start: int, end: int, question: str, phrase: str | None = None, *, force: bool = False) -> _Issue:
        """Record a question about ``[start, end)`` and claim those characters for it."""
        issue = _Issue(start, self.text[start:end].strip() if phrase is None else phrase, question)
        self.issues.append(issue)
        (self.force if force else self.claim)(start, end, issue)
        return issue


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
    text, offsets = _normalize(request)
    base: dict[str, Any] = {"request": request, "collection": collection}
    if not text:
        return Plan(
            kind="clarification_request",
            phrase="",
            question=f"The request is empty. What should the results have (fields: {', '.join(schema.names())})?",
            **base,
        )
    hit = find_protected(text, schema.pack.protected)
    if hit is not None:
        return Plan(kind="refusal", phrase=hit.phrase, attribute=hit.attribute, reason=hit.reason, **base)
    st = _State(text, schema)
    for s, e in safe_spans(text):
        st.claim(s, e, _Note("ignored", "rules a protected attribute out; it is no criterion and never ranked"))
    pre = PREAMBLE.match(text)
    if pre:
        st.claim(0, pre.end(), _DROPPED)
    _years(st)
    _numbers(st)
    _bare_years(st)
    _values(st)
    _bools(st)
    _concepts(st)
    _named_values(st)
    _negations(st)
    _preferences(st)
    _requirements(st)
    _ambiguous_leftovers(st)
    constraints, preferences, placed = _group(st)
    parts = _parts(st, offsets, constraints, placed)
    if st.issues:
        first = min(st.issues, key=lambda i: (i.pos, i.phrase, i.question))
        return Plan(kind="clarification_request", phrase=first.phrase, question=first.question, parts=parts, **base)
    ranking = _ranking_text(st)
    if not constraints and not ranking and not preferences:
        return Plan(
            kind="clarification_request",
            phrase=text,
            question="Nothing in the request names a "
            f"requirement or a topic. What should the candidates have (fields: {', '.join(schema.names())})?",
            parts=parts,
            **base,
        )
    return Plan(
        kind="answer", constraints=constraints, preferences=preferences, ranking_text=ranking, parts=parts, **base
    )


def _normalize(request: str) -> tuple[str, list[int]]:
    """The request with dashes unified and whitespace collapsed, and each character's offset in ``request``."""
    raw = request.replace("\u2013", "-").replace("\u2014", "-")
    chars: list[str] = []
    offsets: list[int] = []
    for m in re.finditer(r"\S+", raw):
        if chars:
            chars.append(" ")
            offsets.append(m.start() - 1)
        chars.extend(m.group(0))
        offsets.extend(range(m.start(), m.end()))
    return "".join(chars), offsets


def _has_content(text: str, start: int, end: int) -> bool:
    return any(not is_stop_word(text[s:e]) for s, e in words(text, start, end))


def _parts(st: _State, offsets: list[int], constraints: list[Constraint], placed: dict[int, int]) -> list[Part]:
    """Which phrase went where: every word labelled by its owner, consecutive words of one owner merged."""
    labelled: list[tuple[int, int, Hashable | None]] = []
    for s, e in words(st.text):
        who = st.owner_of(s, e)
        if who is None:
            label: Hashable | None = None if is_stop_word(st.text[s:e]) else "ranking_text"
        elif who is _DROPPED:
            label = None
        elif isinstance(who, _Mention) and id(who) in placed and not who.soft:
            label = ("constraint", placed[id(who)])  # values merged into one constraint stay one phrase
        else:
            label = ("owner", id(who))
        labelled.append((s, e, label))
    by_id = {id(o): o for o in st.owners}
    out: list[Part] = []
    phrases = runs(st.text, labelled)
    # A stray stop word claimed with its clause ("of" in "5 years ... of experience") is no phrase of
    # its own when its owner has a phrase with content words.
    has_content = {label for s, e, label in phrases if _has_content(st.text, s, e)}
    for s, e, label in phrases:
        if label in has_content and not _has_content(st.text, s, e):
            continue
        where = {"phrase": st.text[s:e], "start": offsets[s], "end": offsets[e - 1] + 1}
        if label == "ranking_text":
            out.append(Part(role="ranking_text", **where))
        elif isinstance(label, tuple) and label[0] == "constraint":
            c = constraints[label[1]]
            out.append(
                Part(role="constraint", field=c.field, predicate=describe_constraint(c), constraint=label[1], **where)
            )
        else:
            who = by_id[label[1]] if isinstance(label, tuple) else None
            if isinstance(who, _Issue):
                out.append(Part(role="not_understood", question=who.question, **where))
            elif isinstance(who, _Mention):
                out.append(Part(role="preference", field=who.field or None, **where))
            elif isinstance(who, _Note):
                out.append(Part(role="ignored", note=who.note, **where))
    return out


# -- pass 2: numbers -------------------------------------------------------------------------


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


# -- pass 2a: calendar years ------------------------------------------------------------------------

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


def _claim_cues(st: _State, mention: _Mention) -> None:
    lo, hi = _clause_bounds(st.text, mention.start, mention.end)
    for cue in (*st.schema.cues(mention.field), "period", "of"):
        if cue == "in":
            continue
        for m in re.finditer(rf"\b{re.escape(cue)}\b", st.text[lo:hi], re.IGNORECASE):
            st.claim(lo + m.start(), lo + m.end(), mention)


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
        mention = st.mention(_Mention(s, e, name, value, "value"))
        if st.schema.hints[name].ordinal and value in st.schema.hints[name].ordinal:
            before, after = st.text[max(0, s - 30) : s], st.text[e : e + 30]
            if _ORDINAL_UP_BEFORE.search(before) or _ORDINAL_UP_AFTER.search(after):
                mention.op = "up"
            elif _ORDINAL_DOWN_BEFORE.search(before) or _ORDINAL_DOWN_AFTER.search(after):
                mention.op = "down"
            for rx in (_ORDINAL_UP_AFTER, _ORDINAL_DOWN_AFTER):
                am = rx.search(after)
                if am:
                    st.claim(e, e + am.end(), mention)
            for rx in (_ORDINAL_UP_BEFORE, _ORDINAL_DOWN_BEFORE):
                bm = rx.search(before)
                if bm:
                    st.claim(s - len(before) + bm.start(), s, mention)
        _claim_field_cue_before(st, mention)
        _claim_field_cue_after(st, mention)
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
                    st.mention(_Mention(s, e, f.name, v, "value"))
                    changed = True


def _claim_field_cue_after(st: _State, mention: _Mention) -> None:
    """Claim a cue word right after a value ("master's *degree*", "senior *level*")."""
    end = mention.end
    after = st.text[end : end + 20]
    for cue in sorted(st.schema.cues(mention.field), key=len, reverse=True):
        m = re.match(rf"(?:'s)?\s+{re.escape(cue)}\b", after, re.IGNORECASE)
        if m and cue not in ("in", "years"):
            st.claim(end, end + m.end(), mention)
            return


def _claim_field_cue_before(st: _State, mention: _Mention) -> None:
    """Claim a cue phrase right before a value ("fluent in", "authorised to work in the", "tagged")."""
    start = mention.start
    before = st.text[max(0, start - 40) : start]
    for cue in sorted(st.schema.cues(mention.field), key=len, reverse=True):
        if cue == "in":
            continue
        m = re.search(
            rf"\b{re.escape(cue)}\b(?:\s+(?:in|the|with|for|as))*\s*:?\s*(?:{_QUALIFIER}\s+)?$", before, re.IGNORECASE
        )
        if m:
            st.claim(start - len(before) + m.start(), start, mention)
            return


def _named_values(st: _State) -> None:
    """A keyword field named in the request with a value after it ("tagged parts", "category: news").

    The field's own name (or a hint's value cue: "speaks X" for ``languages``) makes the mapping
    certain. A value the field is known not to hold is asked about; when the field's values are
    unknown (none stored yet, or too many to list) the value is taken as written.
    """
    for f in st.schema.fields:
        cues = (*st.schema.name_cues(f.name), *st.schema.hints[f.name].value_cues)
        if not cues or st.schema.field(f.name) is None or f.type not in ("keyword", "keyword[]"):
            continue
        alts = "|".join(re.escape(c) for c in sorted(cues, key=len, reverse=True))
        rx = (
            rf"\b(?:{alts})\b\s*(?:[:=]|\bwith\b|\bas\b)?\s*(?:{_QUALIFIER}\s+)?"
            r"(?:\"([^\"]+)\"|'([^']+)'|([^\W_][\w+#.-]*[^\W_]|[^\W_]))"
        )
        for m in re.finditer(rx, st.text, re.IGNORECASE):
            vs, ve = next((m.start(g), m.end(g)) for g in (1, 2, 3) if m.group(g) is not None)
            raw = st.text[vs:ve]
            if not st.free(m.start(), m.end()) or (m.group(3) is not None and is_stop_word(raw)):
                continue
            vocab = st.schema.vocab.get(f.name, [])
            if vocab:
                known = ", ".join(vocab[:8]) + (", ..." if len(vocab) > 8 else "")
                st.ask(
                    m.start(),
                    m.end(),
                    f"{st.text[m.start() : m.end()]!r} names the field {f.name}, but {raw!r} is not one of its "
                    f"{len(vocab)} known values ({known}). Which value did you mean?",
                )
                continue
            st.mention(_Mention(vs, ve, f.name, raw, "value"))
            st.claim(m.start(), m.end(), st.mentions[-1])


# Words between a field's cue and its value that qualify, not name, the value ("speaks *fluent* german").
_QUALIFIER = r"(?:fluent|fluently|good|basic|business|conversational|professional|working)"


def _bools(st: _State) -> None:
    for f in st.schema.fields:
        if f.type != "bool":
            continue
        hints = st.schema.hints[f.name]
        pats = hints.true_cues or (rf"\b{re.escape(f.name.replace('_', ' '))}\b",)
        for p in pats:
            for m in re.finditer(p, st.text, re.IGNORECASE):
                if st.free(m.start(), m.end()):
                    st.mention(_Mention(m.start(), m.end(), f.name, True, "bool"))


# -- pass 4: scopes ---------------------------------------------------------------------------


def _negations(st: _State) -> None:
    for m in _NEGATION.finditer(st.text):
        if not st.free(m.start(), m.end()):
            continue
        end = _scope_end(st.text, m.end())
        inside = [x for x in st.mentions if m.end() <= x.start < end]
        if not inside:
            words = _content_words(st, m.end(), end)
            if words:
                phrase = st.text[m.start() : end].strip()
                st.ask(
                    m.start(),
                    end,
                    f"{phrase!r} excludes something no typed field records "
                    f"(fields: {', '.join(st.schema.names())}). Which field and value should be "
                    "excluded?",
                    phrase,
                )
            else:
                st.claim(m.start(), m.end(), _Note("ignored", "a negation with nothing after it to negate"))
            continue
        for x in inside:
            x.negated = not x.negated
        # The rest of a negated phrase ("no agency *recruiters*") describes what is excluded;
        # it must not become ranking text, which would pull those candidates up.
        st.claim(m.start(), end, inside[0])


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
        owner: _Owner | None = None
        for x in list(st.mentions):
            if s <= x.start < e:
                if x.kind != "value":
                    phrase = st.text[x.start : x.end]
                    issue = st.ask(
                        x.start,
                        x.end,
                        f"{phrase!r} is stated as a preference, but a number or yes/no can only be a "
                        "hard requirement here. Should it be required, or dropped?",
                        st.text[min(s, m.start()) : max(e, m.end())].strip(),
                        force=True,
                    )
                    owner = owner or issue
                x.soft = True
                owner = owner or x
        for w in _content_words(st, s, e):
            x = st.mention(_Mention(w[0], w[1], "", st.text[w[0] : w[1]], "text", soft=True))
            owner = owner or x
        st.claim(m.start(), m.end(), owner or _Note("ignored", "a preference word with nothing to apply to"))


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
        inside = [x for x in st.mentions if s <= x.start < e]
        if inside:
            st.claim(m.start(), m.end(), inside[0])
            continue
        words = _content_words(st, s, e)
        if words:
            phrase = st.text[words[0][0] : words[-1][1]]
            issue = st.ask(
                words[0][0],
                words[-1][1],
                f"{phrase!r} is stated as a requirement, but it is not a value of "
                f"any typed field (fields: {', '.join(st.schema.names())}). Should it be ranking "
                "text instead, or which field value did you mean?",
                phrase,
            )
            st.claim(m.start(), m.end(), issue)
        else:
            st.claim(m.start(), m.end(), _Note("ignored", "a requirement word with nothing to require"))


def _ambiguous_leftovers(st: _State) -> None:
    """A vocabulary value written as an ordinary word ("excel", "lead") is asked about, not silently ranked."""
    for f in st.schema.fields:
        for s, e, v in find_values(st.text, loose_table(st.schema.vocab.get(f.name, []))):
            if v in _NEVER_ASK or not st.free(s, e):
                continue
            word = st.text[s:e]
            st.ask(
                s,
                e,
                f"{word!r} is also the {f.name} value {v!r}. Is it a requirement (write it "
                f"as {v.capitalize()!r} to require it) or just a word to rank by?",
            )


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
            fields = ", ".join(st.schema.names()) or "none"
            home = _home_field(st.schema, c.needs)
            question = c.question if c.needs is None or home is not None else _NO_FIELD_QUESTION
            if c.name == "education" and home is not None:
                order = st.schema.hints["degree"].ordinal or tuple(st.schema.vocab.get("degree", []))
                fields = "degree: " + " < ".join(order)
            text = question.format(phrase=phrase, fields=fields, field=(home or "").replace("_", " "))
            st.ask(m.start(), end, text, phrase)


def _home_field(schema: PlanSchema, needs: str | None) -> str | None:
    """The field a concept's question can point to: one of unit ``needs``, or the field named ``needs``."""
    if needs is None:
        return None
    if schema.field(needs) is not None:
        return needs
    return next((n for n in _numeric_fields(schema) if schema.unit(n) == needs), None)


_EXTENDED = frozenset({"proximity", "judgement", "certification", "clearance", "licence"})


# -- pass 5: assemble -----------------------------------------------------------------------------


def _content_words(st: _State, start: int, end: int) -> list[tuple[int, int]]:
    out = []
    for s, e in words(st.text, start, end):
        if st.free(s, e) and not is_stop_word(st.text[s:e]):
            out.append((s, e))
    return out


def _ranking_text(st: _State) -> str:
    return " ".join(st.text[s:e] for s, e in _content_words(st, 0, len(st.text)))


def _group(st: _State) -> tuple[list[Constraint], list[Preference], dict[int, int]]:
    """The constraints and preferences the mentions make, and which constraint each mention went into."""
    constraints: list[Constraint] = []
    placed: dict[int, int] = {}  # id(mention) -> index into constraints
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
        if x.kind in ("number", "bool", "year"):
            value = x.value
            negate = x.negated
            if x.kind == "bool" and negate:
                value, negate = not value, False
            placed[id(x)] = len(constraints)
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
        for g in group:
            placed[id(g)] = len(constraints)
        constraints.append(_list_constraint(st, group, any_or))
        i = j
    merged, new_index = _merge_has(constraints)
    return merged, preferences, {m: new_index[c] for m, c in placed.items()}


def _merge_has(constraints: list[Constraint]) -> tuple[list[Constraint], list[int]]:
    """Positive ``has``/``has_all`` on one field are one ``has_all``: "python ... and also docker".

    Returns the merged list and, for each input constraint, its index in that list.
    """
    out: list[Constraint] = []
    new_index: list[int] = []
    first: dict[str, int] = {}
    for c in constraints:
        if c.negate or c.op not in ("has", "has_all"):
            new_index.append(len(out))
            out.append(c)
            continue
        if c.field not in first:
            first[c.field] = len(out)
            new_index.append(len(out))
            out.append(c)
            continue
        new_index.append(first[c.field])
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
    return out, new_index


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
