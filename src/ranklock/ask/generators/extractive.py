"""The extractive generator (v6): no model of its own, deterministic, every word it quotes is a chunk's.

v6 is extractive-v5 (:mod:`.extractive_v5`, whose scores, answer types, variants and answer check
it keeps) reading a note as people write it: in units (list items, headings, table cells,
paragraphs) no quote crosses, quoted as a person reads them; gathering the answers of a question
that asks for several; refusing a span whose predicate is not the question's; and abstaining in
the collection's words, with the passages that came closest.  The pinned rule, version
:data:`RULE_VERSION` (the checksum recorded with each answer hashes v5's checksum, the constants
below, the structure and list-question rules; tests/test_ask_replay.py checks its captured
answers byte for byte, which is what freezes it as a whole):

1.-3. Terms, answer type (edition 3 of :mod:`ranklock.ask.answer_type`) and qualified chunks as v5;
   a list question's opening verb ("List the machines…") is no topic word.
4. **Units** (:mod:`ranklock.ask.structure`): a passage is cut into units by its form (Markdown,
   HTML text, DOCX text); a span is a sentence of one quotable unit with the predecessors in that
   unit it continues (v4's rule: a pronoun or connective first, or the predecessor matched topic
   words and this one matches none), never reaching into another unit.  A unit's *context* (its
   headings, a list's lead-in, the item it hangs from, a cell's row head and column header, its
   label, and the note's title when it holds a word) says what it is about; it is read with the
   span but never quoted.
5. **Candidates** are spans whose reading (markup dropped, line breaks as spaces) holds a token of
   the answer's type, as v5.
6. **Score** as v5, the span's vector being that of its context and its reading together (a
   bullet is read under its heading).
7. **Answer check.**  A topic word that another heading or label of the passage names is what that
   section or item is about: a span that neither says it nor stands under it does not answer
   ("Bought in 2022." in atlas's bullet for "When was boreal bought?", boreal having its own
   bullet).  Then v5's answer check, a span's own words being its reading's and its context's.  Then the
   **predicate check**: the question's topic words that are not the names it gives (its verb and
   object, ``asked``), less those its context says (the subject a heading, title or label names),
   must each be said by the span itself, in a close variant (:mod:`ranklock.ask.variants`) or by
   a word whose vector has cosine at least :data:`PRED_NEAR` with it: "Tomás will pour the concrete
   base" does not answer "Who will paint the garden shed?" beside a "Garden shed" title.  A list
   question checks every candidate, any other the :data:`~.extractive_v4.CHECKED` best.
8. **Present tense** as v5, for a question that asks for one thing.
9. **Select.**  A question that asks for several (:mod:`ranklock.ask.several`) gathers every span
   that passed: notes in the order of their best span, at most :data:`PER_NOTE` spans from one
   note before the next note's best, round after round, at most :data:`MAX_LIST` in all, no two
   overlapping; quoted note by note, each in the order the note says it, each cited.  Any other
   question: as v5 (the best, then passing spans of other chunks within the margin that say the
   same kind of thing).  An answer quotes each span as a person reads it; its citation keeps the
   chunk's own characters.
10. **Abstain** as v5, but beginning with what was searched, in the collection's words ("The notes
   in “vault” do not say.": :func:`~ranklock.ask.model.abstention_opener`), and naming the
   passages that came closest, each with its closest span, at most :data:`MAX_CLOSEST`: the best
   candidates of different passages when none passed, the passages whose spans hold the most
   topic words when none held the answer's type.

Constants: v5's; PER_NOTE is the issue's two; MAX_LIST is the eight passages Ask hands over (a list
is no longer than what is read); MAX_CLOSEST three; PRED_NEAR measured on the tuning halves
(bench/ask_predicate.py; docs/ask.md gives the figures).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import GenerationError
from ..abstention import RULE_VERSIONS, abstention_text
from ..answer_type import (
    FUNCTION_WORDS,
    MONTHS,
    MONTHS_CAPITALISED,
    answer_type,
    has_type,
    lower_case_stems,
    topic_terms,
)
from ..model import AskChunk, Draft, DraftCitation, EmbedFn, GenerationRequest, GeneratorInfo, abstention_opener
from ..segment import sentence_spans
from ..several import RULES_SHA256 as SEVERAL_SHA256
from ..several import asks_for_several, list_cues
from ..structure import RULES_SHA256 as STRUCTURE_SHA256
from ..structure import Unit, form_of, reading, units
from ..terms import CALENDAR, content_terms, fold, key_terms, matches, terms
from ..variants import matches_variant, with_variants
from .extractive_v3 import CALENDAR_V3, CONTINUATION, PRESENT, ExtractiveV3Generator, is_present
from .extractive_v4 import CHECKED, meaning_language
from .extractive_v5 import FLOOR, KAPPA, NEAR, THRESHOLD, ExtractiveV5Generator
from .extractive_v5 import RULE_CHECKSUM as V5_CHECKSUM

__all__ = [
    "FLOOR",
    "KAPPA",
    "MAX_CLOSEST",
    "MAX_LIST",
    "NEAR",
    "PER_NOTE",
    "PRED_NEAR",
    "RULE_VERSION",
    "THRESHOLD",
    "ExtractiveGenerator",
    "Span",
    "spans_of",
]

RULE_VERSION = "extractive-v6"
#: The answer-type edition v6 reads (edition 3: ordinals are no names, "an hour" a duration).
V6_EDITION = 3

PRED_NEAR = 0.45
PER_NOTE = 2
MAX_LIST = 8
MAX_CLOSEST = 3
EVIDENCE_BETA = 0.5
#: A year, as the question and a heading write it (rule 5).
_YEAR = re.compile(r"(?:19|20)\d{2}")
_WORD = re.compile(r"[^\W_]+")

_RULE_CHECKSUM = hashlib.sha256(
    json.dumps(
        {
            "version": RULE_VERSION,
            "v5": V5_CHECKSUM,
            "constants": [PRED_NEAR, PER_NOTE, MAX_LIST, MAX_CLOSEST],
            "structure": STRUCTURE_SHA256,
            "several": SEVERAL_SHA256,
            "answer_type_edition": V6_EDITION,
            "abstention": RULE_VERSIONS[V6_EDITION],
        },
        ensure_ascii=False,
    ).encode("utf-8")
).hexdigest()


@dataclass(frozen=True)
class Span:
    """A quotable span of passage ``n``: ``text`` is ``chunk.text[start:end]``, inside one unit."""

    n: int
    start: int
    end: int
    text: str
    #: ``text`` as a person reads it (rule 4): what the answer quotes and its type is read from.
    body: str
    #: What its unit is about (its context's reading, rule 4), "" when nothing.
    context: str
    hits: frozenset[str]
    #: The reading of the paragraphs of its section (under the same headings): where the names it is about may be.
    section: str = ""
    #: Words the passage's other headings and labels name, which neither this span nor its context says (rule 7).
    elsewhere: frozenset[str] = frozenset()

    @property
    def meaning(self) -> str:
        """The text whose vector scores the span (rule 6): its context, then its reading."""
        return f"{self.context}: {self.body}" if self.context else self.body


def _context(chunk: AskChunk, unit: Unit, start: int, end: int) -> str:
    """Rule 4: the reading of what ``unit`` is about, less what the span ``start:end`` itself says."""
    parts = [chunk.title] if chunk.title and any(ch.isalpha() for ch in chunk.title) else []
    parts += [chunk.text[a:b] for a, b in unit.context if not (start <= a and b <= end)]
    return " — ".join(r for p in parts if (r := reading(p).rstrip(":").strip()))


def spans_of(chunk: AskChunk, q: Sequence[str]) -> list[Span]:
    """The quotable spans of ``chunk``, each inside one unit (rule 4); ``hits``: the terms of ``q`` each matches."""
    out: list[Span] = []
    found = units(chunk.text, chunk.title_end(), form_of(chunk.doc_id))
    sections: dict[tuple[tuple[int, int], ...], list[str]] = {}
    subjects: set[str] = set()  # what the passage's headings and labels name
    for u in found:
        if u.kind == "paragraph":
            sections.setdefault(u.section, []).append(reading(chunk.text[u.start : u.end]))
        named = (u.start, u.end) if u.kind == "heading" else u.label
        if named is not None:
            subjects.update(t for t in terms(chunk.text[named[0] : named[1]]) if t not in FUNCTION_WORDS)
    for unit in found:
        if not unit.quotable:
            continue
        section = " ".join(sections.get(unit.section, []))
        cuts = [(unit.start + a, unit.start + b) for a, b in sentence_spans(chunk.text[unit.start : unit.end], "all")]
        said = [terms(chunk.text[a:b]) for a, b in cuts]
        hits = [frozenset(t for t in q if matches(t, set(w))) for w in said]
        first = 0
        for i, (_a, b) in enumerate(cuts):
            before = hits[i - 1] if i else frozenset()
            lead = said[i][:1]
            if not (i and (bool(lead and lead[0] in CONTINUATION) or bool(before and not before & hits[i]))):
                first = i
            lo = cuts[first][0]
            text = chunk.text[lo:b]
            context = _context(chunk, unit, lo, b)
            out.append(
                Span(
                    chunk.n,
                    lo,
                    b,
                    text,
                    reading(text),
                    context,
                    frozenset().union(*hits[first : i + 1]),
                    section,
                    frozenset(subjects - set(terms(f"{text} {context}"))),
                )
            )
    return out


class ExtractiveGenerator(ExtractiveV5Generator):
    """Answers with verbatim spans of the chunks, chosen by the pinned rule above.

    >>> ExtractiveGenerator().info().model
    'extractive-v6'
    """

    rule_version = RULE_VERSION
    rule_checksum = _RULE_CHECKSUM
    edition = V6_EDITION
    abstention_rule = RULE_VERSIONS[V6_EDITION]

    def __init__(
        self, *, threshold: float = THRESHOLD, kappa: float = KAPPA, near: float = NEAR, pred_near: float = PRED_NEAR
    ) -> None:
        super().__init__(threshold=threshold, kappa=kappa, near=near)
        #: Rule 7's predicate bar; another value (bench/ask_predicate.py tries some) is recorded in ``info().params``.
        self.pred_near = pred_near

    def info(self) -> GeneratorInfo:
        base = super().info()
        return GeneratorInfo(base.name, base.model, base.checksum, {**base.params, "pred_near": self.pred_near})

    def generate(self, request: GenerationRequest) -> Draft:
        question = request.question
        chunks = request.chunks
        kind = answer_type(question, self.edition)
        cues = list_cues(question)
        q = [t for t in content_terms(question) if t not in PRESENT and t not in cues]
        opener = abstention_opener([c.doc_id for c in chunks], request.collection)

        def abstain(
            reason: str, *, best: int | None = None, names: Sequence[str] = (), closest: Sequence[Span] = ()
        ) -> Draft:
            text = abstention_text(question, reason, n=len(chunks), kind=kind, best=best, names=names, opener=opener)
            return Draft(text, (), True, closest=tuple(DraftCitation(s.n, s.text) for s in closest))

        if not chunks:
            return abstain("no_passages")
        if not q:
            return abstain("no_terms")
        if request.embed is None:
            raise GenerationError(
                "the extractive generator scores by meaning and needs the collection's embedder, but the request "
                "carries none; ask through Engine.ask, or pass GenerationRequest(embed=...)."
            )
        keys = [t for t in key_terms(question, CALENDAR_V3) if t not in PRESENT and t not in cues]
        topic = [t for t in topic_terms(question, kind) if t not in cues]
        per_chunk = [(c, spans_of(c, q)) for c in chunks]
        qualified = [
            (c, spans) for c, spans in per_chunk if not keys or any(matches(k, set(terms(c.text))) for k in keys)
        ]
        if not qualified:
            return abstain("unnamed", names=keys)
        question_terms = frozenset(terms(question))
        common = lower_case_stems(question, *(s.body for _c, spans in per_chunk for s in spans))
        when = _dates(question)
        candidates = [
            s
            for _c, spans in qualified
            for s in spans
            if has_type(kind.kind, s.body, question_terms, common, self.edition) and _same_time(when, s.context)
        ]
        if not candidates:
            return abstain("no_type", closest=_most_hits(per_chunk, topic))
        several = asks_for_several(question)
        order, score, span_vs, evidence = self._scores(
            request,
            request.embed,
            q,
            per_chunk,
            candidates,
            [s.meaning for s in candidates],
            [s.start for s in candidates],
        )
        passing = self._passing(request, request.embed, topic, keys, candidates, order, evidence, several)
        if not passing:
            seen: list[Span] = []
            for i in order:
                if all(candidates[i].n != s.n for s in seen):
                    seen.append(candidates[i])
            return abstain("not_close", best=candidates[order[0]].n, closest=seen[:MAX_CLOSEST])
        if several:
            return _answer(_gather([candidates[i] for i in passing], chunks))
        if is_present(question):
            latest = ExtractiveV3Generator._latest(chunks, candidates, order, score, span_vs)
            if latest is not None:
                span, chunk = latest
                return Draft(
                    answer=f"{span.body} [{span.n}] (the latest note: {chunk.doc_id}, {chunk.date})",
                    citations=(DraftCitation(n=span.n, quote=span.text),),
                    abstained=False,
                )
        picked = self._alike(order, passing, score, span_vs, [s.n for s in candidates])
        return _answer([candidates[i] for i in picked])

    def _passing(
        self,
        request: GenerationRequest,
        embed: EmbedFn,
        topic: list[str],
        keys: list[str],
        candidates: list[Span],
        order: list[int],
        evidence: np.ndarray,
        several: bool,
    ) -> list[int]:
        """Rule 7: the checked candidates that pass v5's answer check and the predicate check, in score order.

        Word vectors are read only when a verdict depends on them, in one call for every such span.
        """
        typed = answer_type(request.question, self.edition).kind != "any"
        checked = order if several else order[:CHECKED]
        said = {i: with_variants(terms(candidates[i].body)) for i in checked}
        about: dict[int, set[str]] = {}
        for i in checked:
            s = candidates[i]
            named = set(terms(" ".join((s.body, s.context, s.section))))
            about[i] = with_variants(terms(s.context)) | {k for k in keys if matches(k, named)}
        meaning_ok = meaning_language(request)
        asked = [t for t in topic if t not in keys]
        vec: dict[str, np.ndarray] | None = None

        def vectors() -> dict[str, np.ndarray]:
            nonlocal vec
            if vec is None:
                words = sorted({w for i in checked for w in said[i] | about[i] if w not in FUNCTION_WORDS} | set(topic))
                vec = dict(zip(words, np.asarray(embed(words), dtype=np.float64), strict=True))
            return vec

        passing: list[int] = []
        for i in checked:
            if any(t in candidates[i].elsewhere and not matches_variant(t, said[i] | about[i]) for t in topic):
                continue  # the question names what another heading or label of the passage is about
            own = said[i] | about[i]
            if self._answers(float(evidence[i]), typed, topic, asked, own, own, meaning_ok, vectors):
                predicate = [t for t in asked if not matches_variant(t, about[i])]
                if any(matches_variant(t, said[i]) for t in predicate) or self._said_near(predicate, said[i], vectors):
                    passing.append(i)
        return passing

    def _said_near(self, predicate: list[str], said: set[str], vectors: Callable[[], dict[str, np.ndarray]]) -> bool:
        """Rule 7's predicate check for a span that says none of ``predicate`` (none left: it passes): one of them
        is said in other words, a word of the span within cosine PRED_NEAR of it."""
        if not predicate:
            return True
        vec = vectors()
        words = [w for w in said if w in vec and w not in FUNCTION_WORDS]
        return any(float(vec[t] @ vec[w]) >= self.pred_near for t in predicate for w in words)


def _dates(text: str) -> dict[str, set[str]]:
    """The months, weekdays and years ``text`` names, by kind, folded ("May" and "March" only capitalised)."""
    out: dict[str, set[str]] = {}
    for w in _WORD.findall(text):
        f = fold(w)
        if f in MONTHS or (f in MONTHS_CAPITALISED and w[:1].isupper()):
            kind = "month"
        elif f in CALENDAR and f not in MONTHS_CAPITALISED:
            kind = "weekday"
        elif _YEAR.fullmatch(f):
            kind = "year"
        else:
            continue
        out.setdefault(kind, set()).add(f)
    return out


def _same_time(asked: dict[str, set[str]], context: str) -> bool:
    """Rule 5: whether a span's context dates it as the question does (or either says no time of a kind)."""
    if not asked or not context:
        return True
    said = _dates(context)
    return all(said[k] & v for k, v in asked.items() if k in said)


