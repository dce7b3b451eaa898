"""A folder is a source: which documents of a collection came from it, and what mirroring it removes.

An ingest of a folder of files (ranklock.ingest.formats) records the folder in
``ranklock.sources`` by its real path, so ``notes``, ``./notes``, ``/home/me/notes`` and a
symbolic link to it are one source, and every version it gives is marked as given by it
(``ranklock.documents.source_id``).  The next ingest of the folder *mirrors* it: the documents
the active snapshot holds from that source whose files are gone are removed in the new snapshot
(masked, as a delete masks them), and named; documents of other sources, of JSONL or of
standard input are never touched.  What is not gone is not removed:

* a file that is there but cannot be read (permissions, a broken PDF), or a folder under it
  that cannot be listed, keeps the version the collection has (:meth:`FolderRead.keeps`);
* a folder that holds nothing now, as a drive that is not mounted looks, removes nothing
  unless the caller says it is empty on purpose (``allow_empty``): :func:`emptied_error`;
* a folder that does not exist is refused before anything is read (:func:`missing_error`).

Two ingests of one folder at once are ordered by the writer lock (ranklock.snapshot.writer),
and by when they read it: a mirror that read the folder before the last one written did holds
older news (it would bring back a file deleted in between), so it writes nothing
(``superseded``)::

    >>> folder = FolderRead.of(load_files("notes", allow_empty=True))   # doctest: +SKIP
    >>> ingest_snapshot(db, coll, given, emb, lock_wait=300, folder=folder)   # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg import sql

from ..errors import IngestError
from ..phrasing import plural
from ..store.database import Database
from .segments import live_documents_sql

if TYPE_CHECKING:
    from ..ingest.formats import FileLoad

__all__ = [
    "FolderRead",
    "Source",
    "emptied_error",
    "find_source",
    "missing_error",
    "record_source",
    "source_documents",
    "version_sources",
]


@dataclass(frozen=True)
class FolderRead:
    """One read of a folder, as the mirror needs it: its real path, when the read began, what it could not read."""

    path: str
    read_at: float
    #: Paths (doc ids) of files that are there but could not be read; a folder's ends in ``/``.
    unreadable: tuple[str, ...] = ()

    @classmethod
    def of(cls, load: FileLoad) -> FolderRead:
        if load.root is None:
            raise ValueError("a read of one file is no folder")
        return cls(load.root, load.read_at, tuple(u.path for u in load.unreadable))

    def keeps(self, doc_id: str) -> bool:
        """Whether ``doc_id``'s file is there though it was not read (so its stored version stays)."""
        return any(doc_id == u or (u.endswith("/") and doc_id.startswith(u)) for u in self.unreadable)


@dataclass(frozen=True)
class Source:
    """A row of ``ranklock.sources``."""

    id: int
    path: str
    mirrored_at: float | None


def find_source(db: Database, collection_id: int, path: str) -> Source | None:
    """The source of ``collection_id`` at the real path ``path``, if an ingest ever read it."""
    row = db.fetchone(
        "SELECT id, path, mirrored_at FROM ranklock.sources WHERE collection_id = %s AND path = %s",
        [collection_id, path],
    )
    return Source(int(row["id"]), row["path"], row["mirrored_at"]) if row else None


def record_source(db: Database, collection_id: int, path: str, mirrored_at: float | None) -> Source:
    """The source at ``path``, created if new; ``mirrored_at`` (a mirror's read time) recorded when given.

    Called under the collection's writer lock, so no other writer of the collection changes it meanwhile.
    """
    row = db.fetchone(
        "INSERT INTO ranklock.sources (collection_id, path, mirrored_at) VALUES (%s, %s, %s) "
        "ON CONFLICT (collection_id, path) DO UPDATE SET mirrored_at = "
        "COALESCE(EXCLUDED.mirrored_at, ranklock.sources.mirrored_at) RETURNING id, path, mirrored_at",
        [collection_id, path, mirrored_at],
    )
    if row is None:  # INSERT ... RETURNING always returns the row
        raise RuntimeError("INSERT returned no row")
    return Source(int(row["id"]), row["path"], row["mirrored_at"])


def source_documents(db: Database, snapshot_id: int, source_id: int) -> dict[str, tuple[int, str]]:
    """doc_id -> (segment id, content hash) of the live documents of ``snapshot_id`` last given by the source.

    Read from the source's versions (an index on them), so it costs what the source holds, not the collection.
    """
    rows = db.fetchall(
        "SELECT sd.segment_id, sd.doc_id, sd.content_hash FROM ranklock.documents AS d "
        "JOIN ranklock.segment_documents AS sd ON sd.doc_id = d.doc_id AND sd.content_hash = d.content_hash "
        "JOIN ranklock.snapshot_segments AS ss ON ss.segment_id = sd.segment_id AND ss.snapshot_id = %(sid)s "
        "JOIN ranklock.sources AS s ON s.id = %(src)s AND d.collection_id = s.collection_id "
        "WHERE d.source_id = %(src)s AND NOT EXISTS ("
        "SELECT 1 FROM ranklock.snapshot_dead AS x WHERE x.snapshot_id = %(sid)s "
        "AND x.segment_id = sd.segment_id AND x.doc_id = sd.doc_id)",
        {"sid": snapshot_id, "src": source_id},
    )
    return {r["doc_id"]: (int(r["segment_id"]), r["content_hash"]) for r in rows}


def version_sources(db: Database, snapshot_id: int, collection_id: int, ids: list[str]) -> dict[str, tuple[int, str]]:
    """doc_id -> (source id, source path) of the live versions of ``ids`` in ``snapshot_id`` given by a source."""
    if not ids:
        return {}
    rows = db.fetchall(
        sql.SQL(
            "SELECT l.doc_id, s.id, s.path FROM ({}) AS l JOIN ranklock.documents AS d ON d.collection_id = %(coll)s "
            "AND d.doc_id = l.doc_id AND d.content_hash = l.content_hash JOIN ranklock.sources AS s ON s.id = d.source_id"
        ).format(live_documents_sql()),
        {"sid": snapshot_id, "ids": ids, "coll": collection_id},
    )
    return {r["doc_id"]: (int(r["id"]), r["path"]) for r in rows}


def emptied_error(name: str, path: str, held: int) -> IngestError:
    """The refusal of a mirror that would remove every document of a folder that holds nothing now."""
    return IngestError(
        f"{path} holds no file to ingest now, and collection {name!r} holds {plural(held, 'document')} ingested "
        "from it; nothing was changed (a folder on a drive that is not mounted looks just as empty). Mount it "
        "again; if you emptied it on purpose, pass --allow-empty (allow_empty=True) to remove them."
    )


def missing_error(db: Database, collection_id: int | None, active: int | None, name: str, path: Path) -> IngestError:
    """The refusal of a path that does not exist, saying what the collection holds from it, if anything."""
    real = os.path.realpath(path)
    source = find_source(db, collection_id, real) if collection_id is not None else None
    held = len(source_documents(db, active, source.id)) if source is not None and active is not None else 0
    if source is None or held == 0:
        return IngestError(f"{path} does not exist; pass a corpus.jsonl, a BEIR folder, or a folder of .txt/.md files.")
    return IngestError(
        f"{path} does not exist (a drive that is not mounted, or a folder moved?); collection {name!r} keeps the "
        f"{plural(held, 'document')} ingested from it, and nothing was changed. Mount it again, or ingest the "
        "folder from where it is now; to remove those documents, ingest an empty folder at that path with "
        "--allow-empty."
    )
