"""Retention of the query log and the answer log: one policy (age and bytes), enforced on a schedule.

Every logged search costs a few kilobytes (the request, each branch's
candidates, the final order), a deep one hundreds; every answer its chunks and
its text.  An unbounded log fills a disk.  One policy
(``Settings.log_retention``, ``Settings.log_max_bytes``) applies to each log:
it keeps the entries younger than the age limit and, of those, the newest
ones that fit in the size limit.  Entries always go oldest id first, so one
number per log, the watermark ``pruned_through``, says which ids retention
removed: a replay of such an id is told it was pruned, not that it never
existed.

The schedule (:class:`Schedule`, one per database handle and process) runs a
prune of a log, in the request that logged the entry,

* at the first entry this process logs (a one-shot ``ranklock search`` prunes too),
* when this process has logged :data:`SLACK` (5 %) of ``log_max_bytes`` since
  its last prune: the entry sizes come back from the INSERT, so a burst of deep
  searches triggers it as soon as their bytes do, not after a count of them,
* when ``log_retention`` / 20 has passed since its last prune (5 % of the age limit),

so a log stays within 5 % of its limits plus what other processes logged
since their own last prune (each adds at most its 5 %): within 10 % for a
server and its command-line users.  ``ranklock serve`` also prunes at start
and on a timer (:func:`prune_interval`), so an idle server's entries age out
too; ``ranklock log prune`` prunes both logs at once.

Finding the cut reads the index from the newest entry back only as far as
the size limit reaches, and from the oldest forward only as far as the age
limit reaches.  Deleted rows leave space PostgreSQL reuses (autovacuum) for
new entries, so a table stops growing at about its size limit.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from ..errors import ConfigError, RanklockError
from ..settings import human_duration
from . import locks

if TYPE_CHECKING:
    from ..settings import Settings
    from .database import Database

__all__ = [
    "ANSWER_LOG",
    "LOGS",
    "QUERY_LOG",
    "SLACK",
    "LogPrune",
    "LogStatus",
    "LogTable",
    "PruneReport",
    "RetentionPolicy",
    "Schedule",
    "after_logging",
    "age_cut_sql",
    "log_status",
    "logs_status",
    "pin_entry",
    "prune",
    "prune_all",
    "prune_interval",
    "pruned_through",
    "schedule_for",
    "size_cut_sql",
]

log = logging.getLogger("ranklock.querylog")

#: The share of a limit a process may log past it before it prunes (see the module docstring).
SLACK = 0.05


@dataclass(frozen=True)
class LogTable:
    """One log under retention: its table, its time column, its watermark table, its advisory-lock key."""

    name: str
    table: str
    time_column: str
    watermark: str
    lock: int


QUERY_LOG = LogTable("query_log", "query_log", "logged_at", "query_log_retention", locks.LOG_PRUNE)
ANSWER_LOG = LogTable("answer_log", "answer_log", "created_at", "answer_log_retention", locks.ANSWER_LOG_PRUNE)
#: Both logs, in the order `db status` and `log prune` report them.
LOGS = (QUERY_LOG, ANSWER_LOG)


def _t(log_: LogTable, name: str | None = None) -> sql.Identifier:
    return sql.Identifier("ranklock", name or log_.table)


def age_cut_sql(log_: LogTable) -> sql.Composed:
    """The oldest entry young enough to keep: an index scan from the oldest id that stops at the first young one."""
    return sql.SQL("SELECT id FROM {t} WHERE {c} >= now() - make_interval(secs => %s) ORDER BY id LIMIT 1").format(
        t=_t(log_), c=sql.Identifier(log_.time_column)
    )


def size_cut_sql(log_: LogTable) -> sql.Composed:
    """The newest entry that no longer fits: a backward index scan whose running sum streams into LIMIT 1."""
    return sql.SQL(
        "SELECT id FROM (SELECT q.id, sum(coalesce(q.bytes, pg_column_size(q.*))) "
        "OVER (ORDER BY q.id DESC) AS newer FROM {t} q ORDER BY q.id DESC) s WHERE s.newer > %s LIMIT 1"
    ).format(t=_t(log_))


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep entries younger than ``max_age_s`` (0: any age) and at most ``max_bytes`` of them (0: any size).

    ``everything``: keep none (``ranklock log prune --older-than 0s``), where a 0 in the settings means
    no limit.  Pinned entries (``ranklock log pin``) stay whatever the policy.
    """

    max_age_s: float
    max_bytes: int
    everything: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionPolicy:
        return cls(max_age_s=settings.log_retention, max_bytes=settings.log_max_bytes)

    def describe(self) -> str:
        if self.everything:
            return "no entry but the pinned ones"
        age = "any age" if not self.max_age_s else human_duration(self.max_age_s)
        size = "any size" if not self.max_bytes else f"{_human_bytes(self.max_bytes)}"
        return f"{age}, {size}"

    def as_dict(self) -> dict[str, Any]:
        return {"max_age_s": self.max_age_s, "max_bytes": self.max_bytes, "describe": self.describe()}


