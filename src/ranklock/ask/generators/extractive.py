"""The extractive generator: no model, deterministic, every word of its answer quoted from a chunk.

The pinned scoring rule (version :data:`RULE_VERSION`; the checksum recorded
with each answer hashes this rule's constants and the segmentation rules):

1. **Terms.**  Text is NFKC-normalised, case-folded and stripped of accents;
   a term is a run of letters and digits, with inner hyphens or underscores
   kept (``XJ-900`` is one term ``xj-900``).  The question's terms minus the
   stop words below (English, Portuguese, Spanish) are its *content terms* Q,
   each counted once.  *Key terms* K are the content terms that mix letters
   and digits (identifiers: ``xj-900``) or that the question capitalises
   anywhere but its first word (names, codenames), except month and weekday
   names (:data:`CALENDAR`): dates live in typed fields and filters, rarely
   in the words of a note.
2. **Match.**  A question term matches a text term when they are equal, when
   their stems are equal (the stem drops the first of the suffixes
   :data:`SUFFIXES` that leaves at least 3 characters: ``hosted`` ~ ``host``, ``moved`` ~ ``move``),
   or when both have at least :data:`PREFIX` characters and share their first
   :data:`PREFIX` (``recommend`` ~ ``recommended``).
3. **Qualify a chunk.**  A chunk can answer when it matches at least
   need = max(1, ceil(|Q| / 3)) content terms and, if K is not empty, at
   least one key term: a chunk about someone or something else does not
   answer a question about this one, however many other words it shares.
4. **Score a sentence.**  Sentences are cut by ranklock.ask.segment with the
   union of the English, Portuguese and Spanish rules (a journal mixes
   languages inside one collection, so the collection's text-search language
   says nothing about a given note).  A sentence of a qualifying chunk scores
   the sum, over the content terms it matches, of N / cf(t), an exact
   fraction: N chunks were given and cf(t) of them match t, so a term every
   chunk shares (the name retrieval found them by) counts least and the word
   only the answering note has counts most.
5. **Select.**  The best sentence, then any other scoring at least 3/4 as
   much, ordered by score (high first), then passage number, then position in
   the chunk; identical sentences are kept once; at most
   :data:`MAX_SENTENCES`, each followed by its ``[n]``.
6. **Abstain** with "The journal does not say." when no chunk was retrieved,
   when the question has no content term, or when no chunk qualifies.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from fractions import Fraction

from ..model import ABSTAIN, Draft, DraftCitation, GenerationRequest, GeneratorInfo
from ..segment import RULES_SHA256, sentence_spans

__all__ = ["ExtractiveGenerator", "STOP_WORDS", "content_terms", "key_terms", "stem", "terms"]

RULE_VERSION = "extractive-v2"
PREFIX = 5
MAX_SENTENCES = 3
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

_TERM = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def terms(text: str) -> list[str]:
    """The terms of ``text`` in order (rule 1, stop words kept)."""
    return _TERM.findall(_fold(text))


def content_terms(question: str) -> list[str]:
    """The question's content terms Q, each once, in order of first appearance (rule 1)."""
    out: list[str] = []
    for t in terms(question):
        if t not in STOP_WORDS and t not in out:
            out.append(t)
    return out


def key_terms(question: str) -> list[str]:
    """Identifiers, and names the question capitalises past its first word, minus calendar words (rule 1)."""
    q = content_terms(question)
    raw = _TERM.findall(unicodedata.normalize("NFKC", question))
    capitalised = {_fold(w) for w in raw[1:] if w[:1].isupper()}

    def identifier(t: str) -> bool:
        return any(ch.isdigit() for ch in t) and any(ch.isalpha() for ch in t)

    return [t for t in q if t not in CALENDAR and (identifier(t) or t in capitalised)]


def stem(term: str) -> str:
    """``term`` without the first suffix of :data:`SUFFIXES` that leaves at least 3 characters (rule 2)."""
    for suffix in SUFFIXES:
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    return term


def _matches(q: str, text_terms: set[str]) -> bool:
    if q in text_terms:
        return True
    qs = stem(q)
    head = q[:PREFIX] if len(q) >= PREFIX else None
    return any(stem(w) == qs or (head is not None and len(w) >= PREFIX and w[:PREFIX] == head) for w in text_terms)


_RULE_CHECKSUM = hashlib.sha256(
    json.dumps(
        {
            "version": RULE_VERSION,
            "prefix": PREFIX,
            "max_sentences": MAX_SENTENCES,
            "suffixes": SUFFIXES,
            "calendar": sorted(CALENDAR),
            "stop_words": sorted(STOP_WORDS),
            "segmentation": RULES_SHA256,
            "abstain": ABSTAIN,
            "need": "ceil(|Q|/3)",
            "select": "score >= 3/4 best",
        },
        ensure_ascii=False,
    ).encode("utf-8")
).hexdigest()


class ExtractiveGenerator:
    """Answers with verbatim sentences of the chunks, chosen by the pinned rule above.

    >>> ExtractiveGenerator().info().name
    'extractive'
    """

    name = "extractive"

    def info(self) -> GeneratorInfo:
        return GeneratorInfo(
            name=self.name,
            model=RULE_VERSION,
            checksum=_RULE_CHECKSUM,
            params={"prefix": PREFIX, "max_sentences": MAX_SENTENCES},
        )

    def generate(self, request: GenerationRequest) -> Draft:
        q = content_terms(request.question)
        if not q or not request.chunks:
            return Draft(answer=ABSTAIN, citations=(), abstained=True)
        keys = set(key_terms(request.question))
        need = max(1, math.ceil(len(q) / 3))
        # Per chunk: its sentences with the terms each matches, and the terms the chunk matches at all.
        split: list[tuple[int, list[tuple[int, str, set[str]]], set[str]]] = []
        cf = dict.fromkeys(q, 0)
        for chunk in request.chunks:
            sentences = []
            for pos, (a, b) in enumerate(sentence_spans(chunk.text, "all")):
                words = set(terms(chunk.text[a:b]))
                sentences.append((pos, chunk.text[a:b], {t for t in q if _matches(t, words)}))
            matched = set().union(*(m for *_, m in sentences)) if sentences else set()
            for t in matched:
                cf[t] += 1
            split.append((chunk.n, sentences, matched))
        n_chunks = len(request.chunks)
        scored: list[tuple[Fraction, int, int, str]] = []  # (score, n, position, sentence)
        for n, sentences, matched in split:
            if len(matched) < need or (keys and not keys & matched):
                continue
            for pos, sentence, hits in sentences:
                if hits:
                    scored.append((sum((Fraction(n_chunks, cf[t]) for t in hits), Fraction(0)), n, pos, sentence))
        if not scored:
            return Draft(answer=ABSTAIN, citations=(), abstained=True)
        best = max(s for s, *_ in scored)
        picked: list[tuple[int, str]] = []
        seen: set[str] = set()
        for s, n, _pos, sentence in sorted(scored, key=lambda x: (-x[0], x[1], x[2])):
            if s * 4 < best * 3 or sentence in seen:
                continue
            seen.add(sentence)
            picked.append((n, sentence))
            if len(picked) == MAX_SENTENCES:
                break
        answer = " ".join(f"{sentence} [{n}]" for n, sentence in picked)
        return Draft(
            answer=answer,
            citations=tuple(DraftCitation(n=n, quote=sentence) for n, sentence in picked),
            abstained=False,
        )
