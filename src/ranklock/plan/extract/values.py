"""Vocabulary matching: keyword values, loose values, a field named before or after its value, bool cues."""

from __future__ import annotations

import re

from ..partition import is_stop_word
from ..vocab import find_values, loose_table
from .cues import _cue_distance
from .scopes import _LIST_GLUE, _clause_bounds
from .state import _content_words, _Mention, _State

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
