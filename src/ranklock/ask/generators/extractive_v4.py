"""The extractive generator of issue 40 (``extractive-v4``), kept so that answers it gave replay identically.

``ranklock ask --generator extractive`` runs v5 (:mod:`.extractive`), which subclasses this rule and
changes its answer check (rule 7) and the answer-type edition it reads; a logged answer whose
generator model is ``extractive-v4`` is replayed with this rule (and ``--generator extractive-v4``
runs it).  Its rule is unchanged (same checksum; it reads edition 1 of the answer-type rule).

v3 (:mod:`.extractive_v3`) picked the span closest in meaning; v4 first asks what kind of
answer the question wants and quotes only a span that holds one, beside the question's words,
and otherwise abstains saying what it looked for.  The pinned rule, version
:data:`RULE_VERSION` (the checksum recorded with each answer hashes every constant and list
below, v3's lists it reuses, the answer-type lists and the segmentation rules):

1. **Terms** as in :mod:`ranklock.ask.terms`: content terms Q, key terms K (names and
   identifiers; calendar words and quarters are never key terms).
2. **Answer type** as in :mod:`ranklock.ask.answer_type`: ``person``, ``time``, ``place``,
   ``money``, a number of some kind, ``name``, ``code``, or ``any``.  The *topic* is Q less the
   words that only say what is asked (question words, the type's own cues, years, calendar
   and present words, the X of "which X": :func:`~ranklock.ask.answer_type.topic_terms`).
3. **Qualify a chunk** as v3: when K is not empty, only chunks matching a key term answer (in
   any of their text: a title or a heading naming someone says the chunk is about them).
4. **Quotable spans.**  A chunk's title and Markdown headings are never quoted nor read for
   the answer's type (:func:`ranklock.ask.abstention.quotable_text`).  The rest is cut into
   sentences (the en/pt/es union); a sentence *continues* its predecessor when its first word
   is a pronoun or a connective (v3's list), or when it matches none of the topic terms its
   predecessor matches ("Budget is 720 euros." after "…fire pottery at home again."), and no
   heading stands between them: a span is a sentence with the predecessors it continues, so a
   quote says what it is about.
5. **Candidates** are the spans holding a token of the answer's type that the question does
   not hold (:func:`~ranklock.ask.answer_type.has_type`); none: abstain ("none of the N
   passages has one").
6. **Score** as v3: ``S = cos(q, s) - BETA * cos(c, s) + LAMBDA * T(s)``, T over the topic.
7. **Answer check**, over the :data:`CHECKED` best candidates in score order; the first that
   passes is the answer.  Its *evidence* is v3's ``E = cos(q, s) - EVIDENCE_BETA * cos(c, s)``.
   A topic term is *matched* by the span when it matches one of its words, its note's title or
   the heading it stands under, or is a key term its chunk matches (terms rule 2), *near* when instead one of those words' vectors has cosine >= :data:`NEAR`
   with the term's (word vectors under the collection's embedder, through the cache).

   - A span matching some topic term is *anchored*: it passes when ``E >= THRESHOLD + KAPPA * u``,
     u the share of topic terms neither matched nor near.  A span that shares the question's
     subject but not the rest of what it asks ("the boiler broke" for "what did the plumber say
     about the boiler") needs that much more meaning to answer; one that matches only the key
     terms (the names the question gives) while the question asks more, none of it matched or
     near, does not answer ("Hana is hosting at her flat" for "where does Hana work?").
   - A span matching no topic term answers by meaning alone: ``E >= THRESHOLD``, and only a
     question in the collection's language (:func:`~ranklock.answer_type.question_language`;
     the embedder is chosen for that language, and its cosines elsewhere say little).
   - A question with no topic term: ``E >= THRESHOLD``.

   None passes: abstain ("the closest passage, [n], does not say it").
8. **Present tense** as v3 rule 8, over the candidates; **select** as v3 rule 9 the best, then
   passing spans of other chunks within :data:`MARGIN` that say the same kind of thing.

Every abstention is "The journal does not say." and what was looked for
(:func:`ranklock.ask.abstention.abstention_text`).  Constants: v3's where v4 keeps its rules;
NEAR, KAPPA and CHECKED chosen on the tuning half of the journal questions
(bench/ask_calibrate.py; docs/ask.md gives the search and the held-out figures).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...errors import GenerationError
from ..abstention import HEADING, RULE_VERSIONS, abstention_text, quotable_text
from ..answer_type import FUNCTION_WORDS, answer_type, has_type, lower_case_stems, question_language, topic_terms
from ..model import ABSTAIN, AskChunk, Draft, DraftCitation, EmbedFn, GenerationRequest, GeneratorInfo
from ..segment import LANGUAGES, RULES_SHA256, sentence_spans
from ..terms import STOP_WORDS, content_terms, key_terms, matches, terms
from .extractive_v3 import CALENDAR_V3, CONTINUATION, PRESENT, ExtractiveV3Generator, is_present, meaning_query

__all__ = ["ExtractiveV4Generator", "RULE_CHECKSUM", "RULE_VERSION", "Span", "spans_of"]

RULE_VERSION = "extractive-v4"
#: The answer-type edition v4 reads (ranklock.ask.answer_type), and the abstention rule it records.
EDITION = 1
ABSTENTION_RULE = RULE_VERSIONS[EDITION]

LAMBDA = 1.0
BETA = 0.3
EVIDENCE_BETA = 0.5
THRESHOLD = 0.093
KAPPA = 0.3
NEAR = 0.4
CHECKED = 6
MARGIN = 0.1
SAME_KIND = 0.7
MAX_SPANS = 3

RULE_CHECKSUM = hashlib.sha256(
    json.dumps(
        {
            "version": RULE_VERSION,
            "constants": [LAMBDA, BETA, EVIDENCE_BETA, THRESHOLD, KAPPA, NEAR, CHECKED, MARGIN, SAME_KIND, MAX_SPANS],
            "calendar": sorted(CALENDAR_V3),
            "continuation": sorted(CONTINUATION),
            "present": sorted(PRESENT),
            "stop_words": sorted(STOP_WORDS),
            "function_words": sorted(FUNCTION_WORDS),
            "segmentation": RULES_SHA256,
            "abstention": ABSTENTION_RULE,
            "abstain": ABSTAIN,
        },
        ensure_ascii=False,
    ).encode("utf-8")
).hexdigest()


class _Scored(Protocol):
    """What rule 6 reads of a span (v4's :class:`Span`, or v6's): its passage and the question terms it matches."""

    @property
    def n(self) -> int: ...

    @property
    def hits(self) -> frozenset[str]: ...


@dataclass(frozen=True)
class Span:
    """A quotable span of passage ``n``: sentences ``first``..``last`` (0-based), verbatim ``text``."""

    n: int
    first: int
    last: int
    text: str
    #: The same characters with titles and headings blanked: what the answer type is read from.
    body: str
    hits: frozenset[str]


def spans_of(chunk: AskChunk, topic: Sequence[str]) -> list[Span]:
    """The quotable spans of ``chunk``: one per sentence outside its title and headings (rule 4)."""
    body = quotable_text(chunk)
    cuts = sentence_spans(body, "all")
    said = [terms(body[a:b]) for a, b in cuts]  # each sentence's terms, read once
    hits = [frozenset(t for t in topic if matches(t, set(w))) for w in said]
    out: list[Span] = []
    start = 0
    for i, (a, b) in enumerate(cuts):
        first = said[i][:1]
        before = hits[i - 1] if i else frozenset()
        # A heading between two sentences starts a new section: the second never continues the first.
        sectioned = i > 0 and bool(chunk.text[cuts[i - 1][1] : a].strip())
        continues = (
            i > 0
            and not sectioned
            and (bool(first and first[0] in CONTINUATION) or bool(before and not before & hits[i]))
        )
        if not continues:
            start = i
        lo = cuts[start][0]
        out.append(Span(chunk.n, start, i, chunk.text[lo:b], body[lo:b], frozenset().union(*hits[start : i + 1])))
    return out


def _names(chunk: AskChunk, keys: Sequence[str]) -> bool:
    """Rule 3: whether ``chunk`` (title and headings included) matches one of the key terms."""
    words = set(terms(chunk.text))
    return any(matches(k, words) for k in keys)


def own_words(chunk: AskChunk, span: Span) -> set[str]:
    """The words of ``span``, its note's title and the heading it stands under."""
    at = chunk.text.find(span.text)
    heading = max((m for m in HEADING.finditer(chunk.text) if m.end() <= at), key=lambda m: m.end(), default=None)
    return set(terms(" ".join([span.body, chunk.title or "", heading.group(0) if heading else ""])))


