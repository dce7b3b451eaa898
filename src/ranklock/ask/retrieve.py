"""The retrieval half of an ask: one search with Ask's fixed parameters, numbered [1]..[N].

Separate from :mod:`ranklock.ask.run` so that :mod:`ranklock.ask.log` (whose replay
re-runs the retrieval) and the runner (which logs) do not import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import QueryError
from ..settings import REQUEST
from .model import AskChunk, EmbedFn

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..embed.base import Embedder
    from ..search.results import Hit, SearchResult
    from ..store.database import Database
    from .vectors import NoteInfo

__all__ = [
    "DEPTH",
    "MAX_CHUNKS",
    "RRF_K",
    "SearchFn",
    "embed_fn",
    "number_chunks",
    "passages",
    "retrieve",
]

# ranklock.ask reaches only the foundations (tests/test_ask_rules.py), so these are literals here;
# settings.ASK_DEPTH / ASK_RRF_K give eval --answers the same values, and a test checks they agree.
DEPTH = 40
RRF_K = 60
MAX_CHUNKS = DEPTH  # more passages than one branch's candidates would not be "the top of the fusion"

#: ``Engine.search``: (collection, query, *, k, mode, filter, snapshot, as_of, **params) -> SearchResult.
SearchFn = Callable[..., "SearchResult"]


def retrieve(
    search: SearchFn,
    collection: str,
    question: str,
    *,
    filter: Any,
    as_of: datetime | str | None,
    snapshot: int | None,
    chunks: int,
    mode: str = REQUEST.mode,
    rerank: int | None = None,
) -> SearchResult:
    """The search an ask runs: hybrid, depth 40, RRF k = 60, top ``chunks`` documents.

    ``mode`` exists for evaluation and replay only: ``eval --answers`` runs Ask over
    each retrieval mode, logs it, and the replay of such an answer must use it.
    ``rerank=N`` has the search rerank its top N fused hits first (ranklock.search.rerank).
    """
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 1 <= chunks <= MAX_CHUNKS:
        raise QueryError(
            f"chunks must be an integer from 1 to {MAX_CHUNKS}, got {chunks!r}; the default is {REQUEST.chunks}."
        )
    more: dict[str, Any] = {} if rerank is None else {"rerank": rerank}
    return search(
        collection,
        question,
        k=chunks,
        mode=mode,
        filter=filter,
        snapshot=snapshot,
        as_of=as_of,
        depth=DEPTH,
        rrf_k=RRF_K,
        **more,
    )


def number_chunks(hits: Sequence[Hit], notes: Mapping[str, NoteInfo] | None = None) -> tuple[AskChunk, ...]:
    """Hits in rank order as passages [1]..[N], each with its note's date, and its title when it begins with it."""
    notes = notes or {}
    out = []
    for i, h in enumerate(hits, start=1):
        note = notes.get(h.doc_id)
        title = (
            note.title if note and note.title and h.char_start == 0 and h.text.startswith(note.title + "\n\n") else None
        )
        out.append(
            AskChunk(
                n=i,
                doc_id=h.doc_id,
                chunk=h.chunk,
                rank=h.rank,
                score=h.score,
                text=h.text,
                date=note.date if note else None,
                title=title,
            )
        )
    return tuple(out)


def passages(db: Database, coll: CollectionInfo, res: SearchResult) -> tuple[AskChunk, ...]:
    """The hits of ``res`` numbered [1]..[N] with their notes' dates and titles (ranklock.ask.vectors.note_info)."""
    from .vectors import note_info

    return number_chunks(res.hits, note_info(db, coll, res.snapshot.id, [h.doc_id for h in res.hits]))


def embed_fn(db: Database, coll: CollectionInfo, embedder: Callable[[], Embedder] | None) -> EmbedFn | None:
    """Vectors under ``coll``'s embedder through the embedding cache, for generators that score by meaning."""
    if embedder is None:
        return None
    from .vectors import cached_vectors

    return lambda texts: cached_vectors(db, coll, embedder, texts)
