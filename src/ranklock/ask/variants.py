"""Close variants of a word: the forms a question and a note may write the same word in.

The term rule (ranklock.ask.terms, rule 2) matches words by equal stems or a shared five-letter
prefix, which catches the regular forms (``hosted`` ~ ``host``) but not the irregular ones a
journal is full of ("Which city did I fly to?" beside "Flew to Porto"), nor the parts of a
compound ("Where do I pick up the van?" beside "Pick-up is at the depot").  extractive-v5's
answer check (rule 7) reads a span's words with their variants:

1. **Irregular verbs** (English; :data:`IRREGULAR_VERBS`, base form then past and participle;
   *be, do, have, say* are stop words and left out): each form stands for its base form too,
   so a question and a note that write the verb in different forms match.  Portuguese and Spanish irregular forms are mostly function words
   here (*foi, fue, fiz, hizo* are stop words) and are left out.
2. **Compounds**: a hyphenated word stands for its parts of three letters or more as well
   (``pick-up`` for ``pick``).

The list is part of extractive-v5's pinned rule (hashed into its checksum).
"""

from __future__ import annotations

from collections.abc import Iterable

from .terms import matches

__all__ = ["IRREGULAR_VERBS", "LEMMAS", "matches_variant", "with_variants"]

IRREGULAR_VERBS = tuple(
    tuple(group.split())
    for line in """
    become became|begin began begun|bite bit bitten|blow blew blown|break broke broken
    bring brought|build built|buy bought|catch caught|choose chose chosen|come came|deal dealt|dig dug
    draw drew drawn|drink drank drunk|drive drove driven|eat ate eaten|fall fell fallen|feed fed
    feel felt|fight fought|find found|fly flew flown|forget forgot forgotten|freeze froze frozen|get got gotten
    give gave given|go went gone|grow grew grown|hang hung|hear heard|hide hid hidden|hold held
    keep kept|know knew known|lay laid|lead led|leave left|lend lent|lie lay lain|light lit|lose lost
    make made|mean meant|meet met|pay paid|ride rode ridden|ring rang rung|rise rose risen|run ran
    see saw seen|sell sold|send sent|shake shook shaken|shine shone|shoot shot|show showed shown
    sing sang sung|sink sank sunk|sit sat|sleep slept|speak spoke spoken|spend spent|spin spun|stand stood
    steal stole stolen|stick stuck|sting stung|strike struck|swim swam swum|swing swung|take took taken
    teach taught|tear tore torn|tell told|think thought|throw threw thrown|understand understood|wake woke woken
    wear wore worn|weep wept|win won|write wrote written
    """.splitlines()
    for group in line.split("|")
    if group.strip()
)
#: Each irregular form's base form (a form shared by two verbs, "lay", keeps the first).
LEMMAS: dict[str, str] = {}
for _base, *_forms in IRREGULAR_VERBS:
    for _form in _forms:
        LEMMAS.setdefault(_form, _base)


def with_variants(words: Iterable[str]) -> set[str]:
    """``words`` (folded terms) with each irregular form's base form and each compound's parts.

    >>> sorted(with_variants(["flew", "pick-up"]))
    ['flew', 'fly', 'pick', 'pick-up']
    """
    out = set(words)
    for w in list(out):
        if w in LEMMAS:
            out.add(LEMMAS[w])
        if "-" in w:
            out.update(p for p in w.split("-") if len(p) > 2)
    return out


def matches_variant(term: str, words: set[str]) -> bool:
    """Whether question term ``term`` matches one of ``words`` (already :func:`with_variants`), in any form.

    >>> matches_variant("fly", with_variants(["flew"])), matches_variant("lost", with_variants(["lose"]))
    (True, True)
    """
    return matches(term, words) or (term in LEMMAS and LEMMAS[term] in words)
