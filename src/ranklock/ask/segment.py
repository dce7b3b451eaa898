"""Sentence segmentation: a pinned rule set per language, never the host locale.

The extractive generator quotes whole sentences, so where a sentence ends must
not depend on the machine.  The rules, in order:

1. A blank line (two line breaks, optionally with spaces between) always ends a sentence.
2. Otherwise a sentence may end after ``.``, ``!``, ``?`` or ``…`` (one or more, then any
   closing quotes or brackets) that is followed by whitespace or the end of the text.
3. Such a candidate is *not* an end when the next non-space character is a lowercase
   letter ("p. ex. o João", "etc. and"), or a comma, semicolon or colon.
4. A single ``.`` is not an end when the word before it is an abbreviation of the
   language (``Sr.``, ``Dra.``, ``e.g.``), when the two words before it are one
   (``p. ex.``, ``p. ej.``, ``EE. UU.``), or when that word is a single uppercase letter
   (an initial: "J. R. Tolkien").

The abbreviation lists below are part of the rules: changing one changes
:data:`RULES_SHA256`, which the extractive generator records as its checksum,
so a replay reports it.
"""

from __future__ import annotations

import hashlib
import json
import re

__all__ = ["ABBREVIATIONS", "LANGUAGES", "RULES_SHA256", "language_code", "sentence_spans", "sentences"]


def _entries(text: str) -> frozenset[str]:
    """A rule list written as ``a|b|c`` (entries may contain spaces: ``p. ex``)."""
    return frozenset(text.split("|"))


#: Abbreviations that do not end a sentence, lowercase, without their final dot.
ABBREVIATIONS: dict[str, frozenset[str]] = {
    "en": _entries(
        "mr|mrs|ms|dr|prof|sr|jr|st|mt|vs|e.g|i.e|approx|dept|fig|no|nos|inc|ltd|co|corp|jan|feb|mar|apr|"
        "jun|jul|aug|sep|sept|oct|nov|dec"
    ),
    "pt": _entries(
        "sr|sra|srta|srs|dr|dra|drs|dras|prof|profa|eng|exmo|exma|v.exa|p. ex|pág|págs|pp|n.º|nº|av|dto|"
        "cia|ltda|séc|jan|fev|mar|abr|mai|jun|jul|ago|set|out|nov|dez|sto|sta"
    ),
    "es": _entries(
        "sr|sra|srta|sres|dr|dra|dña|ud|uds|vd|vds|prof|profa|lic|ing|p. ej|pág|págs|núm|av|avda|cía|s.a|"
        "ee|ee. uu|ee.uu|aprox|ene|feb|mar|abr|may|jun|jul|ago|sep|sept|oct|nov|dic|sto|sta"
    ),
}

#: PostgreSQL text-search language -> rule set.  Any other language gets the union of all three.
LANGUAGES = {"english": "en", "portuguese": "pt", "spanish": "es"}

_ALL = frozenset().union(*ABBREVIATIONS.values())

RULES_SHA256 = hashlib.sha256(
    json.dumps({k: sorted(v) for k, v in sorted(ABBREVIATIONS.items())}, ensure_ascii=False).encode("utf-8")
).hexdigest()

_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_END = re.compile(r"(?:[.!?…]+)[\"'”’»)\]]*(?=\s|$)")
_LEADING = "\"'“‘«([¿¡"


def language_code(language: str) -> str:
    """The rule set for a text-search language: ``en``, ``pt``, ``es`` or ``all`` (the union)."""
    return LANGUAGES.get(language, "all")


def _abbreviations(code: str) -> frozenset[str]:
    return _ALL if code == "all" else ABBREVIATIONS[code]


def _ends_here(text: str, m: re.Match[str], abbrevs: frozenset[str]) -> bool:
    rest = text[m.end() :].lstrip()
    if rest and (rest[0].islower() or rest[0] in ",;:"):
        return False
    if m.group(0) != ".":
        return True
    before = text[: m.start()]
    words = before.split()
    if not words:
        return True
    last = words[-1].lstrip(_LEADING)
    if len(last) == 1 and last.isupper():
        return False  # an initial
    if last.lower() in abbrevs:
        return False
    if len(words) >= 2:
        pair = f"{words[-2].lstrip(_LEADING)} {last}".lower()
        if pair in abbrevs:
            return False
    return True


def sentence_spans(text: str, language: str = "en") -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each sentence of ``text``, whitespace trimmed, in order.

    ``language`` is a rule-set code (``en``, ``pt``, ``es``, ``all``) or a text-search language.

    >>> [text[a:b] for a, b in sentence_spans(text := "A Dra. Lima chegou. Saiu cedo.", "pt")]
    ['A Dra. Lima chegou.', 'Saiu cedo.']
    """
    code = language if language in ABBREVIATIONS or language == "all" else language_code(language)
    abbrevs = _abbreviations(code)
    cuts: list[int] = []
    for para in _PARAGRAPH.finditer(text):
        cuts.append(para.start())
    for m in _END.finditer(text):
        if _ends_here(text, m, abbrevs):
            cuts.append(m.end())
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in [*sorted(set(cuts)), len(text)]:
        if cut <= start:
            continue
        a, b = start, cut
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            spans.append((a, b))
        start = cut
    return spans


def sentences(text: str, language: str = "en") -> list[str]:
    """The sentences of ``text``, verbatim (see :func:`sentence_spans`)."""
    return [text[a:b] for a, b in sentence_spans(text, language)]
