"""Negation and preference scopes: "no", "without", "ideally", "a plus", "must"; where a scope ends."""

from __future__ import annotations

import re

from .state import _content_words, _Mention, _Note, _Owner, _State

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


def _clause_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    left = max((m.end() for m in _CLAUSE_BREAK.finditer(text, 0, start)), default=0)
    right_m = _CLAUSE_BREAK.search(text, end)
    return left, right_m.start() if right_m else len(text)


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
