"""The extractive generator of issue 26 (``extractive-v3``), kept so that answers it gave replay identically.

``ranklock ask --generator extractive`` runs v4 (:mod:`.extractive`); a logged answer whose
generator model is ``extractive-v3`` is replayed with this rule (and ``--generator extractive-v3``
runs it, for side-by-side benchmarks).  Its rule is unchanged; no model of its own,
deterministic, every word it quotes is a chunk's.

It scores by meaning as well as by words: the question's vector against the
vector of each quotable span, both under the collection's pinned embedder and
read from the embedding cache (ranklock.embed.cache) by text hash, the way chunk
vectors are.  The pinned rule, version :data:`RULE_VERSION` (the checksum recorded
with each answer hashes every constant and list below and the segmentation rules):

1. **Terms** as in :mod:`ranklock.ask.terms` (shared with v2): content terms Q,
   key terms K (names and identifiers; calendar words, quarters ``q1``..``q4``
   included, are never key terms).
2. **Qualify a chunk.**  When K is not empty, only chunks matching a key term
   can answer: a chunk about someone else does not answer a question about
   this one, however close its meaning.
3. **Quotable spans.**  Chunks are cut into sentences (ranklock.ask.segment, the
   union of the en/pt/es rules).  A sentence *continues* its predecessor when
   its first word is a pronoun or a connective (:data:`CONTINUATION`, en/pt/es
   function words), or when it matches none of the key terms its predecessor
   matches (the subject it talks about was named before it: "Vai mudar-se para
   Maputo", "She is allergic to…").  A span is a sentence together with the
   predecessors it continues, so a quote always names what it is about.
4. **Meaning.**  The meaning query is the question without calendar words,
   four-digit years and present markers (rule 8): a date selects *which* note,
   through the filter, and "now" selects the latest; neither is what a note
   says.  Present markers are not content terms either.  ``cos(q, s)`` is the cosine of the query's and the
   span's vectors; ``c`` is the normalised mean of the given chunks' vectors:
   what retrieval found them all by.
5. **Score.**  ``S = cos(q, s) - BETA * cos(c, s) + LAMBDA * T(s)``, where
   ``T(s)`` is the term rule of v2 normalised to 0..1: the sum of N / cf(t) over
   the content terms the span matches, divided by that sum over all of Q (N
   chunks were given, cf(t) of them match t; a term no chunk has counts N).
   Subtracting the centroid is the vector form of N / cf: what every chunk
   shares (a name, a month's routine) counts least.
6. **Answer type.**  A "how much / how many" question (:data:`NUMBER_QUESTIONS`, en/pt/es)
   can only be answered by a span holding a number (a digit or a number word,
   :data:`NUMBER_WORDS`); a "who" question (:data:`PERSON_QUESTIONS`) only by a span
   naming someone (a capitalised word past its first).  Other spans are dropped.
7. **Abstain** with "The journal does not say." when no chunk was given, the
   question has no content term, no chunk qualifies, no span has the answer's
   type, or the best span's evidence ``cos(q, s) - EVIDENCE_BETA * cos(c, s)`` is
   below :data:`THRESHOLD`: how much closer to the question the span is than
   to what all the given chunks share.  Calibrated by bench/ask_calibrate.py (issue 26's version) on
   the tuning half of the journal questions (ranklock.eval.split).
8. **Present tense.**  A question with a present marker (:data:`PRESENT`:
   now, currently, still, latest, today... and their pt/es forms) is about the
   current state.  Among the spans within :data:`NOW_MARGIN` of the best, a span
   from a dated note that says the same kind of thing (vector cosine >=
   :data:`NOW_SIMILAR`) as a span of an earlier-dated note *revisits* it: the
   notes speak to one matter at two times and may disagree.  Then only the
   latest revisiting note's best span is quoted, followed by
   "(the latest note: DOC, DATE)".
9. **Select** otherwise: the best span, then spans of other chunks scoring
   within :data:`MARGIN` of it that say the same kind of thing (cosine with the
   best span >= :data:`SAME_KIND`: the several answers of a multi-part
   question look alike, an unrelated near-miss does not), at most
   :data:`MAX_SPANS`; ties by passage number, then position.

Constants were chosen on the tuning half only (docs/ask.md gives the search
and the held-out figures).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import numpy as np

from ...errors import GenerationError
from ..model import ABSTAIN, AskChunk, Draft, DraftCitation, GenerationRequest, GeneratorInfo
from ..segment import RULES_SHA256, sentence_spans
from ..terms import CALENDAR, PRESENT, QUARTERS, STOP_WORDS, content_terms, fold, key_terms, matches, terms

__all__ = [
    "CONTINUATION",
    "ExtractiveV3Generator",
    "PRESENT",
    "RULE_VERSION",
    "Span",
    "answer_type",
    "has_type",
    "is_present",
    "meaning_query",
    "spans_of",
]

RULE_VERSION = "extractive-v3"

LAMBDA = 1.0
BETA = 0.3
EVIDENCE_BETA = 0.5
THRESHOLD = 0.093
MARGIN = 0.1
SAME_KIND = 0.7
NOW_MARGIN = 0.3
NOW_SIMILAR = 0.5
MAX_SPANS = 3


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Quarters are calendar words too: "Q2 2024" selects notes by date, like a month.
CALENDAR_V3 = CALENDAR | QUARTERS

#: First words that make a sentence continue its predecessor (en, pt, es; accents folded).
CONTINUATION = _words(
    """
    he she it they him her his hers its their theirs them this that these those also then but however
    so later afterwards meanwhile besides instead
    ele ela eles elas dele dela deles delas isso isto aquilo tambem depois mas porem entao
    el ella ellos ellas esto eso ademas despues pero entonces luego
    """
)

#: Question openings that ask for a number (en, pt, es; accents folded; word sequences).
NUMBER_QUESTIONS = (
    ("how", "much"),
    ("how", "many"),
    ("quanto",),
    ("quantos",),
    ("quanta",),
    ("quantas",),
    ("cuanto",),
    ("cuantos",),
    ("cuanta",),
    ("cuantas",),
)
#: First words of a question that asks for a person.
PERSON_QUESTIONS = _words("who whom quem quien quienes")
#: Number words (en, pt, es; accents folded): "ninety-five" holds "ninety".
NUMBER_WORDS = _words(
    """
    one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty thirty
    forty fifty sixty seventy eighty ninety hundred thousand million half dozen
    um uma dois duas tres quatro cinco seis sete oito nove dez vinte trinta cem cento mil
    uno dos cuatro siete ocho nueve diez veinte treinta cien ciento
    """
)

_YEAR = re.compile(r"\d{4}")
_WORD = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_SPACES = re.compile(r"\s+")

_RULE_CHECKSUM = hashlib.sha256(
    json.dumps(
        {
            "version": RULE_VERSION,
            "constants": [
                LAMBDA,
                BETA,
                EVIDENCE_BETA,
                THRESHOLD,
                MARGIN,
                SAME_KIND,
                NOW_MARGIN,
                NOW_SIMILAR,
                MAX_SPANS,
            ],
            "number_questions": NUMBER_QUESTIONS,
            "person_questions": sorted(PERSON_QUESTIONS),
            "number_words": sorted(NUMBER_WORDS),
            "calendar": sorted(CALENDAR_V3),
            "continuation": sorted(CONTINUATION),
            "present": sorted(PRESENT),
            "stop_words": sorted(STOP_WORDS),
            "segmentation": RULES_SHA256,
            "abstain": ABSTAIN,
        },
        ensure_ascii=False,
    ).encode("utf-8")
).hexdigest()


def is_present(question: str) -> bool:
    """Whether ``question`` asks about the present state (rule 7).

    >>> is_present("Where is the Quillmark project hosted now?"), is_present("Onde está hoje?")
    (True, True)
    """
    return not PRESENT.isdisjoint(terms(question))


def answer_type(question: str) -> str | None:
    """``"number"``, ``"person"`` or None: what the answer must hold (rule 6).

    >>> answer_type("How much did it cost?"), answer_type("Quem aprovou?"), answer_type("Where?")
    ('number', 'person', None)
    """
    t = terms(question)
    if any(tuple(t[i : i + len(seq)]) == seq for seq in NUMBER_QUESTIONS for i in range(len(t))):
        return "number"
    if t and t[0] in PERSON_QUESTIONS:
        return "person"
    return None


def has_type(kind: str | None, text: str) -> bool:
    """Whether ``text`` can answer a question whose answer is of ``kind`` (rule 6)."""
    if kind == "number":
        return any(ch.isdigit() for ch in text) or any(
            part in NUMBER_WORDS for w in terms(text) for part in w.split("-")
        )
    if kind == "person":
        return any(w[:1].isupper() for w in _WORD.findall(text)[1:])
    return True


def meaning_query(question: str) -> str:
    """The question without calendar words, four-digit years and present markers, spaces collapsed (rule 4).

    >>> meaning_query("Which city did I fly to in March 2024?")
    'Which city did I fly to in ?'
    """

    def drop(m: re.Match[str]) -> str:
        w = m.group(0)
        return "" if fold(w) in CALENDAR_V3 or fold(w) in PRESENT or _YEAR.fullmatch(w) else w

    return _SPACES.sub(" ", _WORD.sub(drop, question)).strip()


@dataclass(frozen=True)
class Span:
    """A quotable span of passage ``n``: sentences ``first``..``last`` (0-based), verbatim ``text``."""

    n: int
    first: int
    last: int
    text: str
    hits: frozenset[str]


def spans_of(chunk: AskChunk, q: Sequence[str], keys: set[str]) -> list[Span]:
    """The quotable spans of ``chunk``: one per sentence, reaching back over the predecessors it continues (rule 3)."""
    cuts = sentence_spans(chunk.text, "all")
    words = [set(terms(chunk.text[a:b])) for a, b in cuts]
    hits = [frozenset(t for t in q if matches(t, w)) for w in words]
    out: list[Span] = []
    start = 0
    for i, (a, b) in enumerate(cuts):
        first = terms(chunk.text[a:b])[:1]
        named_before = {k for k in keys if k in hits[i - 1]} if i else set()
        continues = i > 0 and (
            bool(first and first[0] in CONTINUATION) or bool(named_before and not named_before & hits[i])
        )
        if not continues:
            start = i
        text = chunk.text[cuts[start][0] : b]
        out.append(Span(chunk.n, start, i, text, frozenset().union(*hits[start : i + 1])))
    return out


def _when(value: str | None) -> datetime | None:
    """A note's date as a comparable datetime (a date, or a time without a zone, read as UTC); None if unreadable."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


