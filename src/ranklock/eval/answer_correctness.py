"""Answer correctness: the gold answer is contained in the answer, after normalisation.

This is the "exact match" family of open-domain QA metrics, relaxed to
containment because an extractive answer quotes whole sentences: SQuAD's
``normalize_answer`` (Rajpurkar et al., "SQuAD: 100,000+ Questions for Machine
Comprehension of Text", EMNLP 2016, the official evaluation script) lower-cases,
drops punctuation and articles and collapses white space; "answer recall" /
``has_answer`` in DPR (Karpukhin et al., "Dense Passage Retrieval for
Open-Domain Question Answering", EMNLP 2020) checks containment of the gold
string.  Our normalisation (:func:`normalise_answer`), pinned here:

1. Unicode NFKD, then drop combining marks (``Tromsø`` keeps ``ø``, which has
   no decomposition; ``Páramo`` becomes ``paramo``);
2. lower-case (``str.casefold``);
3. every run of characters that are not letters or digits becomes one space
   (so ``XJ-900`` is ``xj 900`` on both sides);
4. the articles ``a``, ``an``, ``the`` are dropped (SQuAD's rule, English only);
5. white space collapsed, ends stripped.

A gold answer with several parts (``"Hetzner; OVHcloud"``) is correct only when
every part is contained.  An empty gold answer (an unanswerable question) is
never "correct": abstention is scored by :mod:`.abstention` instead.

    >>> answer_correct("Coffee with Zebulon. He has started lessons on the cello.", "Cello")
    True
    >>> answer_correct("It moved from Hetzner.", "Hetzner; OVHcloud")
    False
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["ANSWER_PART_SEPARATOR", "answer_correct", "normalise_answer"]

ANSWER_PART_SEPARATOR = ";"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NON_WORD = re.compile(r"[^0-9a-z\u00c0-\uffff]+")


def normalise_answer(text: str) -> str:
    """Normalise ``text`` by the five steps of the module docstring.

    >>> normalise_answer("The  Root-Cause: Páramo!")
    'root cause paramo'
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    spaced = _NON_WORD.sub(" ", stripped)
    return " ".join(_ARTICLES.sub(" ", spaced).split())


def answer_correct(answer: str, gold: str) -> bool:
    """True when every ``;``-separated part of ``gold`` occurs in ``answer``, both normalised, on word bounds."""
    parts = [normalise_answer(p) for p in gold.split(ANSWER_PART_SEPARATOR)]
    parts = [p for p in parts if p]
    if not parts:
        return False
    # Padding with spaces makes containment respect word boundaries: "oboe" is not found in "oboes".
    hay = f" {normalise_answer(answer)} "
    return all(f" {p} " in hay for p in parts)
