"""The extractive generator of issue 40's second round (``extractive-v5``), kept so that answers it gave replay identically.

``ranklock ask --generator extractive`` runs v6 (:mod:`.extractive`), which subclasses this rule; a logged
answer whose generator model is ``extractive-v5`` is replayed with this rule (and ``--generator
extractive-v5`` runs it).  Its rule is unchanged (same checksum; tests/test_ask_replay.py checks its
captured answers byte for byte).

v5 is extractive-v4 (:mod:`.extractive_v4`, whose rules 1 to 6 and 8 it keeps) with one answer
check for every span, where v4 let a span that shares no word with the question answer at
the lowest bar, and with edition 2 of the answer-type rule.  The pinned rule, version
:data:`RULE_VERSION` (the checksum recorded with each answer hashes v4's checksum, the
constants below, the answer-type edition and the variants list):

1.-6. As v4, reading **edition 2** of :mod:`ranklock.ask.answer_type`: a meal after a time
   preposition is a time ("at breakfast"), a name is a place only where it reads as one
   ("flew to Porto", "Kings Road"; not "Kenji leads it"), "what is X's name" asks for a name,
   and "how long did it take" leaves "take" out of the topic.
7. **Answer check**, over the :data:`~.extractive_v4.CHECKED` best candidates in score order;
   the first that passes is the answer.  Its evidence is v3's ``E = cos(q, s) - 0.5 * cos(c, s)``.
   A topic term is *matched* as in v4 (by the span's words, its note's title, its heading, or a
   key term its chunk names) but in any of its close variants (:mod:`ranklock.ask.variants`:
   "flew" is "fly", "pick-up" holds "pick"); *near* as in v4 (a word vector within
   cosine :data:`~.extractive_v4.NEAR`).  *Uncovered* terms are neither.

   - A span whose **own words** (its text, title and heading, not the chunk's names) match
     every topic term, for a question with an answer type, passes when ``E >= FLOOR``: it says
     all the question asks, in the question's words, beside a token of the type asked for;
     the meaning needs only not to point elsewhere.
   - Every other span passes when ``E >= THRESHOLD + KAPPA * uncovered / |topic|``, one bar
     for every span: v4 asked this of a span sharing some topic word and let one sharing none
     pass at THRESHOLD, so that the word-free paraphrases of the journal's tuning half
     answered; on hand-written notes that exception let on-topic near-misses answer ("the
     part cost 32 euros" for the paint).  As in v4, a span that shares no word with the
     question answers only a question in the collection's language, and one that matches only
     the names the question gives needs one of the other topic terms near.
   - A question with no topic term: ``E >= THRESHOLD``.

   None passes: abstain ("passage n comes closest but does not say it").

Constants: v4's; FLOOR is 0, the point at which a span is no closer to the question than to
half of what all the passages share (not fitted).  docs/ask.md gives the sets and figures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import numpy as np

from ..abstention import RULE_VERSIONS
from ..answer_type import EDITION, answer_type
from ..model import EmbedFn, GenerationRequest
from ..variants import IRREGULAR_VERBS, matches_variant, with_variants
from .extractive_v4 import (
    CHECKED,
    KAPPA,
    NEAR,
    THRESHOLD,
    ExtractiveV4Generator,
    Span,
    meaning_language,
    named_keys,
    own_words,
    word_vectors,
)
from .extractive_v4 import (
    RULE_CHECKSUM as V4_CHECKSUM,
)

__all__ = ["FLOOR", "KAPPA", "NEAR", "RULE_CHECKSUM", "RULE_VERSION", "THRESHOLD", "ExtractiveV5Generator"]

RULE_VERSION = "extractive-v5"

FLOOR = 0.0

RULE_CHECKSUM = hashlib.sha256(
    json.dumps(
        {
            "version": RULE_VERSION,
            "v4": V4_CHECKSUM,
            "floor": FLOOR,
            "answer_type_edition": EDITION,
            "abstention": RULE_VERSIONS[EDITION],
            "irregular_verbs": IRREGULAR_VERBS,
        },
        ensure_ascii=False,
    ).encode("utf-8")
).hexdigest()


class ExtractiveV5Generator(ExtractiveV4Generator):
    """Answers with verbatim spans of the chunks, chosen by the pinned rule above.

    >>> ExtractiveV5Generator().info().model
    'extractive-v5'
    """

    rule_version = RULE_VERSION
    rule_checksum = RULE_CHECKSUM
    edition = EDITION
    abstention_rule = RULE_VERSIONS[EDITION]

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

        Word vectors are read only when a verdict depends on them, in one call for every such span.
        """
        typed = answer_type(request.question, self.edition).kind != "any"
        checked = order[:CHECKED]
        own: dict[int, set[str]] = {}
        context: dict[int, set[str]] = {}
        for i in checked:
            chunk = request.chunks[candidates[i].n - 1]
            own[i] = with_variants(own_words(chunk, candidates[i]))
            context[i] = own[i] | named_keys(chunk, keys)
        meaning_ok = meaning_language(request)
        asked = [t for t in topic if t not in keys]
        vec: dict[str, np.ndarray] | None = None

        def vectors() -> dict[str, np.ndarray]:
            nonlocal vec
            if vec is None:
                vec = word_vectors(embed, [context[j] for j in checked if float(evidence[j]) >= self.threshold], topic)
            return vec

        return [
            i
            for i in checked
            if self._answers(float(evidence[i]), typed, topic, asked, own[i], context[i], meaning_ok, vectors)
        ]

    def _answers(
        self,
        e: float,
        typed: bool,
        topic: list[str],
        asked: list[str],
        own: set[str],
        context: set[str],
        meaning_ok: bool,
        vectors: Callable[[], dict[str, np.ndarray]],
    ) -> bool:
        """Rule 7 for one span of evidence ``e``: ``own`` its own words, ``context`` with the names its chunk gives."""
        if typed and topic and e >= FLOOR and all(matches_variant(t, own) for t in topic):
            return True  # it says all the question asks, in its words, beside a token of the type
        if e < self.threshold:
            return False  # every other branch needs at least the threshold
        if not topic:
            return True
        matched = [t for t in topic if matches_variant(t, context)]
        if not matched and not meaning_ok:
            return False  # by meaning alone, and the embedder does not read the question's language
        unmatched = [t for t in topic if t not in matched]
        key_only = bool(matched) and bool(asked) and not any(t in matched for t in asked)
        if not key_only and e >= self.threshold + self.kappa * len(unmatched) / len(topic):
            return True  # passes even with every unmatched term counted as uncovered
        return self._passes_near(e, topic, unmatched, asked, key_only, context, vectors())
