"""One stored document, as a snapshot holds it: read-only, for agents and tools that cite a search hit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from psycopg import sql

from ..collection import CollectionInfo
from ..errors import NotFound
from ..store.database import Database
from ..store.steps import Fetch, Steps, run_steps
from .purge_key import PurgeKey
from .segments import live_documents_sql

__all__ = ["StoredDocument", "get_document", "get_document_steps"]


@dataclass(frozen=True)
class StoredDocument:
    """One document as ``snapshot_id`` holds it (``display`` fields left out)."""

    collection: str
    snapshot_id: int
    doc_id: str
    title: str
    body: str
    metadata: Mapping[str, Any]
    #: sha256 of the document's normalised content: which version the snapshot holds.
    content_hash: str

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of MCP's ``get_document``, keys in this order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def get_document(
    db: Database, coll: CollectionInfo, snapshot_id: int, doc_id: str, *, purges: PurgeKey | None = None
) -> StoredDocument:
    """The version of ``doc_id`` in ``snapshot_id``: title, body, metadata and content hash.

    ``display`` fields (names, contacts) are left out: they are for people, and
    an agent reading documents is one more ranker they must not reach.

    An id the snapshot does not hold is :class:`NotFound` with one message, whether it was never
    stored or a purge erased it: a reader must not learn that an id was there.  ``purges`` (the
    home's purge key: an administrator's call, such as ``ranklock document get``) names the purge
    instead, when one erased it.
    """
    return run_steps(db, get_document_steps(coll, snapshot_id, doc_id, purges=purges))


def get_document_steps(
    coll: CollectionInfo, snapshot_id: int, doc_id: str, *, purges: PurgeKey | None = None
) -> Steps[StoredDocument]:
    """:func:`get_document` as steps (ranklock.store.steps), for the sync and the async engine."""
    rows = yield Fetch(
        sql.SQL(
            "SELECT d.doc_id, d.title, d.body, d.metadata, d.content_hash FROM ({}) AS s "
            "JOIN ranklock.documents d ON d.collection_id = %(coll)s AND d.doc_id = s.doc_id "
            "AND d.content_hash = s.content_hash"
        ).format(live_documents_sql()),
        {"coll": coll.id, "sid": snapshot_id, "ids": [doc_id]},
    )
    row = rows[0] if rows else None
    if row is None:
        # To an administrator an erased document is not "not found": say which purge erased it (its keyed
        # hash tells).  A reader is told what it would be told of an id never stored, in the same steps.
        purged: list[dict[str, Any]] = []
        if purges is not None:
            purged = yield Fetch(
                "SELECT id, at FROM ranklock.purges WHERE collection_id = %s AND (key_id = %s OR key_id IS NULL) "
                "AND id_hashes && %s ORDER BY id DESC LIMIT 1",
                [coll.id, purges.key_id, list(purges.hashes(coll.name, doc_id))],
            )
        if purged:
            raise NotFound(
                f"document {doc_id!r} of {coll.name!r} was erased by purge {purged[0]['id']} at "
                f"{purged[0]['at'].isoformat(timespec='seconds')}, from every snapshot; nothing of it is stored."
            )
        raise NotFound(
            f"collection {coll.name!r} has no document {doc_id!r} in snapshot {snapshot_id}; "
            "use a doc_id from a search hit of that snapshot."
        )
    return StoredDocument(collection=coll.name, snapshot_id=snapshot_id, **row)