def _answer(spans: Sequence[Span]) -> Draft:
    """The answer quoting ``spans`` as a person reads them, each cited with the chunk's own characters."""
    return Draft(
        answer=" ".join(f"{s.body} [{s.n}]" for s in spans),
        citations=tuple(DraftCitation(n=s.n, quote=s.text) for s in spans),
        abstained=False,
    )


def _gather(passing: Sequence[Span], chunks: Sequence[AskChunk]) -> list[Span]:
    """Rule 9 for a list question: round after round, at most PER_NOTE spans a note, at most MAX_LIST in all."""
    notes: dict[str, list[Span]] = {}
    for s in passing:  # in score order: a note's first span is its best
        notes.setdefault(chunks[s.n - 1].doc_id, []).append(s)
    picked: list[Span] = []

    def fresh(s: Span) -> bool:
        return all(
            not (s.n == p.n and s.start < p.end and p.start < s.end)
            and not (chunks[s.n - 1].doc_id == chunks[p.n - 1].doc_id and (s.body in p.body or p.body in s.body))
            for p in picked
        )

    progressed = True
    while progressed and len(picked) < MAX_LIST:
        progressed = False
        for spans in notes.values():
            took = 0
            for s in spans:
                if took == PER_NOTE or len(picked) == MAX_LIST:
                    break
                if s in picked or not fresh(s):
                    continue
                picked.append(s)
                took += 1
                progressed = True
    rank = {doc: k for k, doc in enumerate(notes)}
    return sorted(picked, key=lambda s: (rank[chunks[s.n - 1].doc_id], s.n, s.start))


def _most_hits(per_chunk: Sequence[tuple[AskChunk, list[Span]]], topic: Sequence[str]) -> list[Span]:
    """Rule 10 when no span holds the answer's type: per passage, the span saying the most topic words."""
    out: list[Span] = []
    for _c, spans in per_chunk:
        best = max(spans, key=lambda s: (sum(matches(t, set(terms(s.body))) for t in topic), -s.start), default=None)
        if best is not None and any(matches(t, set(terms(best.body))) for t in topic):
            out.append(best)
    out.sort(key=lambda s: (-sum(matches(t, set(terms(s.body))) for t in topic), s.n))
    return out[:MAX_CLOSEST]
