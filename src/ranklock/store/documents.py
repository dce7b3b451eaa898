"""Document versions in ``ranklock.documents``.

A version is keyed by (collection, doc_id, content_hash) and written once;
a segment references versions through ``ranklock.segment_documents``.
Rows go in and come out as plain values (this layer sits below
``ranklock.ingest``, whose ``Document`` the caller builds)::

    >>> store_versions(db, coll.id, [(d.doc_id, d.content_hash, d.title, d.body, d.metadata, d.display)])
    >>> load_versions(db, coll.id, [("d1", "ab12…")])         # dicts: doc_id, title, body, metadata, display

A version's ``source_id`` (ranklock.snapshot.sources) is the one thing that changes after it is
written: which source gave it last, so the content never changes, only who holds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg.types.json import Jsonb

from .database import Database

__all__ = ["Version", "claim_versions", "load_versions", "store_versions"]


#: One document version: doc_id, content_hash, title, body, metadata, display.
Version = tuple[str, str, str, str, dict[str, Any], dict[str, Any]]


def store_versions(db: Database, collection_id: int, versions: Iterable[Version], source_id: int | None = None) -> None:
    """Store each document version, once: COPY into a staging table, then insert the new ones.

    Each version is recorded as given by ``source_id`` (None: by no source), also one stored before.
    """
    with db.connection() as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE IF NOT EXISTS doc_stage (LIKE ranklock.documents INCLUDING DEFAULTS) ON COMMIT DROP"
        )
        with cur.copy(
            "COPY doc_stage (collection_id, doc_id, content_hash, title, body, metadata, display, source_id) FROM STDIN"
        ) as cp:
            for doc_id, content_hash, title, body, metadata, display in versions:
                cp.write_row(
                    [collection_id, doc_id, content_hash, title, body, Jsonb(metadata), Jsonb(display), source_id]
                )
        cur.execute(
            "INSERT INTO ranklock.documents "
            "(collection_id, doc_id, content_hash, title, body, metadata, display, source_id) "
            "SELECT collection_id, doc_id, content_hash, title, body, metadata, display, source_id FROM doc_stage "
            "ON CONFLICT (collection_id, doc_id, content_hash) DO UPDATE SET source_id = EXCLUDED.source_id "
            "WHERE ranklock.documents.source_id IS DISTINCT FROM EXCLUDED.source_id"
        )


def claim_versions(db: Database, collection_id: int, pairs: list[tuple[str, str]], source_id: int | None) -> None:
    """Record the stored (doc_id, content_hash) versions ``pairs`` as given by ``source_id`` now."""
    if not pairs:
        return
    db.execute(
        "UPDATE ranklock.documents AS d SET source_id = %s FROM unnest(%s::text[], %s::text[]) AS p(doc_id, "
        "content_hash) WHERE d.collection_id = %s AND d.doc_id = p.doc_id AND d.content_hash = p.content_hash "
        "AND d.source_id IS DISTINCT FROM %s",
        [source_id, [p[0] for p in pairs], [p[1] for p in pairs], collection_id, source_id],
    )


def load_versions(db: Database, collection_id: int, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The rows (doc_id, title, body, metadata, display) of the given (doc_id, content_hash) versions."""
    if not pairs:
        return []
    return db.fetchall(
        "SELECT d.doc_id, d.title, d.body, d.metadata, d.display FROM ranklock.documents d "
        "JOIN unnest(%s::text[], %s::text[]) AS p(doc_id, content_hash) "
        "ON d.doc_id = p.doc_id AND d.content_hash = p.content_hash WHERE d.collection_id = %s",
        [[p[0] for p in pairs], [p[1] for p in pairs], collection_id],
    )
