"""Citation precision and recall, at the level of notes.

ALCE (Gao et al., "Enabling Large Language Models to Generate Text with
Citations", EMNLP 2023) defines citation recall as whether the cited passages
support the statement and citation precision as whether each citation is
needed, both judged by an NLI model.  With labelled gold notes we can use the
set form of the same two questions, as in retrieval:

* **citation precision** = ``|cited ∩ gold| / |cited|``: the share of cited
  notes that are gold notes;
* **citation recall** = ``|cited ∩ gold| / |gold|``: the share of gold notes
  that the answer cites.

Both count distinct notes (two citations of one note count once).  Precision is
undefined for an answer that cites nothing and recall for a question without
gold notes: the functions return ``None`` there, and means are taken over the
defined values only (:func:`mean_defined`), with the count reported beside them.

    >>> citation_precision(["n1", "n2", "n2"], ["n1", "n3"])
    0.5
    >>> citation_recall(["n1", "n2"], ["n1", "n3"])
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["citation_precision", "citation_recall", "mean_defined"]


def citation_precision(cited: Sequence[str], gold: Sequence[str]) -> float | None:
    """``|cited ∩ gold| / |cited|`` over distinct notes; ``None`` when nothing is cited."""
    c = set(cited)
    if not c:
        return None
    return len(c & set(gold)) / len(c)


def citation_recall(cited: Sequence[str], gold: Sequence[str]) -> float | None:
    """``|cited ∩ gold| / |gold|`` over distinct notes; ``None`` when there is no gold note."""
    g = set(gold)
    if not g:
        return None
    return len(set(cited) & g) / len(g)


def mean_defined(values: Iterable[float | None]) -> tuple[float | None, int]:
    """Mean of the values that are not ``None``, and how many there were; ``(None, 0)`` if none.

    >>> mean_defined([1.0, None, 0.0])
    (0.5, 2)
    """
    vals = [v for v in values if v is not None]
    return (math.fsum(vals) / len(vals) if vals else None), len(vals)