class _Passaged(Protocol):
    """A span of passage ``n`` (v3's :class:`Span`, or v4's, which reuses the present-tense rule)."""

    @property
    def n(self) -> int: ...


_S = TypeVar("_S", bound=_Passaged)


class ExtractiveV3Generator:
    """Answers with verbatim spans of the chunks, chosen by the pinned rule above.

    >>> ExtractiveV3Generator().info().model
    'extractive-v3'
    """

    name = "extractive"

    def __init__(self, *, threshold: float = THRESHOLD) -> None:
        #: The abstention threshold (rule 7); another value is recorded in ``info().params``.
        self.threshold = threshold
        #: The evidence of the last best span (None: abstained before scoring), for calibration.
        self.last_evidence: float | None = None

    def info(self) -> GeneratorInfo:
        return GeneratorInfo(
            name=self.name,
            model=RULE_VERSION,
            checksum=_RULE_CHECKSUM,
            params={"threshold": self.threshold, "max_spans": MAX_SPANS, "vectors": "collection embedder"},
        )

    def generate(self, request: GenerationRequest) -> Draft:
        self.last_evidence = None
        # Present markers say when, not what (rule 8): like calendar words, they are no content.
        q = [t for t in content_terms(request.question) if t not in PRESENT]
        if not q or not request.chunks:
            return Draft(answer=ABSTAIN, citations=(), abstained=True)
        if request.embed is None:
            raise GenerationError(
                "the extractive generator scores by meaning and needs the collection's embedder, but the request "
                "carries none; ask through Engine.ask, or pass GenerationRequest(embed=...)."
            )
        keys = set(key_terms(request.question, CALENDAR_V3))
        per_chunk = [(c, spans_of(c, q, keys)) for c in request.chunks]
        cf = dict.fromkeys(q, 0)
        for _c, spans in per_chunk:
            for t in frozenset().union(*(s.hits for s in spans)):
                cf[t] += 1
        n_chunks = len(request.chunks)
        weight = {t: n_chunks / max(cf[t], 1) for t in q}
        total = sum(weight.values())
        kind = answer_type(request.question)
        candidates = [
            s
            for c, spans in per_chunk
            if not keys or any(keys & s.hits for s in spans)
            for s in spans
            if has_type(kind, s.text)
        ]
        if not candidates:
            return Draft(answer=ABSTAIN, citations=(), abstained=True)
        texts = [meaning_query(request.question), *(c.text for c in request.chunks), *(s.text for s in candidates)]
        vectors = np.asarray(request.embed(texts), dtype=np.float64)
        qv, chunk_vs, span_vs = vectors[0], vectors[1 : 1 + n_chunks], vectors[1 + n_chunks :]
        centroid = chunk_vs.mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        cos_q = span_vs @ qv
        cos_c = span_vs @ centroid
        score = cos_q - BETA * cos_c + LAMBDA * np.array([sum(weight[t] for t in s.hits) / total for s in candidates])
        order = sorted(range(len(candidates)), key=lambda i: (-float(score[i]), candidates[i].n, candidates[i].first))
        best = order[0]
        self.last_evidence = float(cos_q[best] - EVIDENCE_BETA * cos_c[best])
        if self.last_evidence < self.threshold:
            return Draft(answer=ABSTAIN, citations=(), abstained=True)
        if is_present(request.question):
            latest = self._latest(request.chunks, candidates, order, score, span_vs)
            if latest is not None:
                span, chunk = latest
                note = f" (the latest note: {chunk.doc_id}, {chunk.date})"
                return Draft(
                    answer=f"{span.text} [{span.n}]{note}",
                    citations=(DraftCitation(n=span.n, quote=span.text),),
                    abstained=False,
                )
        picked = [best]
        for i in order[1:]:
            if float(score[i]) < float(score[best]) - MARGIN or len(picked) == MAX_SPANS:
                break
            if any(candidates[i].n == candidates[j].n for j in picked):
                continue
            if float(span_vs[i] @ span_vs[best]) >= SAME_KIND:
                picked.append(i)
        chosen = [candidates[i] for i in picked]
        return Draft(
            answer=" ".join(f"{s.text} [{s.n}]" for s in chosen),
            citations=tuple(DraftCitation(n=s.n, quote=s.text) for s in chosen),
            abstained=False,
        )

    @staticmethod
    def _latest(
        chunks: Sequence[AskChunk], candidates: Sequence[_S], order: list[int], score: np.ndarray, vs: np.ndarray
    ) -> tuple[_S, AskChunk] | None:
        """Rule 8: the latest note that revisits what an earlier candidate note says, or None.

        The pool is the spans within NOW_MARGIN of the best.  A span *revisits* when it comes from
        a note dated after another pool span's note and says the same kind of thing (cosine >=
        NOW_SIMILAR): the two notes speak to one matter at two times, and the present is the later.
        """
        best = float(score[order[0]])
        pool = [i for i in order if float(score[i]) >= best - NOW_MARGIN]
        dated = [(w, i) for i in pool if (w := _when(chunks[candidates[i].n - 1].date)) is not None]
        revisits = [(w, i) for w, i in dated if any(v < w and float(vs[i] @ vs[j]) >= NOW_SIMILAR for v, j in dated)]
        if not revisits:
            return None
        # The latest date wins; among spans of that date, the better score (the pool keeps score order).
        top = max(w for w, _i in revisits)
        i = next(i for w, i in revisits if w == top)
        return candidates[i], chunks[candidates[i].n - 1]
