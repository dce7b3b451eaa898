"""The shape of a search response.  Its JSON is stable: same input, same bytes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["Hit", "SearchResult", "SnapshotRef"]


class Hit(BaseModel):
    rank: int
    doc_id: str
    chunk: int
    score: float = Field(description="Fused RRF score: sum over branches of 1/(rrf_k + rank).")
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


class SnapshotRef(BaseModel):
    id: int
    manifest_hash: str | None


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

    def to_json(self, *, timings: bool = False, indent: int | None = None) -> str:
        """Canonical JSON.  Timings and the log id vary run to run, so they are left out by default."""
        exclude = set() if timings else {"timings", "query_id"}
        return self.model_dump_json(exclude=exclude, indent=indent)
