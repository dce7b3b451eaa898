"""The end of a collection's life: drop it, with every snapshot, segment, document version and log entry.

What a drop removes, in one transaction under the collection's writer lock (so no ingest is halfway
through it, and a waiting one then finds no collection):

* every snapshot and every segment, with their tables (ranklock.store.tables), and the catalog rows
  that hang off them (dead documents, value counts, the result cache);
* every stored document version and the purge records (``ON DELETE CASCADE`` from the collection);
* the query-log and answer-log entries of the collection: they quote its documents, and no replay
  can run without its snapshots.  The drop is recorded (``ranklock.collection_drops``: the name, the
  time, the ids of the removed entries), so a replay of one says the collection was dropped.

What it leaves: the embedding cache (vectors keyed by the weights and the text's sha256, no text,
shared by every collection with the same embedder), API tokens, and other collections.  Streaming
replicas are byte copies: they apply the drop as they replay the WAL, and a search a replica was
running on the collection then ends with an error rather than stale results.

    >>> drop_collection(db, coll, lock_wait=300).documents   # doctest: +SKIP
    13
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..collection import CollectionInfo
from ..errors import SnapshotError
from ..store import locks
from ..store.database import Database
from .build import drop_segment_tables, drop_snapshot_tables
from .writer import writing

__all__ = ["CollectionDrop", "drop_collection"]


@dataclass(frozen=True)
class CollectionDrop:
    """What :func:`drop_collection` removed (``ranklock collection drop --json``)."""

    collection: str
    snapshots: tuple[int, ...]
    segments: tuple[int, ...]
    tables: int
    documents: int
    query_log_entries: int
    answer_log_entries: int
    #: Its row in ``ranklock.collection_drops``.
    drop_id: int

    def as_dict(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}


def drop_collection(db: Database, coll: CollectionInfo, *, lock_wait: float) -> CollectionDrop:
    """Drop ``coll`` and everything it holds (see the module docstring); refused while a live process builds."""
    name = coll.name
    with writing(db, coll.id, name, lock_wait), db.connection() as conn, conn.transaction():
        if conn.execute("SELECT 1 FROM ranklock.collections WHERE id = %s FOR UPDATE", [coll.id]).fetchone() is None:
            from ..collection import read_collection

            read_collection(db, name)  # raises NotFound, naming the collections there are
        snapshots = [
            (int(r[0]), r[1])
            for r in conn.execute(
                "SELECT id, status FROM ranklock.snapshots WHERE collection_id = %s ORDER BY id", [coll.id]
            ).fetchall()
        ]
        for sid, status in snapshots:
            # A build under the writer lock is ours to wait for; one whose builder holds its build
            # lock (a `--no-activate` build in another process) is alive: never drop under it.
            if status == "building":
                got = conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [locks.BUILD, sid]).fetchone()
                if not got or not got[0]:
                    raise SnapshotError(
                        f"snapshot {sid} of {name!r} is being built by a live process; wait for it to finish, or "
                        f"stop that process, then drop the collection. Nothing was dropped."
                    )
        segments = [
            int(r[0])
            for r in conn.execute(
                "SELECT id FROM ranklock.segments WHERE collection_id = %s ORDER BY id", [coll.id]
            ).fetchall()
        ]
        tables = sum(len(drop_snapshot_tables(conn, sid)) for sid, _ in snapshots)
        tables += sum(len(drop_segment_tables(conn, g)) for g in segments)
        documents = conn.execute(
            "SELECT count(DISTINCT doc_id) FROM ranklock.documents WHERE collection_id = %s", [coll.id]
        ).fetchone()
        queries = [
            int(r[0])
            for r in conn.execute(
                "DELETE FROM ranklock.query_log WHERE collection = %s RETURNING id", [name]
            ).fetchall()
        ]
        answers = [
            int(r[0])
            for r in conn.execute(
                "DELETE FROM ranklock.answer_log WHERE collection = %s RETURNING id", [name]
            ).fetchall()
        ]
        # snapshot_segments references segments without a cascade: its rows go first.
        conn.execute(
            "DELETE FROM ranklock.snapshot_segments WHERE snapshot_id = ANY (%s)", [[sid for sid, _ in snapshots]]
        )
        conn.execute("DELETE FROM ranklock.collections WHERE id = %s", [coll.id])
        row = conn.execute(
            "INSERT INTO ranklock.collection_drops (collection, snapshots, documents, query_ids, answer_ids) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            [name, [sid for sid, _ in snapshots], int(documents[0]) if documents else 0, queries, answers],
        ).fetchone()
        assert row is not None  # INSERT ... RETURNING returns its row
    return CollectionDrop(
        collection=name,
        snapshots=tuple(sid for sid, _ in snapshots),
        segments=tuple(segments),
        tables=tables,
        documents=int(documents[0]) if documents else 0,
        query_log_entries=len(queries),
        answer_log_entries=len(answers),
        drop_id=int(row[0]),
    )
