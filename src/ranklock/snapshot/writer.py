"""One writer at a time per collection.

A writer reads a collection's active snapshot and later moves the active
pointer: an ingest builds its snapshot from the active one (its parent) and
activates it; ``activate``, ``rollback`` and ``drop`` check the pointers and
change them.  Two writers interleaving there lose data silently: two ingests
built from the same parent each activate a snapshot missing the other's
documents.  So every writer holds the collection's advisory lock
``ranklock.store.locks.WRITER`` from reading the active snapshot until it has
switched it, and writers of one collection run one after the other, in the
order PostgreSQL queues them.  Readers never take it.

The wait is bounded by ``Settings.lock_wait`` (``RANKLOCK_LOCK_WAIT``,
seconds): a writer that cannot get the lock in time fails with a
:class:`~ranklock.errors.SnapshotError` and changes nothing.  A writer that
dies loses its connection and with it the lock.

The lock is re-entrant within a thread (an ingest activates its snapshot
through ``Engine.activate``, which takes it too), keyed by the database
handle, since a second pool connection asking for a lock its own process
holds would wait for itself.

Example::

    >>> with writing(db, coll.id, coll.name, wait_s=300):
    ...     ...                              # read the active snapshot, build, activate
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from ..errors import SnapshotError
from ..store import locks
from ..store.database import Database

__all__ = ["writing"]

_held = threading.local()


def _held_keys() -> set[tuple[int, int]]:
    keys: set[tuple[int, int]] | None = getattr(_held, "keys", None)
    if keys is None:
        keys = set()
        _held.keys = keys
    return keys


@contextmanager
def writing(db: Database, collection_id: int, name: str, wait_s: float) -> Iterator[float]:
    """Hold collection ``collection_id``'s writer lock for the block; yields the seconds spent waiting for it.

    Raises :class:`SnapshotError` when another writer holds it for longer
    than ``wait_s`` seconds (0: do not wait).
    """
    held = _held_keys()
    key = (id(db), int(collection_id))
    if key in held:
        yield 0.0
        return
    with db.connection() as conn:
        t0 = time.perf_counter()
        if wait_s <= 0:
            got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", [locks.WRITER, collection_id]).fetchone()
            if not got or not got[0]:
                raise _busy(conn, collection_id, name, wait_s)
        else:
            # lock_timeout bounds the wait inside PostgreSQL, which queues the
            # waiters (first come, first served); the statement timeout is
            # lifted so that a server default cannot cut the wait shorter.
            # Both are transaction-local (set_config(..., true)), so the pooled
            # connection never keeps them; the lock is session-level and
            # outlives the transaction.
            try:
                with conn.transaction():
                    conn.execute(
                        "SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', '0', true)",
                        [f"{max(1, round(wait_s * 1000))}ms"],
                    )
                    conn.execute("SELECT pg_advisory_lock(%s, %s)", [locks.WRITER, collection_id])
            except psycopg.errors.LockNotAvailable:
                raise _busy(conn, collection_id, name, wait_s) from None
        waited = time.perf_counter() - t0
        held.add(key)
        try:
            yield waited
        finally:
            held.discard(key)
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", [locks.WRITER, collection_id])


def _busy(conn: psycopg.Connection[Any], collection_id: int, name: str, wait_s: float) -> SnapshotError:
    row = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = %s AND objid::bigint = %s "
        "AND objsubid = 2 AND granted",
        [locks.WRITER, collection_id],
    ).fetchone()
    holder = f"PostgreSQL backend pid {row[0]}" if row is not None else "a process that has just finished"
    return SnapshotError(
        f"collection {name!r} is being written by another process ({holder}: an ingest, activate, rollback "
        f"or drop); gave up after waiting {wait_s:g} s (lock_wait, RANKLOCK_LOCK_WAIT). Nothing was written "
        "to the collection (vectors computed so far stay in the embedding cache). Run the command again "
        "when that writer has finished, or raise RANKLOCK_LOCK_WAIT."
    )
