"""The read gate of a snapshot: how a purge swaps segment tables under running searches.

A search's read transaction takes its snapshot's gate (a shared advisory lock,
``ranklock.store.locks.READ_GATE``) in its first statement, before it locks any
table (ranklock.search.fusion.settings_sql).  A purge that has copied a
segment's tables (ranklock.store.rewrite) closes the gate of every snapshot
holding the segment (the same lock, exclusive): the searches reading them
finish, new ones wait at the gate holding no table lock, and the swap's locks
are free at once.  Otherwise a search holding one old table while it waits for
another the swap already locked would wait on the swap while the swap waits on
it, and every later search behind both.

Each attempt is short: the gate is closed for at most :data:`GATE_WAIT_S` while
the searches inside finish, then the tables are tried for at most
:data:`SWAP_TRY_S` (a statement of something else than a search may hold one:
a count, a cache read); failing either, the gate opens again for
:data:`PAUSE_S` so that waiting searches go through, and the purge tries again,
up to its lock wait.  Once swapped, the gate stays closed until the purge's
transaction has committed (:func:`open_gates`): a search then reads the new tables.

>>> swap_behind_gates(conn, [12, 15], copies, counts, lock_wait=300)   # doctest: +SKIP
>>> open_gates(conn)                                                  # after the commit  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from ..errors import SnapshotError
from ..store import locks
from ..store.rewrite import Copy, swap_in

__all__ = ["GATE_WAIT_S", "PAUSE_S", "SWAP_TRY_S", "open_gates", "swap_behind_gates"]

#: The longest the gates wait for the searches inside them; new searches wait as long.
GATE_WAIT_S = 0.5
#: The longest the tables are tried with the gates closed.
SWAP_TRY_S = 0.5
#: How long the gates stay open between two attempts.
PAUSE_S = 0.1


def swap_behind_gates(
    conn: psycopg.Connection[Any],
    snapshots: Sequence[int],
    copies: list[Copy],
    also_drop: Sequence[sql.Identifier],
    *,
    lock_wait: float,
) -> None:
    """Close the gates of ``snapshots``, swap ``copies`` in and drop ``also_drop``; see the module docstring.

    The gates stay closed on return: the caller commits, then calls :func:`open_gates`.
    Raises :class:`SnapshotError` after ``lock_wait`` seconds of attempts.
    """
    deadline = time.monotonic() + lock_wait
    while True:
        if _close(conn, sorted(set(snapshots))):
            try:
                swap_in(conn, copies, also_drop=also_drop, lock_wait=SWAP_TRY_S)
                return
            except SnapshotError:
                open_gates(conn)
        if time.monotonic() > deadline:
            raise SnapshotError(
                f"searches or other readers kept the segment tables of snapshots {', '.join(map(str, snapshots))} "
                f"for more than {lock_wait:g} s, so their rewrite could not be swapped in; nothing was changed. "
                "Retry when fewer searches run, or raise RANKLOCK_LOCK_WAIT."
            )
        time.sleep(PAUSE_S)


def _close(conn: psycopg.Connection[Any], snapshots: list[int]) -> bool:
    """Take every gate (session locks, so they outlive a savepoint), each within GATE_WAIT_S; all or none."""
    wait = f"{int(GATE_WAIT_S * 1000)}ms"
    for sid in snapshots:
        try:
            # The timeout is set in the savepoint: its release keeps it, its rollback undoes it.
            with conn.transaction():
                row = conn.execute(
                    "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)", [wait]
                ).fetchone()
                conn.execute("SELECT pg_advisory_lock(%s, %s)", [locks.READ_GATE, sid])
                conn.execute("SELECT set_config('lock_timeout', %s, true)", [row[0] if row else "0"])
        except psycopg.errors.LockNotAvailable:
            open_gates(conn)
            return False
    return True


def open_gates(conn: psycopg.Connection[Any]) -> None:
    """Open every gate this connection holds (after the purge's commit, or when an attempt failed)."""
    with contextlib.suppress(psycopg.Error):
        conn.execute(
            "SELECT pg_advisory_unlock(l.classid::int, l.objid::int) FROM pg_locks AS l WHERE l.locktype = "
            "'advisory' AND l.classid = %s AND l.objsubid = 2 AND l.pid = pg_backend_pid() AND l.granted",
            [locks.READ_GATE],
        )
