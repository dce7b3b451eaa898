"""The query's embedding, through the embedding cache.

A query embedded once is read back from ``ranklock.embedding_cache`` (keyed by
the embedder's weights checksum and the text's sha256), so the same text always
gets the same float32s.  ``store=False`` reads the cache but never writes it:
``search_sql`` is read-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..errors import EmbedderError
from ..ingest.normalize import text_sha256
from ..store.database import Database
from ..store.steps import Fetch, Offload, Steps, run_steps

if TYPE_CHECKING:
    from .context import Memo

__all__ = ["query_vector", "query_vector_steps"]


def query_vector(
    db: Database, coll: CollectionInfo, emb: Embedder, text: str, *, store: bool = True, primary: Database | None = None
) -> np.ndarray:
    """The embedding of ``text`` with ``emb`` (already checked against the collection's weights).

    The cache is read on ``db``; a new vector is stored on ``primary`` (default ``db``): ``db`` may be a
    read replica, which cannot write.
    """
    return run_steps(db, query_vector_steps(coll, emb, text, store=store), primary=primary)


def query_vector_steps(
    coll: CollectionInfo,
    emb: Embedder,
    text: str,
    *,
    store: bool = True,
    memo: Memo | None = None,
    writes: list[Fetch] | None = None,
) -> Steps[np.ndarray]:
    """:func:`query_vector` as steps (ranklock.store.steps): the model runs off the event loop when async.

    ``memo`` (a process's, ranklock.search.context) answers a text this process embedded or read
    before, with no round trip; ``writes``: a new vector's INSERT is appended there for the caller
    to send later (a search sends it with its query log), instead of now.
    """
    h = text_sha256(text)
    key = ("vector", coll.embedder_sha256, h)
    kept = memo.get(key) if memo is not None else None
    if kept is not None:
        return np.asarray(kept)
    rows = yield Fetch(
        "SELECT embedding FROM ranklock.embedding_cache WHERE embedder_sha256 = %s AND text_sha256 = %s",
        [coll.embedder_sha256, h],
    )
    if rows:
        vec = np.asarray(rows[0]["embedding"].to_numpy(), dtype=np.float32)
    else:
        # Embedding is CPU-bound (torch): an Offload step, so AsyncEngine runs it in a worker thread.
        vec = yield Offload(lambda: emb.embed([text])[0])
        if vec.shape != (coll.dim,):
            raise EmbedderError(
                f"query vector has dimension {vec.shape[0]}, collection {coll.name!r} expects {coll.dim}."
            )
        vec = np.asarray(vec, dtype=np.float32)
        if store:
            from pgvector import Vector

            insert = Fetch(
                "INSERT INTO ranklock.embedding_cache (embedder_sha256, text_sha256, embedding) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                [coll.embedder_sha256, h, Vector(vec)],
                primary=True,
            )
            if writes is not None:
                writes.append(insert)
            else:
                yield insert
    if memo is not None and (rows or store):
        # Kept read-only: every search of this text shares the one array.
        vec.setflags(write=False)
        memo.put(key, vec)
    return vec
