"""The extractive generator: no model, deterministic, every word of its answer quoted from a chunk.

The pinned scoring rule (version :data:`RULE_VERSION`; the checksum recorded
with each answer hashes this rule's constants and the segmentation rules):

1. **Terms.**  Text is NFKC-normalised, case-folded and stripped of accents;
   a term is a run of letters and digits, with inner hyphens or underscores
   kept (``XJ-900`` is one term ``xj-900``).  The question's terms minus the
   stop words below (English, Portuguese, Spanish) are its *content terms* Q,
   each counted once.
2. **Match.**  A question term matches a sentence term when they are equal, or
   when both have at least :data:`PREFIX` characters and share their first
   :data:`PREFIX` (a pinned, crude stemmer: ``reviewed`` ~ ``review``).
3. **Score.**  Each sentence of each chunk scores s = the number of content
   terms it matches.  Sentences are cut by ranklock.ask.segment with the union
   of the English, Portuguese and Spanish rules: a journal mixes languages
   inside one collection, so the collection's text-search language says
   nothing about a given note, and an abbreviation of one language ("Dra.")
   is no sentence end in another.
4. **Select.**  A sentence qualifies when s >= need = max(1, ceil(|Q| / 2)) and
   s >= best - 1, best being the highest score of any sentence.  Qualifying
   sentences are ordered by score (high first), then passage number, then
   position in the chunk; identical sentences are kept once; the first
   :data:`MAX_SENTENCES` are the answer, each followed by its ``[n]``.
5. **Abstain** with "The journal does not say." when no chunk was retrieved,
   when the question has no content term, or when no sentence qualifies.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata

from ..model import ABSTAIN, Draft, DraftCitation, GenerationRequest, GeneratorInfo
from ..segment import RULES_SHA256, sentence_spans

__all__ = ["ExtractiveGenerator", "STOP_WORDS", "content_terms", "terms"]

RULE_VERSION = "extractive-v1"
PREFIX = 5
MAX_SENTENCES = 3


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


def _matches(q: str, sentence_terms: set[str]) -> bool:
    if q in sentence_terms:
        return True
    if len(q) < PREFIX:
        return False
    head = q[:PREFIX]
    return any(len(w) >= PREFIX and w[:PREFIX] == head for w in sentence_terms)


_RULE_CHECKSUM = hashlib.sha256(
    json.dumps(
        {
            "version": RULE_VERSION,
            "prefix": PREFIX,
            "max_sentences": MAX_SENTENCES,
            "stop_words": sorted(STOP_WORDS),
            "segmentation": RULES_SHA256,
            "abstain": ABSTAIN,
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
        scored: list[tuple[int, int, int, str]] = []  # (score, n, position, sentence)
        for chunk in request.chunks:
            for pos, (a, b) in enumerate(sentence_spans(chunk.text, "all")):
                sentence = chunk.text[a:b]
                words = set(terms(sentence))
                s = sum(1 for t in q if _matches(t, words))
                if s:
                    scored.append((s, chunk.n, pos, sentence))
        need = max(1, math.ceil(len(q) / 2))
        best = max((s for s, *_ in scored), default=0)
        picked: list[tuple[int, str]] = []
        seen: set[str] = set()
        for s, n, _pos, sentence in sorted(scored, key=lambda x: (-x[0], x[1], x[2])):
            if s < need or s < best - 1 or sentence in seen:
                continue
            seen.add(sentence)
            picked.append((n, sentence))
            if len(picked) == MAX_SENTENCES:
                break
        if not picked:
            return Draft(answer=ABSTAIN, citations=(), abstained=True)
        answer = " ".join(f"{sentence} [{n}]" for n, sentence in picked)
        return Draft(
            answer=answer,
            citations=tuple(DraftCitation(n=n, quote=sentence) for n, sentence in picked),
            abstained=False,
        )
