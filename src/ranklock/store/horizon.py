"""Who keeps deleted rows alive: the transactions, standbys and slots that hold the server's xmin horizon back.

A row a transaction deleted stays readable to every snapshot taken before that transaction
committed, so VACUUM (``FULL`` included) keeps it, and ``VACUUM FULL`` copies it into the files it
writes as "recently dead", until the server's xmin horizon has passed the deleting transaction.
What holds the horizon back:

* a session whose snapshot or transaction is older: a ``pg_dump``, a REPEATABLE READ reader, an
  ingest of another collection;
* a replication slot's ``xmin``: a standby with ``hot_standby_feedback`` reports its oldest
  query's snapshot, and with no query its replay position, but only every
  ``wal_receiver_status_interval`` (10 s by default), or at once when its configuration is reloaded;
* a standby streaming without a slot, through its walsender (``pg_stat_replication.backend_xmin``);
* a prepared transaction;
* for the catalog (``pg_statistic``) also a logical slot's ``catalog_xmin``.

:func:`holders` names each, as a sentence; :func:`wait_for_horizon` waits, bounded, until none is
left, nudging the home's local standbys (:func:`local_standby_nudges`) so that an idle one reports at
once instead of up to 10 s later.  The answer is a prediction from the server's views; a purge checks
the files it rewrote afterwards (ranklock.store.residue).

>>> wait_for_horizon(conn, before=purge_xid + 1, timeout=60)     # doctest: +SKIP
Horizon(waited_s=0.4, holders=())
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

__all__ = ["Horizon", "holders", "local_standby_nudges", "next_xid", "wait_for_horizon"]

#: How often the views are read again while waiting.
_POLL_S = 0.1
#: How often a local standby that holds the horizon is asked (SIGHUP) to report its position again:
#: each reload logs a line in its log, so not at every poll.
_NUDGE_S = 0.5

# An xid is "older than ``before``" when it precedes it: age() counts back from the next xid, so the older
# one has the larger age (32-bit xids compared the way the server does, wraparound included).
_OLDER = "age({x}) > age(%(before)s::text::xid8::xid)"

_BACKENDS = (
    "SELECT pid, usename, application_name, state, backend_type, to_char(xact_start, 'YYYY-MM-DD HH24:MI:SS TZ'), "
    "left(regexp_replace(query, '\\s+', ' ', 'g'), 80) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
    # A walsender's xmin is its standby's feedback: named with the standbys below.
    "AND backend_type <> 'walsender' "
    # A plain VACUUM is left out of the horizon by the server itself (it holds no snapshot that needs old rows).
    "AND NOT (backend_type = 'autovacuum worker' AND query LIKE 'autovacuum: VACUUM %%' AND query NOT LIKE '%%ANALYZE%%') "
    f"AND (({_OLDER.format(x='backend_xmin')}) IS TRUE OR ({_OLDER.format(x='backend_xid')}) IS TRUE) "
    "ORDER BY xact_start, pid"
)
_STANDBYS = (
    "SELECT pid, application_name, coalesce(host(client_addr), 'the local socket') FROM pg_stat_replication "
    f"WHERE ({_OLDER.format(x='backend_xmin')}) IS TRUE ORDER BY pid"
)
_SLOTS = (
    "SELECT slot_name, slot_type, active FROM pg_replication_slots "
    f"WHERE ({_OLDER.format(x='xmin')}) IS TRUE OR (%(catalog)s AND ({_OLDER.format(x='catalog_xmin')}) IS TRUE) "
    "ORDER BY slot_name"
)
_PREPARED = (
    "SELECT gid, owner, to_char(prepared, 'YYYY-MM-DD HH24:MI:SS TZ') FROM pg_prepared_xacts "
    f"WHERE {_OLDER.format(x='transaction')} ORDER BY prepared"
)


@dataclass(frozen=True)
class Horizon:
    """How long :func:`wait_for_horizon` waited, and who still held the horizon when it stopped (sentences)."""

    waited_s: float
    holders: tuple[str, ...]
    #: The replication slots among the holders (a local standby is nudged by its slot's name).
    slots: tuple[str, ...] = ()


def next_xid(conn: psycopg.Connection[Any]) -> int:
    """The next transaction id the server will assign: every transaction before it has started already."""
    row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
    return int(row[0]) if row else 0


def holders(conn: psycopg.Connection[Any], before: int, *, catalog: bool = False) -> Horizon:
    """Everything that keeps alive a row deleted by a transaction older than ``before`` (an xid8), as sentences.

    ``catalog``: the rows are the catalog's (``pg_statistic``), which a logical slot's catalog_xmin holds too.
    Sessions of other roles are seen only by a superuser or a member of ``pg_read_all_stats``.
    """
    params = {"before": before, "catalog": catalog}
    said: list[str] = []
    for pid, user, app, state, kind, since, query in conn.execute(_BACKENDS, params).fetchall():
        who = f"application {app!r}, " if app else ""
        said.append(
            f"session pid {pid} ({kind}, user {user!r}, {who}{state or 'no state'}, transaction open since "
            f"{since}{f': {query}' if query else ''}): its snapshot is older than the purge"
        )
    for pid, app, addr in conn.execute(_STANDBYS, params).fetchall():
        said.append(
            f"standby {app or '?'!r} (walsender pid {pid}, from {addr}): a query there, or its feedback, is older"
        )
    slots = []
    for name, kind, active in conn.execute(_SLOTS, params).fetchall():
        slots.append(str(name))
        said.append(
            f"replication slot {name!r} ({kind}, {'active' if active else 'inactive'}): its standby's oldest query "
            "or replay position is older than the purge"
            + (
                ""
                if active
                else "; an inactive slot keeps it until it is dropped (`SELECT pg_drop_replication_slot(…)`)"
            )
        )
    for gid, owner, since in conn.execute(_PREPARED, params).fetchall():
        said.append(
            f"prepared transaction {gid!r} (owner {owner!r}, prepared {since}): COMMIT PREPARED or ROLLBACK PREPARED "
            "ends it"
        )
    return Horizon(0.0, tuple(said), tuple(slots))


def wait_for_horizon(
    conn: psycopg.Connection[Any],
    before: int,
    *,
    timeout: float,
    catalog: bool = False,
    nudges: Mapping[str, Callable[[], None]] | None = None,
) -> Horizon:
    """Wait up to ``timeout`` seconds until nothing holds a row deleted before ``before`` (see :func:`holders`).

    ``nudges``: by replication slot name, how to make that slot's standby report its position now
    (:func:`local_standby_nudges`).  Returns at once when nothing holds them; else who still did.
    """
    t0 = time.monotonic()
    deadline = t0 + timeout
    nudged = 0.0
    while True:
        now = holders(conn, before, catalog=catalog)
        if not now.holders or time.monotonic() >= deadline:
            return Horizon(round(time.monotonic() - t0, 3), now.holders, now.slots)
        if nudges and time.monotonic() - nudged >= _NUDGE_S:
            for slot in now.slots:
                if slot in nudges:
                    nudges[slot]()
            nudged = time.monotonic()
        time.sleep(_POLL_S)


def local_standby_nudges(home: Path) -> dict[str, Callable[[], None]]:
    """For each local standby of ``home`` (``ranklock replica create``), by its slot: reload its configuration.

    A standby's walreceiver sends its feedback (the xmin that holds its slot) at once when its
    configuration is reloaded, instead of at its next ``wal_receiver_status_interval``; a reload
    changes nothing else.  SIGHUP to its postmaster, which this user may signal (it started it).
    """
    from .standby import LocalReplica, load_registry

    out: dict[str, Callable[[], None]] = {}
    for name in sorted(load_registry(home)):
        replica = LocalReplica(home, name)
        out[replica.slot] = _reloader(replica.datadir)
    return out


def _reloader(datadir: Path) -> Callable[[], None]:
    def reload() -> None:
        from .server import postmaster_pid

        pid = postmaster_pid(datadir)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGHUP)

    return reload
