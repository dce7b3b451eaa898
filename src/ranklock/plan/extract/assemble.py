"""Plan assembly: run the passes in order, group the mentions into constraints and preferences, the parts."""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

from ..model import Constraint, Part, Plan, Preference, describe_constraint
from ..partition import PREAMBLE, is_stop_word, runs, words
from ..protected import find_protected, safe_spans
from ..schema import PlanSchema
from .concepts import _concepts
from .numbers import _bare_years, _numbers, _years
from .scopes import _LIST_GLUE, _negations, _preferences, _requirements
from .state import _DROPPED, _content_words, _Issue, _Mention, _Note, _State
from .values import _ambiguous_leftovers, _bools, _named_values, _values


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
    phrases = runs(labelled)
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
