"""What both framework retrievers share: building the engine and the metadata every hit carries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..engine import Engine
from ..search.results import Hit, SearchResult, signal_fields

__all__ = ["engine_from", "hit_metadata", "run_search"]


def engine_from(engine: Engine | str) -> Engine:
    """The given :class:`Engine`, or one connected to the DSN string."""
    return engine if isinstance(engine, Engine) else Engine(dsn=engine)


def run_search(
    engine: Engine,
    collection: str,
    query: str,
    *,
    k: int,
    mode: str,
    filter: Any,
    as_of: datetime | str | None,
    snapshot: int | None,
    params: dict[str, Any],
) -> SearchResult:
    """One :meth:`Engine.search`; the frameworks see exactly what the engine returned, in its order."""
    return engine.search(collection, query, k=k, mode=mode, filter=filter, as_of=as_of, snapshot=snapshot, **params)


def hit_metadata(result: SearchResult, hit: Hit) -> dict[str, Any]:
    """The hit's ranks and scores with the snapshot and manifest it came from, so a caller can replay it."""
    return {
        "doc_id": hit.doc_id,
        "chunk": hit.chunk,
        "rank": hit.rank,
        "score": hit.score,
        **signal_fields(hit.signals),
        "tie_group": hit.tie_group,
        "char_start": hit.char_start,
        "char_end": hit.char_end,
        "collection": result.collection,
        "mode": result.mode,
        "snapshot_id": result.snapshot.id,
        "manifest_hash": result.snapshot.manifest_hash,
        "as_of": result.as_of,
        "complete": result.complete,
        "truncation": result.truncation,
    }
