"""The extractive generator of issue 12 (``extractive-v2``), kept so that answers it gave replay identically.

``ranklock ask --generator extractive`` runs v3 (:mod:`.extractive`); a logged answer whose
generator model is ``extractive-v2`` is replayed with this rule (and ``--generator extractive-v2``
runs it, for side-by-side benchmarks).  Its pinned rule, unchanged (the checksum recorded
with each answer hashes its constants and the segmentation rules; rules 1 and 2 live in
:mod:`ranklock.ask.terms`, shared with v3):

1. **Terms** and 2. **Match** as :mod:`ranklock.ask.terms` states them (month and weekday
   names are the calendar words v2 knows).
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
from fractions import Fraction

from ..model import ABSTAIN, Draft, DraftCitation, GenerationRequest, GeneratorInfo
from ..segment import RULES_SHA256, sentence_spans
from ..terms import CALENDAR, PREFIX, STOP_WORDS, SUFFIXES, content_terms, key_terms, terms
from ..terms import matches as _matches

__all__ = ["ExtractiveV2Generator", "RULE_VERSION"]

RULE_VERSION = "extractive-v2"
MAX_SENTENCES = 3


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


class ExtractiveV2Generator:
    """Answers with verbatim sentences of the chunks, chosen by the pinned rule above.

    >>> ExtractiveV2Generator().info().model
    'extractive-v2'
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
