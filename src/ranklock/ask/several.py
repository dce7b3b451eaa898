"""Questions that ask for several things: extractive-v6's list questions (English, Portuguese, Spanish).

A list question is answered by every span that answers it, each cited, gathered from several
notes (extractive-v6, rule 9); any other question by its best span.  The rule, pinned (the lists
are hashed into :data:`RULES_SHA256`, which v6's checksum holds).  Accents folded, a question asks
for several when:

1. it opens with a plural question word (*quiénes, quais, cuáles*), or with *who all*, *who
   were* or *who are*;
2. *which / what / que / qual / cual* is followed by a plural noun: a word of four letters or more
   ending in *s* but not in *ss*, *us*, *is* (*class*, *bus*, *this*), and no function word or
   verb form (*What is…*, *Which does…*) nor a word that is singular in its plural form
   (:data:`SINGULAR_S`: *news, series, species*);
3. it opens with a word that asks for a list (:data:`LIST_VERBS`: *list, name, enumerate, lista,
   enumera, nombra…*), which is then no topic word: the thing listed is.

("All the" says nothing alone: "What did I swap all the lamps for?" asks for one thing.)
"""

from __future__ import annotations

import hashlib
import json

from .answer_type import FUNCTION_WORDS
from .terms import terms

__all__ = ["LIST_VERBS", "RULES_SHA256", "SINGULAR_S", "asks_for_several", "list_cues"]


def _w(text: str) -> frozenset[str]:
    return frozenset(text.split())


PLURAL_QUESTION_WORDS = _w("quienes quais cuales")
WHICH = _w("which what que qual cual")
#: Words after "who" that make it plural.
PLURAL_WHO = _w("all were are")
#: A question's first word that asks for a list (en, pt, es imperatives).
LIST_VERBS = _w("list name enumerate itemise itemize lista liste enumera enumere nomeia nombra menciona")
#: Words ending in s that are singular (or no noun at all).
SINGULAR_S = _w(
    "news series species lens physics mathematics economics always perhaps yes has was does is his its this thus "
    "christmas chess gas plus bonus campus status virus atlas canvas"
)

RULES_SHA256 = hashlib.sha256(
    json.dumps(
        {
            "plural_question_words": sorted(PLURAL_QUESTION_WORDS),
            "which": sorted(WHICH),
            "plural_who": sorted(PLURAL_WHO),
            "list_verbs": sorted(LIST_VERBS),
            "singular_s": sorted(SINGULAR_S),
        }
    ).encode("utf-8")
).hexdigest()


def _plural(word: str) -> bool:
    return (
        len(word) >= 4
        and word.endswith("s")
        and not word.endswith(("ss", "us", "is"))
        and word not in SINGULAR_S
        and word not in FUNCTION_WORDS
    )


def asks_for_several(question: str) -> bool:
    """Whether ``question`` asks for several things (rules 1 to 3).

    >>> [asks_for_several(q) for q in ("Which cities did I fly to?", "Which class is she in?", "List the machines.")]
    [True, False, True]
    >>> asks_for_several("¿Quiénes vinieron?"), asks_for_several("Who leads Orchard?")
    (True, False)
    """
    t = terms(question)
    if not t:
        return False
    if t[0] in PLURAL_QUESTION_WORDS or t[0] in LIST_VERBS:
        return True
    if t[0] == "who" and len(t) > 1 and t[1] in PLURAL_WHO:
        return True
    return any(w in WHICH and _plural(t[i + 1]) for i, w in enumerate(t[:-1]))


def list_cues(question: str) -> frozenset[str]:
    """The words that only say a list is asked for (rule 3's opening verb): no topic words.

    >>> sorted(list_cues("List the machines on the home network."))
    ['list']
    """
    t = terms(question)
    return frozenset(t[:1]) & LIST_VERBS
