"""Protected attributes and their proxies: requests that select or rank on them are refused.

A request is refused when it asks to select or rank candidates on gender,
race, ethnicity, religion, age, disability, pregnancy, marital or family
status, national origin, names, or appearance, directly ("female") or
through a proxy ("young", "native speaker", "digital native", "English
name").  Phrases that rule such criteria *out* ("regardless of gender",
"equal opportunity") are recognised first and never cause a refusal.

Spoken languages and work authorisation are not proxies: "fluent in German"
and "authorised to work in the EU" are job-related and allowed; "native German
speaker" and "German nationals" are not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ProtectedHit", "find_protected", "safe_spans"]

_NATIONALITIES = (
    "american|british|english|german|french|spanish|italian|dutch|polish|swedish|indian|chinese|japanese|"
    "mexican|brazilian|canadian|irish|scottish|russian|ukrainian|nigerian|pakistani|turkish|arab|european|"
    "asian|african|western|foreign"
)
_PEOPLE = r"(?:candidates?|applicants?|people|persons?|guys?|gals?|folks?|men|women|engineers?|developers?|nationals?|only|citizens?|hires?)"

# (attribute, pattern).  Order matters only for which phrase is reported first at one position.
_RULES: tuple[tuple[str, str], ...] = (
    ("gender", r"\b(?:gender|sex)\b"),
    ("gender", r"\b(?:males?|females?|wom[ae]n|m[ae]n|ladies|lady|girls?|boys?|guys|gentlemen|feminine|masculine)\b"),
    ("gender", r"\b(?:he|she)\s+(?:must|should|needs? to)\b"),
    (
        "race or ethnicity",
        r"\b(?:race|racial|ethnic(?:ity|ally)?|caucasian|hispanic|latin[oax]s?|minorit(?:y|ies)|"
        r"african[- ]american)\b",
    ),
    ("race or ethnicity", rf"\b(?:white|black|brown|asian)\s+{_PEOPLE}"),
    (
        "religion",
        r"\b(?:religion|religious|christians?|muslims?|jewish|jews?|hindus?|sikhs?|buddhists?|atheists?|"
        r"catholics?|church|mosque|synagogue|temple)\b",
    ),
    (
        "age",
        r"\b(?:age|aged|ages|young|younger|youthful|old|older|elderly|millennials?|boomers?|gen[- ]?z|"
        r"digital natives?|fresh blood|retirees?|retirement age)\b",
    ),
    (
        "age",
        r"\b(?:under|below|over|above|less than|more than)\s+\d+\s*(?:years? old|yo)\b|\b\d+\s*(?:years? old|yo)\b",
    ),
    (
        "age",
        r"\bborn (?:in|after|before)\s+(?:19|20)\d\d\b|\b(?:in (?:their|his|her) )?(?:twenties|thirties|forties|fifties|sixties)\b",
    ),
    ("age", r"\b(?:recent|new) (?:college )?grads?\b|\brecent graduates?\b"),
    (
        "disability",
        r"\b(?:disabled|disabilit(?:y|ies)|handicap(?:ped)?|wheelchair|able[- ]bodied|blind|deaf|"
        r"mental(?:ly)? (?:health|illness|ill)|neurodivergent|autis(?:m|tic)|health (?:issues|problems|conditions))\b",
    ),
    (
        "pregnancy",
        r"\b(?:pregnan(?:t|cy)|maternity|paternity|expecting a (?:baby|child)|plans? (?:to have|for) (?:kids|children)|"
        r"start(?:ing)? a family|family plans?)\b",
    ),
    (
        "marital or family status",
        r"\b(?:married|unmarried|marital|spouses?|husband|wife|divorced|widow(?:ed|er)?|"
        r"kids|children|childless|no family|single (?:mothers?|fathers?|parents?|candidates?|"
        r"applicants?|people|men|women))\b",
    ),
    (
        "national origin",
        r"\bnative[- ](?:\w+[- ])?speakers?\b|\bnative (?:english|german|french|spanish|italian|dutch|"
        r"polish|swedish|hindi|mandarin|arabic|japanese|portuguese)\b",
    ),
    (
        "national origin",
        r"\b(?:nationality|nationalities|national origin|ethnic origin|country of (?:birth|origin)|"
        r"citizens?(?:hip)?|immigrants?|foreigners?|expats?|born (?:in|and raised)|accent)\b",
    ),
    (
        "national origin",
        rf"\b(?:{_NATIONALITIES})\s+{_PEOPLE}\b|\b(?:{_NATIONALITIES})s\s+only\b|\bonly\s+(?:{_NATIONALITIES})s?\b",
    ),
    ("name", r"\b(?:named|names?|surnames?|first[- ]names?|last[- ]names?|family names?)\b"),
    (
        "appearance",
        r"\b(?:attractive|good[- ]looking|pretty|handsome|photogenic|beautiful|appearance|"
        r"height|weight|tall|short people|slim|overweight|photo)\b",
    ),
)
_COMPILED = tuple((attr, re.compile(p, re.IGNORECASE)) for attr, p in _RULES)

# Phrases that exclude a protected criterion rather than apply it.
_SAFE = re.compile(
    r"\b(?:regardless of|irrespective of|independent of|no matter (?:the|their|what)|without regard to|"
    r"not based on|ignor(?:e|ing)|don'?t (?:consider|care about|look at)|any)\s+(?:their\s+|the\s+|of\s+)?"
    r"(?:gender|sex|race|ethnicity|religion|age|disability|nationality|national origin|background|name|names|"
    r"marital status|origin)(?:\s*(?:,|or|and)\s*(?:gender|sex|race|ethnicity|religion|age|disability|"
    r"nationality|national origin|marital status|origin|name|names))*\b"
    r"|\bequal opportunit(?:y|ies)(?: employer)?\b|\b(?:fair|unbiased|blind) (?:screening|ranking|hiring|review)\b",
    re.IGNORECASE,
)

_REASONS = {
    "gender": "gender is a protected attribute",
    "race or ethnicity": "race and ethnicity are protected attributes",
    "religion": "religion is a protected attribute",
    "age": "age is a protected attribute, and words like 'young' or 'recent graduate' are proxies for it",
    "disability": "disability and health status are protected attributes",
    "pregnancy": "pregnancy and family plans are protected attributes",
    "marital or family status": "marital and family status are protected attributes",
    "national origin": "national origin and citizenship are protected attributes; 'native speaker' is a proxy "
    "for origin",
    "name": "names are not a job criterion and act as a proxy for gender, ethnicity and origin",
    "appearance": "appearance is not a job criterion and acts as a proxy for protected attributes",
}
_INSTEAD = {
    "age": "Ask for years of experience instead (e.g. 'at least 3 years of experience').",
    "national origin": "Ask for spoken languages or work authorisation instead (e.g. 'fluent in German', "
    "'authorised to work in the EU').",
}


@dataclass(frozen=True)
class ProtectedHit:
    attribute: str
    phrase: str
    start: int
    reason: str


def safe_spans(text: str) -> list[tuple[int, int]]:
    """Spans that rule a protected criterion out ("regardless of age"); they never reach the ranker."""
    return [(m.start(), m.end()) for m in _SAFE.finditer(text)]


def find_protected(text: str, extra: Sequence[tuple[str, str]] = ()) -> ProtectedHit | None:
    """The first phrase of ``text`` that selects or ranks on a protected attribute, or None.

    The general rules apply to every collection; ``extra`` (a domain pack's ``protected``:
    (attribute, regex) pairs) adds rules, it cannot remove one.

    >>> find_protected("young python developers in berlin").attribute
    'age'
    >>> find_protected("python developers, regardless of age") is None
    True
    """
    # Blank out the phrases that exclude protected criteria, keeping offsets.
    masked = _SAFE.sub(lambda m: " " * len(m.group(0)), text)
    best: ProtectedHit | None = None
    rules = (*_COMPILED, *((attr, re.compile(p, re.IGNORECASE)) for attr, p in extra))
    for attr, pat in rules:
        m = pat.search(masked)
        if m and (best is None or m.start() < best.start):
            instead = _INSTEAD.get(attr, "Describe the job-related skills or experience you need instead.")
            why = _REASONS.get(attr, f"{attr} is a protected attribute")
            reason = f"{why}; ranklock never selects or ranks candidates on it. {instead}"
            best = ProtectedHit(attr, text[m.start() : m.end()], m.start(), reason)
    return best
