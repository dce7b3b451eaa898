"""The ranking rules a snapshot is pinned to: how BM25 counts query terms, how RRF weighs ties.

A rule that changes scores gets a new version, and the manifest of every
snapshot built under it records the versions (``manifest["ranking"]``).  A
search runs its snapshot's rules, so the same query against the same snapshot
keeps returning the same bytes across an upgrade of ranklock; a snapshot built
before the rules were recorded runs the first versions.

``bm25/1``
    Each distinct query term counted once.
``bm25/2`` (issue 22)
    A query term counted once per occurrence in the query (its query-term
    frequency ``qtf``), as Lucene, Elasticsearch and bm25s do and as
    Robertson's BM25 does with k3 -> infinity: a question that repeats a word
    is about that word.
``rrf/1``
    Each document of a branch gets ``1 / (rrf_k + rank)`` with competition
    ranks, so a block of n tied documents all get the first place's weight.
``rrf/2`` (issue 22)
    A block of n tied documents at rank r shares the positions r..r+n-1 it
    occupies: each gets the mean of ``1 / (rrf_k + p)`` over them, so the
    block weighs exactly what n distinct ranks weigh (and one document, a
    block of one, gets ``1 / (rrf_k + r)`` as before).  Reported ranks stay
    competition ranks: a tie is still a tie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import SnapshotError

__all__ = ["CURRENT_RULES", "FIRST_RULES", "RankingRules", "rules_of"]


@dataclass(frozen=True)
class RankingRules:
    bm25: str
    fusion: str

    @property
    def query_tf(self) -> bool:
        """BM25 counts a query term once per occurrence."""
        return self.bm25 != "bm25/1"

    @property
    def shared_ties(self) -> bool:
        """A tie block shares the RRF weights of the positions it spans."""
        return self.fusion != "rrf/1"

    def as_manifest(self) -> dict[str, str]:
        return {"bm25": self.bm25, "fusion": self.fusion}


#: The rules a snapshot is built under today.
CURRENT_RULES = RankingRules(bm25="bm25/2", fusion="rrf/2")
#: The rules of snapshots whose manifest records none (built before issue 22).
FIRST_RULES = RankingRules(bm25="bm25/1", fusion="rrf/1")

_KNOWN = {"bm25": ("bm25/1", "bm25/2"), "fusion": ("rrf/1", "rrf/2")}


def rules_of(manifest: dict[str, Any] | None) -> RankingRules:
    """The rules recorded in ``manifest`` (the first versions when it records none).

    A version this ranklock does not know (a snapshot written by a newer one)
    is refused rather than searched under other rules.
    """
    ranking = (manifest or {}).get("ranking")
    if not ranking:
        return FIRST_RULES
    for key, known in _KNOWN.items():
        if ranking.get(key) not in known:
            raise SnapshotError(
                f"the snapshot was built under ranking rule {key} = {ranking.get(key)!r}, which this version of "
                f"ranklock does not know (it knows {', '.join(known)}); upgrade ranklock to search it."
            )
    return RankingRules(bm25=str(ranking["bm25"]), fusion=str(ranking["fusion"]))
