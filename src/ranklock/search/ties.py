"""Ties are not preferences: hits with identical ranking signals share a tie group.

Each branch ranks with competition ranks (``rank()``), so two documents the
rankers cannot tell apart (the same raw score in every branch: the same
lexical score and the same vector distance, e.g. two identical resumes under different names) get the same
branch ranks and the same fused score, and sit next to each other; the final
order inside the tie is by doc id: stable, but meaningless.  This module
finds such hits among the results and gives them one ``tie_group`` (the rank
of the group's first hit), with a warning saying that order within the group
carries no meaning.

Each branch's signal gets a tie group of its own too: the hits that branch
alone gives the same raw score (a lexical tie the vector branch breaks, say).

The raw signals are compared, not the ranks: ranks already contain the
doc-id tie-break that we want to expose.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from .results import Hit

__all__ = ["assign_tie_groups", "branch_tie_groups", "signal_key"]


def signal_key(hit: Hit) -> tuple[float | None, ...]:
    """Everything the rankers know about a hit: each branch's raw score (its lexical score, its vector distance)."""
    return tuple(sig.raw for sig in hit.signals)


def assign_tie_groups(hits: Sequence[Hit]) -> tuple[list[Hit], list[str]]:
    """``hits`` with their tie groups, and one note per group of the whole ranking.

    A hit that shares its signals with another gets ``tie_group``; each branch's signal gets
    the group of the hits that branch alone cannot tell apart (the same raw score).  A hit
    without ties keeps ``tie_group = None``.  Groups are numbered by the rank of their first
    member, so the output is the same on every run.  The hits are frozen: those with a group
    come back as copies.

    >>> from ranklock.search.results import BranchSignal
    >>> from ranklock.search.spec import Signal
    >>> lex, sem = Signal("lexical_rank", "lexical_score", "score", "float8"), Signal("s_rank", "s_d", "d", "float8")
    >>> a = Hit(rank=1, doc_id="a", chunk=0, score=0.03, char_start=0, char_end=1, text="x",
    ...         signals=(BranchSignal("lexical", 1, 0.5, lex), BranchSignal("semantic", 1, 0.2, sem)))
    >>> b = a.model_copy(update={"rank": 2, "doc_id": "b", "score": 0.0325})
    >>> (a, b), notes = assign_tie_groups([a, b])
    >>> notes, a.tie_group, b.tie_group, [s.tie_group for s in b.signals]
    (['tie group 1: ranks 1, 2 (a, b) have identical ranking signals; their order within the group (by doc id) carries no meaning'], 1, 1, [1, 1])
    """
    # Nothing to compare for a hit no branch scored.
    whole = _groups(hits, lambda h: None if all(s.raw is None for s in h.signals) else signal_key(h))
    notes: list[str] = []
    for first, ranks in sorted((min(r), r) for r in whole.values()):
        ids = ", ".join(h.doc_id for h in sorted(hits, key=lambda h: h.rank) if h.rank in ranks)
        notes.append(
            f"tie group {first}: ranks {', '.join(map(str, ranks))} ({ids}) have identical ranking signals; "
            "their order within the group (by doc id) carries no meaning"
        )
    group_of = {rank: min(ranks) for ranks in whole.values() for rank in ranks}
    return _copies(hits, group_of), notes


def branch_tie_groups(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` with each branch's tie groups set, each hit's own ``tie_group`` as it is (a reranked order,
    whose ranking has none; a result read back from its JSON, which holds the whole ranking's)."""
    return _copies(hits, None)


def _copies(hits: Sequence[Hit], group_of: dict[int, int] | None) -> list[Hit]:
    """The hits with ``tie_group`` from ``group_of`` (by rank; None: each keeps its own) and each branch's
    group; unchanged ones as they are."""
    # Per branch: the raw scores two or more hits share, and the best rank among those hits.
    width = len(hits[0].signals) if hits else 0
    shared = [{raw: min(r) for raw, r in _groups(hits, _raw_of(i)).items()} for i in range(width)]
    out: list[Hit] = []
    for h in hits:
        signals = h.signals
        if any(sig.raw in shared[i] or sig.tie_group is not None for i, sig in enumerate(signals)):
            signals = tuple(sig._replace(tie_group=shared[i].get(sig.raw)) for i, sig in enumerate(signals))
        group = h.tie_group if group_of is None else group_of.get(h.rank)
        unchanged = group == h.tie_group and signals is h.signals
        out.append(h if unchanged else h.model_copy(update={"tie_group": group, "signals": signals}))
    return out


def _raw_of(i: int) -> Callable[[Hit], float | None]:
    """The raw score of a hit's ``i``-th branch signal."""
    return lambda h: h.signals[i].raw


def _groups(hits: Sequence[Hit], key: Callable[[Hit], Hashable | None]) -> dict[Hashable, list[int]]:
    """The ranks of the hits sharing each ``key`` (None: compared with nothing), two or more, in rank order."""
    groups: dict[Hashable, list[int]] = {}
    for h in hits:
        k = key(h)
        if k is not None:
            groups.setdefault(k, []).append(h.rank)
    return {k: sorted(ranks) for k, ranks in groups.items() if len(ranks) > 1}
