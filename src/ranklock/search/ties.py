"""Ties are not preferences: hits with identical ranking signals share a tie group.

Each branch ranks with competition ranks (``rank()``), so two documents the
rankers cannot tell apart (the same raw score in every branch: the same
lexical score and the same vector distance, e.g. two identical resumes under different names) get the same
branch ranks and the same fused score, and sit next to each other; the final
order inside the tie is by doc id: stable, but meaningless.  This module
finds such hits among the results and gives them one ``tie_group`` (the rank
of the group's first hit), with a warning saying that order within the group
carries no meaning.

The raw signals are compared, not the ranks: ranks already contain the
doc-id tie-break that we want to expose.
"""

from __future__ import annotations

from collections.abc import Sequence

from .results import Hit

__all__ = ["assign_tie_groups", "signal_key"]


def signal_key(hit: Hit) -> tuple[float | None, ...]:
    """Everything the rankers know about a hit: each branch's raw score (its lexical score, its vector distance)."""
    return tuple(sig.raw for sig in hit.signals.values())


def assign_tie_groups(hits: Sequence[Hit]) -> list[str]:
    """Set ``tie_group`` on every hit that shares its signals with another; return one note per group.

    A hit without ties keeps ``tie_group = None``.  Groups are numbered by the
    rank of their first member, so the output is the same on every run.

    >>> from ranklock.search.results import BranchSignal
    >>> signals = {"lexical": BranchSignal(1, 0.5), "semantic": BranchSignal(1, 0.2)}
    >>> a = Hit(rank=1, doc_id="a", chunk=0, score=0.03, lexical_rank=1, lexical_score=0.5, semantic_rank=1,
    ...         semantic_distance=0.2, char_start=0, char_end=1, text="x", signals=signals)
    >>> b = a.model_copy(update={"rank": 2, "doc_id": "b", "score": 0.0325})
    >>> assign_tie_groups([a, b]), a.tie_group, b.tie_group
    (['tie group 1: ranks 1, 2 (a, b) have identical ranking signals; their order within the group (by doc id) carries no meaning'], 1, 1)
    """
    groups: dict[tuple[float | None, ...], list[Hit]] = {}
    for h in hits:
        key = signal_key(h)
        if all(raw is None for raw in key):
            continue  # nothing to compare
        groups.setdefault(key, []).append(h)
    notes: list[str] = []
    for members in sorted(groups.values(), key=lambda m: min(h.rank for h in m)):
        if len(members) < 2:
            continue
        first = min(h.rank for h in members)
        for h in members:
            h.tie_group = first
        ranks = ", ".join(str(h.rank) for h in sorted(members, key=lambda h: h.rank))
        ids = ", ".join(h.doc_id for h in sorted(members, key=lambda h: h.rank))
        notes.append(
            f"tie group {first}: ranks {ranks} ({ids}) have identical ranking signals; "
            "their order within the group (by doc id) carries no meaning"
        )
    return notes
