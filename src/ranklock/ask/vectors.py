"""Vectors of the texts a generator scores by meaning, through the embedding cache, and the notes' dates.

Sentence and span vectors are cached exactly like chunk and query vectors:
``ranklock.embedding_cache`` keyed by the embedder's weights checksum and the
text's sha256 (ranklock.snapshot.build writes chunk vectors there, ranklock.search.embedding
query vectors).  A span that is a whole chunk, or a question already searched,
is therefore read back, never embedded again; a new text is embedded once and
stored, so every later ask reads the same float32s (a replay is byte-identical
even if the model's batching would round differently).

The embedder is asked for only when a text is missing: a warm ask loads no model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from ..errors import EmbedderError
from ..snapshot.segments import live_documents_sql

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..embed.base import Embedder
    from ..store.database import Database

__all__ = ["NoteInfo", "cached_vectors", "note_info"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cached_vectors(
    db: Database, coll: CollectionInfo, embedder: Callable[[], Embedder], texts: Sequence[str]
) -> npt.NDArray[np.float32]:
    """One unit-length float32 row per text of ``texts`` (in order), cached by (weights, text) sha256.

    ``embedder`` returns the collection's embedder, already checked against its weights; it is
    called only when some text is not cached yet.
    """
    hashes = [_sha(t) for t in texts]
    wanted = sorted(set(hashes))
    found: dict[str, npt.NDArray[np.float32]] = {}
    for row in db.fetchall(
        "SELECT text_sha256, embedding FROM ranklock.embedding_cache WHERE embedder_sha256 = %s "
        "AND text_sha256 = ANY(%s)",
        [coll.embedder_sha256, wanted],
    ):
        found[row["text_sha256"]] = np.asarray(row["embedding"].to_numpy(), dtype=np.float32)
    missing = [h for h in wanted if h not in found]
    if missing:
        by_hash = {h: t for h, t in zip(hashes, texts, strict=True)}
        mat = embedder().embed([by_hash[h] for h in missing])
        if mat.shape != (len(missing), coll.dim):
            raise EmbedderError(
                f"the embedder returned vectors of shape {mat.shape} for {len(missing)} texts; collection "
                f"{coll.name!r} expects dimension {coll.dim}. Reinstall the collection's model."
            )
        from pgvector import Vector

        with db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            # Sorted inserts, ON CONFLICT DO NOTHING: two asks storing the same text at once never deadlock
            # or fail, and the first vector stored is the one every later read gets.
            cur.executemany(
                "INSERT INTO ranklock.embedding_cache (embedder_sha256, text_sha256, embedding) "
                "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [[coll.embedder_sha256, h, Vector(v)] for h, v in zip(missing, mat, strict=True)],
            )
        # Read back what the cache holds (another ask may have stored a text first): one answer for all.
        for row in db.fetchall(
            "SELECT text_sha256, embedding FROM ranklock.embedding_cache WHERE embedder_sha256 = %s "
            "AND text_sha256 = ANY(%s)",
            [coll.embedder_sha256, missing],
        ):
            found[row["text_sha256"]] = np.asarray(row["embedding"].to_numpy(), dtype=np.float32)
    return np.stack([found[h] for h in hashes]) if hashes else np.zeros((0, coll.dim), dtype=np.float32)


def _date_field(coll: CollectionInfo) -> str | None:
    """The collection's first declared ``date`` or ``timestamp`` field: what dates its notes."""
    return next((f.name for f in coll.fields if f.type in ("date", "timestamp")), None)


@dataclass(frozen=True)
class NoteInfo:
    """What Ask reads of a note besides its chunk: its date (ISO text, None: undated) and its title ("": none)."""

    date: str | None = None
    title: str = ""


def note_info(db: Database, coll: CollectionInfo, snapshot_id: int, doc_ids: Sequence[str]) -> dict[str, NoteInfo]:
    """Each document's date and title in ``snapshot_id``.

    The date is its first date/timestamp field, else its effective_from, as given; a document
    with neither is undated.  One statement, every value bound.
    """
    if not doc_ids:
        return {}
    field = _date_field(coll)
    rows: list[dict[str, Any]] = db.fetchall(
        sql.SQL(
            "SELECT s.doc_id, d.metadata ->> %(field)s AS field_date, d.metadata ->> 'effective_from' AS effective_from, "
            "d.title FROM ({live}) AS s JOIN ranklock.documents d ON d.collection_id = %(coll)s "
            "AND d.doc_id = s.doc_id AND d.content_hash = s.content_hash"
        ).format(live=live_documents_sql("snap")),
        {"field": field or "", "coll": coll.id, "snap": snapshot_id, "ids": sorted(set(doc_ids))},
    )
    out = dict.fromkeys(doc_ids, NoteInfo())
    for r in rows:
        date = None
        if field is not None and r["field_date"]:
            date = str(r["field_date"])
        elif r["effective_from"]:
            date = str(r["effective_from"])
        out[r["doc_id"]] = NoteInfo(date, str(r["title"] or ""))
    return out