def _human_bytes(n: int) -> str:
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n}B"


def prune(db: Database, policy: RetentionPolicy, *, batch: int, log_: LogTable = QUERY_LOG) -> dict[str, Any]:
    """Delete at most ``batch`` of the oldest entries of ``log_`` the policy no longer keeps.

    Returns ``{"deleted", "bytes", "pruned_through", "skipped"}``; ``skipped`` is
    true when another process was pruning that log (it holds the advisory lock).
    """
    if batch < 1:
        raise ConfigError(f"prune batch must be at least 1, got {batch}.")
    with db.connection() as conn, conn.transaction():
        row = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", [log_.lock]).fetchone()
        if row is None or not row[0]:
            return {"deleted": 0, "bytes": 0, "pruned_through": None, "skipped": True}
        cutoff = 0
        if policy.everything:
            newest = conn.execute(sql.SQL("SELECT max(id) FROM {}").format(_t(log_))).fetchone()
            cutoff = int(newest[0]) if newest is not None and newest[0] is not None else 0
        elif policy.max_age_s > 0:
            # The oldest entry young enough to keep; ids grow with time, so every
            # lower id is older (a concurrent insert can lag by a moment).
            young = conn.execute(age_cut_sql(log_), [policy.max_age_s]).fetchone()
            if young is not None:
                cutoff = int(young[0]) - 1
            else:
                newest = conn.execute(sql.SQL("SELECT max(id) FROM {}").format(_t(log_))).fetchone()
                cutoff = int(newest[0]) if newest is not None and newest[0] is not None else 0
        if policy.max_bytes > 0:
            # Walk back from the newest entry, adding sizes, and stop at the
            # first one that no longer fits: it and everything older go.
            over = conn.execute(size_cut_sql(log_), [policy.max_bytes]).fetchone()
            if over is not None:
                cutoff = max(cutoff, int(over[0]))
        if cutoff <= 0:
            return {"deleted": 0, "bytes": 0, "pruned_through": None, "skipped": False}
        gone = conn.execute(
            sql.SQL(
                "WITH d AS (DELETE FROM {t} WHERE id IN (SELECT id FROM {t} WHERE id <= %s AND NOT pinned "
                "ORDER BY id LIMIT %s) "
                "RETURNING id, coalesce(bytes, 0) AS bytes) SELECT count(*), coalesce(sum(bytes), 0), max(id) FROM d"
            ).format(t=_t(log_)),
            [cutoff, batch],
        ).fetchone()
        if gone is None:  # an aggregate always returns one row
            raise RuntimeError("the DELETE's aggregate returned no row")
        deleted, nbytes, through = int(gone[0]), int(gone[1]), gone[2]
        if deleted:
            conn.execute(
                sql.SQL(
                    "UPDATE {w} SET pruned_through = greatest(pruned_through, %s), pruned_rows = pruned_rows + %s, "
                    "pruned_bytes = pruned_bytes + %s, last_pruned_at = now()"
                ).format(w=_t(log_, log_.watermark)),
                [through, deleted, nbytes],
            )
    return {"deleted": deleted, "bytes": nbytes, "pruned_through": through, "skipped": False}


@dataclass(frozen=True)
class LogStatus:
    """One log: rows, bytes, oldest and newest entry, the retention watermark and the policy (``db status``)."""

    rows: int
    #: The entries' own sizes summed (what the size limit counts); ``table_bytes``: the table on disk.
    bytes: int
    table_bytes: int
    #: ISO 8601 times; None for an empty log.
    oldest: str | None
    newest: str | None
    first_id: int | None
    last_id: int | None
    #: Every id up to this one was deleted by retention, ``pruned_rows`` entries of ``pruned_bytes`` in all.
    pruned_through: int
    pruned_rows: int
    pruned_bytes: int
    last_pruned_at: str | None
    #: ``{max_age_s, max_bytes, describe}``.
    policy: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class LogPrune:
    """What one pruning run deleted from one log, in ``batches`` transactions, and the log's status after it."""

    deleted: int
    deleted_bytes: int
    batches: int
    #: Another process held the log's pruning lock: run again.
    skipped: bool
    status: LogStatus

    def as_dict(self) -> dict[str, Any]:
        return {
            "deleted": self.deleted,
            "deleted_bytes": self.deleted_bytes,
            "batches": self.batches,
            "skipped": self.skipped,
            **self.status.as_dict(),
        }