def named_keys(chunk: AskChunk, keys: Sequence[str]) -> set[str]:
    """The key terms ``chunk`` names anywhere (rule 3 qualified it by them: a span need not repeat whom it is about)."""
    named = set(terms(chunk.text))
    return {k for k in keys if matches(k, named)}


def _context(chunk: AskChunk, span: Span, keys: Sequence[str]) -> set[str]:
    """The words rule 7 reads for ``span``: its own, its note's title, the heading it stands under, and the key
    terms its chunk names."""
    return own_words(chunk, span) | named_keys(chunk, keys)


def word_vectors(embed: EmbedFn, contexts: Sequence[set[str]], topic: Sequence[str]) -> dict[str, np.ndarray]:
    """Rule 7's word vectors, read in one call: the topic terms and the content words of ``contexts``."""
    words = sorted({w for c in contexts for w in c if w not in FUNCTION_WORDS} | set(topic))
    return dict(zip(words, np.asarray(embed(words), dtype=np.float64), strict=True))


def meaning_language(request: GenerationRequest) -> bool:
    """Rule 7: whether the question is in the collection's language (or either cannot be told)."""
    code = LANGUAGES.get(request.language)
    lang = question_language(request.question)
    return code is None or lang is None or lang == code or (lang == "pt/es" and code in ("pt", "es"))


