"""Ranking metrics, as trec_eval defines them.

Each metric is a pure function of one ranked list of document ids (best first,
no duplicates) and one query's judgments (document id -> integer grade; a grade
above 0 is relevant, trec_eval's default ``relevance_level`` of 1).  The values
match trec_eval 9 (``recall.k``, ``ndcg_cut.k``, ``recip_rank``) and are checked
against ``pytrec_eval`` in the tests.

References:

* trec_eval, ``m_recall.c``, ``m_ndcg_cut.c``, ``m_recip_rank.c``
  (https://github.com/usnistgov/trec_eval).
* K. Järvelin and J. Kekäläinen, "Cumulated gain-based evaluation of IR
  techniques", ACM TOIS 20(4), 2002: nDCG.  trec_eval's variant uses the grade
  itself as the gain and ``log2(rank + 1)`` as the discount.
* E. Voorhees, "The TREC-8 Question Answering Track Report", 1999: reciprocal rank.

    >>> recall_at_k(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, 2)
    0.3333333333333333
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ..errors import InputError

__all__ = ["mean", "ndcg_at_k", "recall_at_k", "reciprocal_rank"]


def _check(ranking: Sequence[str], k: int | None) -> None:
    # Explicit errors, never ``assert``: these functions take user input (a k
    # list from the command line, a run file from disk).
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise InputError(f"cutoff k must be a positive integer, got {k!r}; e.g. 10.")
    if len(set(ranking)) != len(ranking):
        dupes = sorted({d for d in ranking if ranking.count(d) > 1})
        raise InputError(
            f"ranking lists document(s) {', '.join(dupes[:5])} more than once; a ranking holds each document once."
        )


def recall_at_k(ranking: Sequence[str], judgments: Mapping[str, int], k: int) -> float:
    """Relevant documents in the top ``k`` divided by all relevant documents of the query.

    trec_eval ``recall.k``: ``|relevant ∩ top k| / |relevant|``, and 0.0 when the
    query has no relevant document.

        >>> recall_at_k(["a", "b"], {"b": 2, "c": 1}, 1)
        0.0
    """
    _check(ranking, k)
    relevant = {d for d, g in judgments.items() if g > 0}
    if not relevant:
        return 0.0
    found = sum(1 for d in ranking[:k] if d in relevant)
    return found / len(relevant)


def ndcg_at_k(ranking: Sequence[str], judgments: Mapping[str, int], k: int) -> float:
    """Normalised discounted cumulative gain at ``k``, trec_eval ``ndcg_cut.k``.

    ``DCG@k = sum over ranks r <= k of grade(d_r) / log2(r + 1)`` (the grade is the
    gain; non-positive grades add nothing), divided by the DCG@k of the ideal
    ranking: all judged documents sorted by grade, best first.  0.0 when the
    query has no relevant document.

        >>> # (1/log2(2) + 1/log2(4)) / (1/log2(2) + 1/log2(3))
        >>> round(ndcg_at_k(["a", "x", "b"], {"a": 1, "b": 1}, 10), 6)
        0.919721
    """
    _check(ranking, k)
    dcg = sum(judgments.get(d, 0) / math.log2(r + 1) for r, d in enumerate(ranking[:k], 1) if judgments.get(d, 0) > 0)
    ideal = sorted((g for g in judgments.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(r + 1) for r, g in enumerate(ideal, 1))
    return dcg / idcg if idcg > 0 else 0.0


def reciprocal_rank(ranking: Sequence[str], judgments: Mapping[str, int]) -> float:
    """``1 / rank`` of the first relevant document, 0.0 if none was retrieved (trec_eval ``recip_rank``).

    The whole ranking counts (no cutoff); the mean over queries is MRR.

        >>> reciprocal_rank(["x", "y", "a"], {"a": 1})
        0.3333333333333333
    """
    _check(ranking, None)
    for r, d in enumerate(ranking, 1):
        if judgments.get(d, 0) > 0:
            return 1.0 / r
    return 0.0


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean over queries; 0.0 for no queries.

    Every golden query counts, including those that retrieved nothing (trec_eval
    run with ``-c``); plain trec_eval would drop queries absent from the run.
    """
    vals = list(values)
    return math.fsum(vals) / len(vals) if vals else 0.0
