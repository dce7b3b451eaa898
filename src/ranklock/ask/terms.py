"""The term rule the extractive generators share: terms, stop words, key terms, stems and matching.

1. **Terms.**  Text is NFKC-normalised, case-folded and stripped of accents;
   a term is a run of letters and digits, with inner hyphens or underscores
   kept (``XJ-900`` is one term ``xj-900``).  The question's terms minus the
   stop words below (English, Portuguese, Spanish) are its *content terms* Q,
   each counted once.  *Key terms* K are the content terms that mix letters
   and digits (identifiers: ``xj-900``) or that the question capitalises
   anywhere but its first word (names, codenames), except calendar words
   (:data:`CALENDAR`): dates live in typed fields and filters, rarely
   in the words of a note.
2. **Match.**  A question term matches a text term when they are equal, when
   their stems are equal (the stem drops the first of the suffixes
   :data:`SUFFIXES` that leaves at least 3 characters: ``hosted`` ~ ``host``, ``moved`` ~ ``move``),
   or when both have at least :data:`PREFIX` characters and share their first
   :data:`PREFIX` (``recommend`` ~ ``recommended``).

Every list here is part of the rules: the generators hash them into their checksums.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "CALENDAR",
    "PREFIX",
    "PRESENT",
    "QUARTERS",
    "STOP_WORDS",
    "SUFFIXES",
    "content_terms",
    "fold",
    "key_terms",
    "matches",
    "stem",
    "terms",
]

PREFIX = 5
#: Stripped (the first that leaves >= 3 characters) before comparing stems.
SUFFIXES = ("ing", "ed", "es", "s", "e")


def _words(text: str) -> list[str]:
    return text.split()


#: Question and function words of English, Portuguese and Spanish, accents stripped.
STOP_WORDS = frozenset(
    _words(
        """
    a about after again all also am an and any are as at be been before being but by can could did do does
    doing done during each either ever for from had has have having he her here hers him his how i if in
    into is it its just me mine more most my no nor not of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they this those through
    to too under until up upon very was we were what when where which while who whom whose why will with
    would you your yours ever tell know say said
    o os as um uma uns umas de do da dos das em no na nos nas por pelo pela pelos pelas para com sem sob
    sobre e ou mas que quem qual quais quando onde como porque porquê se eu tu ele ela eles elas voce
    voces meu minha meus minhas seu sua seus suas foi era sao ser estar esta este isto isso aquilo ao aos
    ja nao sim mais muito quanto quantos quanta quantas houve tem tinha fiz fez
    el la los las un una unos unas del al en y o pero que quien quienes cual cuales cuando donde como por
    para con sin sobre entre yo mi mis tu tus su sus es fue era son ser estar esta este esto eso lo le les
    se ya no si mas muy cuanto cuantos cuanta cuantas hubo tiene tenia hice hizo
    """
    )
)

#: Month and weekday names (en, pt, es; accents stripped): never key terms.
CALENDAR = frozenset(
    _words(
        """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
    janeiro fevereiro marco abril maio junho julho agosto setembro outubro novembro dezembro
    segunda terca quarta quinta sexta sabado domingo
    enero febrero marzo mayo junio julio septiembre octubre noviembre diciembre
    lunes martes miercoles jueves viernes
    """
    )
)

#: Quarters are calendar words too ("Q2 2024" selects notes by date, like a month); extractive-v3 on.
QUARTERS = frozenset(_words("q1 q2 q3 q4"))

#: Markers of a question about the present state (en, pt, es; accents folded); extractive-v3 on.
PRESENT = frozenset(
    _words(
        """
    now currently current still latest today nowadays presently
    agora atualmente atual ainda hoje
    ahora actualmente actual todavia aun hoy
    """
    )
)

_TERM = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")


def fold(text: str) -> str:
    """NFKC, case-folded, combining marks dropped: the form every term comparison uses."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def terms(text: str) -> list[str]:
    """The terms of ``text`` in order (rule 1, stop words kept)."""
    return _TERM.findall(fold(text))


def content_terms(question: str) -> list[str]:
    """The question's content terms Q, each once, in order of first appearance (rule 1)."""
    out: list[str] = []
    for t in terms(question):
        if t not in STOP_WORDS and t not in out:
            out.append(t)
    return out


def key_terms(question: str, calendar: frozenset[str] | None = None) -> list[str]:
    """Identifiers, and names the question capitalises past its first word, minus calendar words (rule 1)."""
    q = content_terms(question)
    raw = _TERM.findall(unicodedata.normalize("NFKC", question))
    capitalised = {fold(w) for w in raw[1:] if w[:1].isupper()}

    def identifier(t: str) -> bool:
        return any(ch.isdigit() for ch in t) and any(ch.isalpha() for ch in t)

    cal = CALENDAR if calendar is None else calendar
    return [t for t in q if t not in cal and (identifier(t) or t in capitalised)]


def stem(term: str) -> str:
    """``term`` without the first suffix of :data:`SUFFIXES` that leaves at least 3 characters (rule 2)."""
    for suffix in SUFFIXES:
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    return term


def matches(q: str, text_terms: set[str]) -> bool:
    """Whether question term ``q`` matches one of ``text_terms`` (rule 2)."""
    if q in text_terms:
        return True
    qs = stem(q)
    head = q[:PREFIX] if len(q) >= PREFIX else None
    return any(stem(w) == qs or (head is not None and len(w) >= PREFIX and w[:PREFIX] == head) for w in text_terms)