@dataclass(frozen=True)
class PruneReport:
    """:class:`LogPrune` of each log, by name (``query_log``, ``answer_log``)."""

    logs: Mapping[str, LogPrune]

    def as_dict(self) -> dict[str, Any]:
        """The query log's totals and status at the top level (as before the answer log had retention), each log's under ``logs``."""
        return {**self.logs[QUERY_LOG.name].as_dict(), "logs": {n: p.as_dict() for n, p in self.logs.items()}}


def _prune_log(db: Database, policy: RetentionPolicy, log_: LogTable, batch: int) -> tuple[int, int, int, bool]:
    """Deleted entries, their bytes, batches, and whether another process was pruning (no status: the schedule
    runs this after writes, and a status counts the whole log)."""
    deleted = deleted_bytes = batches = 0
    skipped = False
    while True:
        step = prune(db, policy, batch=batch, log_=log_)
        if step["skipped"]:
            skipped = True
            break
        if not step["deleted"]:
            break
        deleted += step["deleted"]
        deleted_bytes += step["bytes"]
        batches += 1
    return deleted, deleted_bytes, batches, skipped


def prune_all(db: Database, policy: RetentionPolicy, *, batch: int = 10_000) -> PruneReport:
    """Prune both logs in batches (one transaction each) until the policy holds; each log's status after."""
    return PruneReport(
        {log_.name: LogPrune(*_prune_log(db, policy, log_, batch), log_status(db, policy, log_)) for log_ in LOGS}
    )


def log_status(db: Database, policy: RetentionPolicy, log_: LogTable = QUERY_LOG) -> LogStatus:
    """Rows, bytes, oldest and newest entry, the retention watermark and the policy of one log."""
    row = db.fetchone(
        sql.SQL(
            "SELECT count(*) AS rows, coalesce(sum(coalesce(q.bytes, pg_column_size(q.*))), 0) AS bytes, "
            "min(q.{c}) AS oldest, max(q.{c}) AS newest, min(q.id) AS first_id, max(q.id) AS last_id, "
            "pg_total_relation_size({name}::regclass) AS table_bytes FROM {t} q"
        ).format(c=sql.Identifier(log_.time_column), name=sql.Literal(f"ranklock.{log_.table}"), t=_t(log_))
    )
    wm = db.fetchone(
        sql.SQL("SELECT pruned_through, pruned_rows, pruned_bytes, last_pruned_at FROM {}").format(
            _t(log_, log_.watermark)
        )
    )
    if row is None or wm is None:  # an aggregate; the one-row tables of migrations 0005 and 0011
        raise RuntimeError(f"the {log_.name} retention row is missing")
    return LogStatus(
        rows=int(row["rows"]),
        bytes=int(row["bytes"]),
        table_bytes=int(row["table_bytes"]),
        oldest=row["oldest"].isoformat() if row["oldest"] else None,
        newest=row["newest"].isoformat() if row["newest"] else None,
        first_id=row["first_id"],
        last_id=row["last_id"],
        pruned_through=int(wm["pruned_through"]),
        pruned_rows=int(wm["pruned_rows"]),
        pruned_bytes=int(wm["pruned_bytes"]),
        last_pruned_at=wm["last_pruned_at"].isoformat() if wm["last_pruned_at"] else None,
        policy=policy.as_dict(),
    )


def logs_status(db: Database, policy: RetentionPolicy) -> dict[str, LogStatus]:
    """:func:`log_status` of each log, by name (``db status``)."""
    return {log_.name: log_status(db, policy, log_) for log_ in LOGS}


