"""The query's embedding, through the embedding cache.

A query embedded once is read back from ``ranklock.embedding_cache`` (keyed by
the embedder's weights checksum and the text's sha256), so the same text always
gets the same float32s.  ``store=False`` reads the cache but never writes it:
``search_sql`` is read-only.
"""

from __future__ import annotations

import numpy as np

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..errors import EmbedderError
from ..ingest.normalize import text_sha256
from ..store.database import Database
from ..store.steps import Fetch, Offload, Steps, run_steps

__all__ = ["query_vector", "query_vector_steps"]


def query_vector(
    db: Database, coll: CollectionInfo, emb: Embedder, text: str, *, store: bool = True, primary: Database | None = None
) -> np.ndarray:
    """The embedding of ``text`` with ``emb`` (already checked against the collection's weights).

    The cache is read on ``db``; a new vector is stored on ``primary`` (default ``db``): ``db`` may be a
    read replica, which cannot write.
    """
    return run_steps(db, query_vector_steps(coll, emb, text, store=store), primary=primary)


def query_vector_steps(coll: CollectionInfo, emb: Embedder, text: str, *, store: bool = True) -> Steps[np.ndarray]:
    """:func:`query_vector` as steps (ranklock.store.steps): the model runs off the event loop when async."""
    h = text_sha256(text)
    rows = yield Fetch(
        "SELECT embedding FROM ranklock.embedding_cache WHERE embedder_sha256 = %s AND text_sha256 = %s",
        [coll.embedder_sha256, h],
    )
    if rows:
        return np.asarray(rows[0]["embedding"].to_numpy(), dtype=np.float32)
    # Embedding is CPU-bound (torch): an Offload step, so AsyncEngine runs it in a worker thread.
    vec = yield Offload(lambda: emb.embed([text])[0])
    if vec.shape != (coll.dim,):
        raise EmbedderError(f"query vector has dimension {vec.shape[0]}, collection {coll.name!r} expects {coll.dim}.")
    if store:
        from pgvector import Vector

        yield Fetch(
            "INSERT INTO ranklock.embedding_cache (embedder_sha256, text_sha256, embedding) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [coll.embedder_sha256, h, Vector(vec)],
            primary=True,
        )
    return np.asarray(vec, dtype=np.float32)
