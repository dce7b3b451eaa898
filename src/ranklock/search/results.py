"""The shape of a search response.  Its JSON is stable: same input, same bytes.

A hit carries what every branch said of it as one :class:`BranchSignal` per branch of the
registry (ranklock.search.branches), in registry order; its JSON shows each branch as the two
keys its :class:`~.spec.Signal` names (``lexical_rank``, ``lexical_score``, ``semantic_rank``,
``semantic_distance``), derived from the signals, right after ``score``, and the same names read
them as attributes (``hit.lexical_rank``).  Nothing outside the search names a branch's fields: a
third branch shows up with its own keys.

Results are frozen: a step that changes one (a page, a rerank, the query log's id) returns a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, SkipValidation, model_serializer

from .spec import Signal

__all__ = ["BranchSignal", "Hit", "SearchResult", "SnapshotRef", "WithSignals", "signal_fields"]


class BranchSignal(NamedTuple):
    """What one branch said of a hit: its competition rank and raw score (None: it did not rank it).

    ``tie_group``: the hits of the result this branch cannot tell apart (the same raw score, hence
    the same rank) share one, the best hit rank among them (ranklock.search.ties); None when no other
    hit of the result shares this one's.  ``keys`` is the branch's :class:`~.spec.Signal`: its JSON keys.
    """

    name: str
    rank: int | None
    raw: float | None
    keys: Signal
    tie_group: int | None = None


def signal_fields(signals: Sequence[BranchSignal]) -> dict[str, int | float | None]:
    """The JSON keys of ``signals``, in their order: each branch's rank and raw score under its own names."""
    out: dict[str, int | float | None] = {}
    for sig in signals:
        out[sig.keys.rank_key] = sig.rank
        out[sig.keys.raw_key] = sig.raw
    return out


class WithSignals(BaseModel):
    """A model that carries a hit's branch signals (a :class:`Hit`, a plan's explanation of one): its JSON shows
    them as the keys their :class:`~.spec.Signal` names, right after ``score``, and the same names read them as
    attributes (``hit.lexical_rank``)."""

    #: Every registry branch's signals, in registry order (one per branch, a rank of None where it did not
    #: rank the hit or did not run).  Built by the search (ranklock.search.fusion), never from input: not
    #: validated again.
    signals: SkipValidation[tuple[BranchSignal, ...]] = Field(default=(), exclude=True, repr=False)

    @model_serializer(mode="wrap")
    def _with_signals(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in handler(self).items():
            out[key] = value
            if key == "score":
                out.update(signal_fields(self.signals))
        return out

    def signal(self, name: str) -> BranchSignal | None:
        """The signals of the branch called ``name``, or None when no such branch exists."""
        return next((sig for sig in self.signals if sig.name == name), None)

    def __getattr__(self, name: str) -> int | float | None:
        # A branch's rank and raw score by their JSON keys (``hit.lexical_rank``), read from the signals as the
        # JSON is: every branch's, with no attribute of its own to declare.  Only names that are no field get here.
        signals: tuple[BranchSignal, ...] = self.__dict__.get("signals", ())
        for sig in signals:
            if name == sig.keys.rank_key:
                return sig.rank
            if name == sig.keys.raw_key:
                return sig.raw
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class Hit(WithSignals):
    model_config = ConfigDict(frozen=True)

    rank: int
    doc_id: str
    chunk: int
    score: float = Field(
        description="Fused RRF score: sum over branches of 1/(rrf_k + rank); n documents tied at rank r share the "
        "weights of positions r..r+n-1 (rule rrf/2)."
    )
    char_start: int
    char_end: int
    text: str
    tie_group: int | None = Field(
        default=None,
        description="Hits sharing a tie group have identical ranking signals; their order within "
        "the group (by doc_id, then chunk) carries no meaning.",
    )


class SnapshotRef(BaseModel):
    id: int
    manifest_hash: str | None
    #: The segments of the snapshot the search read (all of them unless its filter routed it to fewer,
    #: ranklock.segmenting): where the hits came from, like the snapshot id, never part of a ranking.
    segments: list[int] = Field(default_factory=list)


class SearchResult(BaseModel):
    model_config = ConfigDict(frozen=True)

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
