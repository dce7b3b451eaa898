"""Abstention accuracy: how often the generator declines exactly when it should.

Following the unanswerable-question evaluation of SQuAD 2.0 (Rajpurkar, Jia and
Liang, "Know What You Don't Know: Unanswerable Questions for SQuAD", ACL 2018),
where the right output for an unanswerable question is no answer:

* **abstention accuracy** = abstentions on unanswerable questions / unanswerable
  questions (``None`` when the set has none);
* **false abstention rate** = abstentions on answerable questions / answerable
  questions: the price paid for abstaining, reported beside it.

    >>> abstention_accuracy([True, False, True], [False, False, True])
    0.5
    >>> false_abstention_rate([True, False, True], [False, False, True])
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InputError

__all__ = ["abstention_accuracy", "false_abstention_rate"]


def _pairs(abstained: Sequence[bool], answerable: Sequence[bool]) -> list[tuple[bool, bool]]:
    if len(abstained) != len(answerable):
        raise InputError(
            f"abstention flags ({len(abstained)}) and answerable flags ({len(answerable)}) differ in length; "
            "give one of each per question."
        )
    return list(zip(abstained, answerable, strict=True))


def abstention_accuracy(abstained: Sequence[bool], answerable: Sequence[bool]) -> float | None:
    """Share of the unanswerable questions (``answerable`` False) on which the generator abstained."""
    hits = [a for a, ok in _pairs(abstained, answerable) if not ok]
    return sum(hits) / len(hits) if hits else None


def false_abstention_rate(abstained: Sequence[bool], answerable: Sequence[bool]) -> float | None:
    """Share of the answerable questions on which the generator abstained anyway."""
    hits = [a for a, ok in _pairs(abstained, answerable) if ok]
    return sum(hits) / len(hits) if hits else None
