"""The reranker trigger: which layer to blame when answers are wrong.

The Ask design hands the top eight chunks to the generator.  Comparing
retrieval recall@10 with answer correctness tells the layers apart:

* **recall@10 high, correctness low**: the right notes are retrieved, so
  either the ordering buries them below the eight chunks the generator sees
  (a reranker would help: that is the trigger) or the generator misses them in
  plain sight;
* **recall@10 low**: the right notes are not retrieved at all, so chunking or
  the embedder (or the lexical analysis) is at fault, and no reranker can help.

Per question (:func:`diagnose_question`), with ``ranks`` the 1-based ranks of
the gold notes in the top 10 (absent: not retrieved):

=================  ====================================================
``correct``        the answer is correct
``not_retrieved``  wrong, and a gold note is missing from the top 10
``buried``         wrong, every gold note is in the top 10, one below ``chunks``
``generator``      wrong, every gold note was among the chunks handed over
=================  ====================================================

The design's rule (:func:`trigger_fires`): the reranker trigger fires for a
class when its mean recall@10 is at least :data:`RECALL_HIGH` and its
correctness more than :data:`GAP` below that recall.  Whether ordering is really
to blame is then read off the questions: the class verdict
(:func:`class_verdict`) is

* ``retrieval`` when mean recall@10 is below :data:`RECALL_HIGH`;
* ``ordering`` when the trigger fires and at least as many wrong answers are
  ``buried`` as ``generator`` (a reranker would help);
* ``generator`` when the trigger fires but most wrong answers had every gold
  note among the chunks handed over (a reranker would not help);
* ``fine`` otherwise.

The message of an ``ordering`` verdict says to turn the reranker on (``--rerank 40``, the
candidates Ask's fusion already has); a ``generator`` verdict says a reranker would not help.

Both thresholds are constants of this module, not tuned per run.

    >>> diagnose_question(False, {"n1": 9}, ["n1"], chunks=8)
    'buried'
    >>> class_verdict(0.9, 0.5, buried=3, generator=1)
    'ordering'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["GAP", "RECALL_HIGH", "class_verdict", "diagnose_question", "explain_verdict", "trigger_fires"]

#: Mean recall@10 at or above which retrieval counts as high.
RECALL_HIGH = 0.8
#: How far correctness may trail recall@10 before ordering is blamed.
GAP = 0.2


def diagnose_question(correct: bool, ranks: Mapping[str, int], gold: Sequence[str], *, chunks: int) -> str:
    """``correct``, ``not_retrieved``, ``buried`` or ``generator`` (see the module docstring)."""
    if correct:
        return "correct"
    if any(g not in ranks for g in gold):
        return "not_retrieved"
    if any(ranks[g] > chunks for g in gold):
        return "buried"
    return "generator"


def trigger_fires(recall_at_10: float, correctness: float) -> bool:
    """The design's reranker trigger: recall@10 high, correctness more than :data:`GAP` below it."""
    return recall_at_10 >= RECALL_HIGH and correctness < recall_at_10 - GAP


def class_verdict(recall_at_10: float, correctness: float, buried: int = 0, generator: int = 0) -> str:
    """``retrieval``, ``ordering``, ``generator`` or ``fine`` for a class (see the module docstring)."""
    if recall_at_10 < RECALL_HIGH:
        return "retrieval"
    if not trigger_fires(recall_at_10, correctness):
        return "fine"
    return "ordering" if buried >= generator else "generator"


def explain_verdict(
    verdict: str, recall_at_10: float, correctness: float, buried: Sequence[str], generator: Sequence[str]
) -> str:
    """One sentence for people: what the verdict means, naming the questions behind it."""
    if verdict == "retrieval":
        return (
            f"recall@10 is {recall_at_10:.2f} (below {RECALL_HIGH}): the right notes are not retrieved; "
            "chunking or the embedder is at fault, a reranker cannot help."
        )
    if verdict in ("ordering", "generator"):
        named = ", ".join(buried) or "none"
        missed = ", ".join(generator) or "none"
        lead = (
            "ordering buries the right chunk"
            if verdict == "ordering"
            else "the trigger fires but ordering is not the main cause: the generator missed notes it was given"
        )
        advice = (
            "Turn the reranker on: `ranklock ask --rerank 40` (or eval --answers --rerank 40 to measure it), "
            "with RANKLOCK_RERANKER set to a cross-encoder directory or a /rerank endpoint."
            if verdict == "ordering"
            else "A reranker would not fix these: leave --rerank off and improve the generator."
        )
        return (
            f"reranker trigger: recall@10 is {recall_at_10:.2f} but correctness only {correctness:.2f}; {lead}. "
            f"Gold note ranked below the chunks handed over: {named}. "
            f"Gold notes all handed over, answer still wrong: {missed}. {advice}"
        )
    return f"recall@10 {recall_at_10:.2f}, correctness {correctness:.2f}: no layer stands out."