def pin_entry(db: Database, *, query_id: int | None = None, answer_id: str | None = None, pinned: bool = True) -> int:
    """Pin (or unpin) one query-log or answer-log entry; the id of the snapshot it ran against.

    A pinned entry is kept by retention here and its snapshot by snapshot retention
    (ranklock.snapshot.retention); NotFound when the entry is not in the log.
    """
    from ..errors import InputError, NotFound

    if (query_id is None) == (answer_id is None):
        raise InputError("name one log entry to pin: a query id, or --answer ANSWER_ID; not both, not neither.")
    if query_id is not None:
        what, row = (
            f"query {query_id}",
            db.fetchone(
                "UPDATE ranklock.query_log SET pinned = %s WHERE id = %s RETURNING snapshot_id", [pinned, query_id]
            ),
        )
    else:
        # An answer id names one answer; the same answer asked twice is logged twice, each entry pinned.
        what, row = (
            f"answer {answer_id}",
            db.fetchone(
                "WITH u AS (UPDATE ranklock.answer_log SET pinned = %s WHERE answer_id = %s RETURNING id, snapshot_id) "
                "SELECT snapshot_id FROM u ORDER BY id DESC LIMIT 1",
                [pinned, answer_id],
            ),
        )
    if row is None or row["snapshot_id"] is None:
        raise NotFound(
            f"{what} is not in the log (pruned by retention, removed by a purge or a drop, or never logged); only a "
            "logged entry can be pinned. `ranklock db status` shows what the logs hold."
        )
    return int(row["snapshot_id"])


def pruned_through(db: Database, log_: LogTable = QUERY_LOG) -> int:
    """Every id of ``log_`` at or below this was deleted by retention."""
    row = db.fetchone(sql.SQL("SELECT pruned_through FROM {}").format(_t(log_, log_.watermark)))
    return int(row["pruned_through"]) if row is not None else 0


def prune_interval(policy: RetentionPolicy) -> float:
    """Seconds between the timed prunes of a server: 5 % of the age limit, from 10 s to an hour."""
    if not policy.max_age_s:
        return 3600.0
    return min(3600.0, max(10.0, policy.max_age_s * SLACK))


class Schedule:
    """When this process prunes a log: at its first entry, after SLACK of the size limit, after SLACK of the age.

    Thread-safe; one per database handle (:func:`schedule_for`).  A search or an
    ask calls :meth:`logged` with its entry's size and, when told to, :meth:`run`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[str, int] = {}
        self._last: dict[str, float] = {}
        self._running: set[str] = set()

    def logged(self, log_: LogTable, nbytes: int, policy: RetentionPolicy) -> bool:
        """Count an entry of ``nbytes``; True when the caller should prune ``log_`` now (and no one else does)."""
        now = time.monotonic()
        with self._lock:
            since = self._since.get(log_.name, 0) + max(0, nbytes)
            self._since[log_.name] = since
            if log_.name in self._running:
                return False
            last = self._last.get(log_.name)
            due = (
                last is None
                or (policy.max_bytes > 0 and since >= policy.max_bytes * SLACK)
                or (policy.max_age_s > 0 and now - last >= policy.max_age_s * SLACK)
            )
            if due:
                self._running.add(log_.name)
            return due

    def run(self, db: Database, log_: LogTable, policy: RetentionPolicy) -> None:
        """Prune ``log_`` until the policy holds; a failure is logged, never raised (the entry stands)."""
        started = time.monotonic()
        with self._lock:
            counted = self._since.get(log_.name, 0)
        done = False
        try:
            *_, skipped = _prune_log(db, policy, log_, 10_000)
            done = not skipped
        except (psycopg.Error, RanklockError) as exc:
            log.warning("%s: retention could not prune (%s); `ranklock log prune` retries.", log_.name, exc)
        finally:
            with self._lock:
                self._running.discard(log_.name)
                if done:
                    # Entries logged while it ran may be past its cut: they count towards the next one.
                    self._since[log_.name] = max(0, self._since.get(log_.name, 0) - counted)
                    self._last[log_.name] = started


def after_logging(db: Database, log_: LogTable, policy: RetentionPolicy) -> Callable[[int], None]:
    """What to call with each new entry's size: counts it, and prunes ``log_`` when the schedule says so."""
    schedule = schedule_for(db)

    def logged(nbytes: int) -> None:
        if schedule.logged(log_, nbytes, policy):
            schedule.run(db, log_, policy)

    return logged


_SCHEDULES: weakref.WeakKeyDictionary[Any, Schedule] = weakref.WeakKeyDictionary()
_SCHEDULES_LOCK = threading.Lock()


def schedule_for(db: Database) -> Schedule:
    """The retention schedule of ``db`` in this process (created at its first use)."""
    with _SCHEDULES_LOCK:
        found = _SCHEDULES.get(db)
        if found is None:
            found = _SCHEDULES[db] = Schedule()
        return found
