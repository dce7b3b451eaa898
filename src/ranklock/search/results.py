"""The shape of a search response.  Its JSON is stable: same input, same bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from .spec import Signal

__all__ = ["BranchSignal", "Hit", "SearchResult", "SnapshotRef"]


class BranchSignal(NamedTuple):
    """What one branch said of a hit: its competition rank and raw score (None: it did not rank it)."""

    rank: int | None
    raw: float | None


class Hit(BaseModel):
    rank: int
    doc_id: str
    chunk: int
    score: float = Field(
        description="Fused RRF score: sum over branches of 1/(rrf_k + rank); n documents tied at rank r share the "
        "weights of positions r..r+n-1 (rule rrf/2)."
    )
    lexical_rank: int | None
    lexical_score: float | None
    semantic_rank: int | None
    semantic_distance: float | None
    char_start: int
    char_end: int
    text: str
    tie_group: int | None = Field(
        default=None,
        description="Hits sharing a tie group have identical ranking signals; their order within "
        "the group (by doc_id, then chunk) carries no meaning.",
    )
    #: Every branch's signals by branch name (ranklock.search.branches); the JSON keys above
    #: (``lexical_rank``, ...) are derived from them, and the JSON leaves this out.
    signals: dict[str, BranchSignal] = Field(default_factory=dict, exclude=True, repr=False)

    @classmethod
    def of(
        cls,
        *,
        rank: int,
        doc_id: str,
        chunk: int,
        score: float,
        signals: Mapping[str, BranchSignal],
        keys: Mapping[str, Signal],
        char_start: int,
        char_end: int,
        text: str,
    ) -> Hit:
        """A hit from every branch's signals; each fills the JSON fields its ``keys`` name, where the hit has them."""
        named: dict[str, Any] = {}
        for name, sig in signals.items():
            named[keys[name].rank_key] = sig.rank
            named[keys[name].raw_key] = sig.raw
        fields = {k: v for k, v in named.items() if k in cls.model_fields}
        return cls(
            rank=rank,
            doc_id=doc_id,
            chunk=chunk,
            score=score,
            char_start=char_start,
            char_end=char_end,
            text=text,
            signals=dict(signals),
            **fields,
        )


class SnapshotRef(BaseModel):
    id: int
    manifest_hash: str | None
    #: The segments of the snapshot the search read (all of them unless its filter routed it to fewer,
    #: ranklock.segmenting): where the hits came from, like the snapshot id, never part of a ranking.
    segments: list[int] = Field(default_factory=list)


class SearchResult(BaseModel):
    query: str
    collection: str
    mode: str
    k: int
    hits: list[Hit]
    params: dict[str, Any]
    snapshot: SnapshotRef
    filter: Any = None
    as_of: str | None = None
    matching_count: int | None = None
    complete: bool | None = None
    truncation: str | None = None
    warnings: list[str] = Field(default_factory=list)
    query_id: int | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    #: Where the search ran: "primary" or a read replica's host:port (ranklock.store.replicas).
    served_by: str = "primary"
    #: Results skipped before these (a later page, :meth:`page`); the hits keep their ranks in the whole list.
    offset: int = 0

    def to_json(self, *, timings: bool = False, indent: int | None = None, served_by: bool = False) -> str:
        """Canonical JSON.  Timings, the log id and the serving node vary run to run, so they are left out
        by default (every node serves the same bytes; the digest in the query log is of this JSON).
        ``offset`` appears only on a later page, so a first page's bytes are what they always were."""
        exclude = set() if timings else {"timings", "query_id"}
        if not served_by:
            exclude.add("served_by")
        if not self.offset:
            exclude.add("offset")
        return self.model_dump_json(exclude=exclude, indent=indent)

    def page(self, offset: int, k: int) -> SearchResult:
        """Hits ``offset + 1`` to ``offset + k`` of this result (a search of ``offset + k``), ranks unchanged.

        The search behind a page is the ``offset + k`` one, logged as such: ``query_id`` replays it.
        ``complete`` speaks of that whole list, so a short last page of an exhausted corpus is complete.
        """
        return self.model_copy(update={"hits": self.hits[offset : offset + k], "k": k, "offset": offset})