class ExtractiveV4Generator:
    """Answers with verbatim spans of the chunks, chosen by the pinned rule above.

    >>> ExtractiveV4Generator().info().model
    'extractive-v4'
    """

    name = "extractive"
    #: The rule a class runs: a later rule subclasses this one and names its own.
    rule_version = RULE_VERSION
    rule_checksum = RULE_CHECKSUM
    edition = EDITION
    abstention_rule = ABSTENTION_RULE

    def __init__(self, *, threshold: float = THRESHOLD, kappa: float = KAPPA, near: float = NEAR) -> None:
        #: Rule 7's constants; other values (bench/ask_calibrate.py tries some) are recorded in ``info().params``.
        self.threshold = threshold
        self.kappa = kappa
        self.near = near

    def info(self) -> GeneratorInfo:
        return GeneratorInfo(
            name=self.name,
            model=self.rule_version,
            checksum=self.rule_checksum,
            params={
                "threshold": self.threshold,
                "kappa": self.kappa,
                "near": self.near,
                "max_spans": MAX_SPANS,
                "vectors": "collection embedder",
                "abstention": self.abstention_rule,
            },
        )

    def generate(self, request: GenerationRequest) -> Draft:
        question = request.question
        n_chunks = len(request.chunks)
        kind = answer_type(question, self.edition)
        q = [t for t in content_terms(question) if t not in PRESENT]

        def abstain(reason: str, *, best: int | None = None, names: Sequence[str] = ()) -> Draft:
            text = abstention_text(question, reason, n=n_chunks, kind=kind, best=best, names=names)
            return Draft(text, (), True)

        if not request.chunks:
            return abstain("no_passages")
        if not q:
            return abstain("no_terms")
        if request.embed is None:
            raise GenerationError(
                "the extractive generator scores by meaning and needs the collection's embedder, but the request "
                "carries none; ask through Engine.ask, or pass GenerationRequest(embed=...)."
            )
        keys = [t for t in key_terms(question, CALENDAR_V3) if t not in PRESENT]
        topic = topic_terms(question, kind)
        per_chunk = [(c, spans_of(c, q)) for c in request.chunks]
        # A chunk's title and headings say whom or what it is about: they qualify it, though never quoted.
        qualified = [(c, spans) for c, spans in per_chunk if not keys or _names(c, keys)]
        if not qualified:
            return abstain("unnamed", names=keys)
        question_terms = frozenset(terms(question))
        common = lower_case_stems(question, *(quotable_text(c) for c in request.chunks))
        candidates = [
            s
            for _c, spans in qualified
            for s in spans
            if has_type(kind.kind, s.body, question_terms, common, self.edition)
        ]
        if not candidates:
            return abstain("no_type")
        order, drafted = self._select(request, request.embed, q, topic, keys, per_chunk, candidates)
        return drafted or abstain("not_close", best=candidates[order[0]].n)

    def _select(
        self,
        request: GenerationRequest,
        embed: EmbedFn,
        q: list[str],
        topic: list[str],
        keys: list[str],
        per_chunk: list[tuple[AskChunk, list[Span]]],
        candidates: list[Span],
    ) -> tuple[list[int], Draft | None]:
        """Rules 6 to 8: the candidates' score order, and the draft (None when no checked candidate passes)."""
        chunks = request.chunks
        order, score, span_vs, evidence = self._scores(
            request, embed, q, per_chunk, candidates, [s.text for s in candidates], [s.first for s in candidates]
        )
        passing = self._check(request, embed, topic, keys, candidates, order, evidence)
        if not passing:
            return order, None
        if is_present(request.question):
            latest = ExtractiveV3Generator._latest(chunks, candidates, order, score, span_vs)
            if latest is not None:
                span, chunk = latest
                return order, Draft(
                    answer=f"{span.text} [{span.n}] (the latest note: {chunk.doc_id}, {chunk.date})",
                    citations=(DraftCitation(n=span.n, quote=span.text),),
                    abstained=False,
                )
        chosen = [candidates[i] for i in self._alike(order, passing, score, span_vs, [s.n for s in candidates])]
        return order, Draft(
            answer=" ".join(f"{s.text} [{s.n}]" for s in chosen),
            citations=tuple(DraftCitation(n=s.n, quote=s.text) for s in chosen),
            abstained=False,
        )

    @staticmethod
    def _alike(
        order: list[int], passing: list[int], score: np.ndarray, span_vs: np.ndarray, passage: Sequence[int]
    ) -> list[int]:
        """Rule 8's selection (v3's rule 9): the best passing span, then passing spans of other passages within
        MARGIN of it that say the same kind of thing, at most MAX_SPANS.  Shared with v6."""
        best = passing[0]
        picked = [best]
        for i in order:
            if i == best:
                continue
            if float(score[i]) < float(score[best]) - MARGIN or len(picked) == MAX_SPANS:
                break
            if i not in passing or any(passage[i] == passage[j] for j in picked):
                continue
            if float(span_vs[i] @ span_vs[best]) >= SAME_KIND:
                picked.append(i)
        return picked

    @staticmethod
    def _scores(
        request: GenerationRequest,
        embed: EmbedFn,
        q: list[str],
        per_chunk: Sequence[tuple[AskChunk, Sequence[_Scored]]],
        candidates: Sequence[_Scored],
        texts: Sequence[str],
        position: Sequence[int],
    ) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
        """Rule 6 over ``candidates`` (each scored by the vector of its text of ``texts``): their order (ties by
        passage, then ``position``), scores, vectors and evidence ``E``, which rule 7 reads.  Shared with v6."""
        chunks = request.chunks
        n_chunks = len(chunks)
        cf = dict.fromkeys(q, 0)
        for _c, spans in per_chunk:
            for t in frozenset().union(*(s.hits for s in spans)):
                cf[t] += 1
        weight = {t: n_chunks / max(cf[t], 1) for t in q}
        total = sum(weight.values())
        vectors = np.asarray(embed([meaning_query(request.question), *(c.text for c in chunks), *texts]), np.float64)
        qv, chunk_vs, span_vs = vectors[0], vectors[1 : 1 + n_chunks], vectors[1 + n_chunks :]
        centroid = chunk_vs.mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        cos_q = span_vs @ qv
        cos_c = span_vs @ centroid
        score = cos_q - BETA * cos_c + LAMBDA * np.array([sum(weight[t] for t in s.hits) / total for s in candidates])
        order = sorted(range(len(candidates)), key=lambda i: (-float(score[i]), candidates[i].n, position[i]))
        return order, score, span_vs, cos_q - EVIDENCE_BETA * cos_c

    def _check(
        self,
        request: GenerationRequest,
        embed: EmbedFn,
        topic: list[str],
        keys: list[str],
        candidates: list[Span],
        order: list[int],
        evidence: np.ndarray,
    ) -> list[int]:
        """Rule 7: the candidates among the CHECKED best that pass, in score order.

        Word vectors are read only when a span's verdict depends on them (one read for all such spans):
        a span below the threshold fails, one with no topic term matched is judged by meaning alone, and
        one passing even with every unmatched term counted as uncovered passes.  The verdicts are rule 7's.
        """
        checked = order[:CHECKED]
        context = {i: _context(request.chunks[candidates[i].n - 1], candidates[i], keys) for i in checked}
        meaning_ok = meaning_language(request)
        asked = [t for t in topic if t not in keys]
        vec: dict[str, np.ndarray] | None = None
        passing: list[int] = []
        for i in checked:
            e = float(evidence[i])
            if e < self.threshold:
                continue  # every branch below needs at least the threshold
            matched = [t for t in topic if matches(t, context[i])]
            if not matched:
                if meaning_ok or not topic:
                    passing.append(i)
                continue
            unmatched = [t for t in topic if t not in matched]
            # Only the names the question gives are matched, while it asks more: it must say some of that.
            key_only = bool(asked) and not any(t in matched for t in asked)
            if not key_only and e >= self.threshold + self.kappa * len(unmatched) / len(topic):
                passing.append(i)
                continue
            if vec is None:
                vec = word_vectors(embed, [context[j] for j in checked if float(evidence[j]) >= self.threshold], topic)
            if self._passes_near(e, topic, unmatched, asked, key_only, context[i], vec):
                passing.append(i)
        return passing

    def _passes_near(
        self,
        e: float,
        topic: list[str],
        unmatched: list[str],
        asked: list[str],
        key_only: bool,
        words: set[str],
        vec: dict[str, np.ndarray],
    ) -> bool:
        """Rule 7's last step: unmatched terms near one of ``words`` count as covered."""
        span_words = [w for w in words if w in vec]
        near = [t for t in unmatched if any(float(vec[t] @ vec[w]) >= self.near for w in span_words)]
        if key_only and not any(t in near for t in asked):
            return False  # it names whom or what the question is about, and says nothing of what it asks
        return e >= self.threshold + self.kappa * (len(unmatched) - len(near)) / len(topic)
