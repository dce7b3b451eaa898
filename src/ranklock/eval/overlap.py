"""Overlap between two rankings: Jaccard of the top-k sets, and rank-biased overlap.

Both are pure functions of two ranked lists of document ids (best first).

* Jaccard: ``|A ∩ B| / |A ∪ B|`` of the two sets (P. Jaccard, 1901); 1.0 when
  both are empty.  Blind to order: it asks "did the same documents come back".
* Rank-biased overlap, RBO (W. Webber, A. Moffat and J. Zobel, "A similarity
  measure for indefinite rankings", ACM TOIS 28(4), 2010).  We use the
  extrapolated point estimate ``RBO_ext`` of equation 32, which handles lists of
  different lengths and is exactly 1.0 for identical lists.  Agreement near the
  top weighs more; ``p`` sets how steeply (p = 0.9 puts about 86% of the weight
  on the first 10 ranks).

    >>> jaccard(["a", "b", "c"], ["a", "b", "d"])
    0.5
    >>> rank_biased_overlap(["a", "b"], ["a", "b"])
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InputError

__all__ = ["jaccard", "rank_biased_overlap"]


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """Jaccard similarity of the two sets of ids; 1.0 for two empty lists."""
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def rank_biased_overlap(a: Sequence[str], b: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap, ``RBO_ext`` (Webber et al. 2010, eq. 32).

    With ``S`` the shorter list (length ``s``), ``L`` the longer (length ``l``),
    ``X_d`` the size of the overlap of the two prefixes of length ``d``:

    ``RBO_ext = (1-p)/p * (sum_{d=1..l} X_d/d p^d + sum_{d=s+1..l} X_s (d-s)/(s d) p^d)
    + ((X_l - X_s)/l + X_s/s) p^l``

    1.0 for identical lists (and for two empty lists), 0.0 when one is empty
    and the other not, or when they share nothing.
    """
    if not isinstance(p, float | int) or not 0 < p < 1:
        raise InputError(f"RBO persistence p must be between 0 and 1 (exclusive), got {p!r}; e.g. 0.9.")
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, l_ = len(short), len(long_)
    seen_s: set[str] = set()
    seen_l: set[str] = set()
    x = 0  # overlap of the prefixes seen so far
    xs = 0  # X_s: overlap at depth s
    total = 0.0
    for d in range(1, l_ + 1):
        # Past depth s the short list contributes nothing new: X_d counts only
        # long-list items that appear anywhere in the short list.
        ld = long_[d - 1]
        if d <= s:
            sd = short[d - 1]
            if sd == ld:
                x += 1
            else:
                x += (sd in seen_l) + (ld in seen_s)
            seen_s.add(sd)
            seen_l.add(ld)
            if d == s:
                xs = x
        else:
            if ld in seen_s and ld not in seen_l:
                x += 1
            seen_l.add(ld)
        total += x / d * p**d
        if d > s:
            total += xs * (d - s) / (s * d) * p**d
    return (1 - p) / p * total + ((x - xs) / l_ + xs / s) * p**l_
