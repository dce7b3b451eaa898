"""Query-log retention: by age and by size, enforced in bounded batches.

Every logged search costs a few kilobytes (the request, each branch's
candidates, the final order), so an unbounded log fills a disk.  The policy
(``Settings.log_retention``, ``Settings.log_max_bytes``) keeps the entries
younger than the age limit and, of those, the newest ones that fit in the
size limit.  Entries always go oldest id first, so one number, the
watermark ``pruned_through``, says which ids retention removed: a replay of
such an id is told it was pruned, not that it never existed.

It is enforced three ways, none of which scans the log per search:

* after every ``Settings.log_prune_every``-th logged search (the query id is a
  multiple of it), one batch of at most ``2 * log_prune_every`` entries, so the
  log shrinks faster than it grows;
* when ``ranklock serve`` starts, in the background, until the policy holds;
* ``ranklock log prune`` (with optional stricter limits), until the policy holds.

Finding the cut reads the index from the newest entry back only as far as
the size limit reaches, and from the oldest forward only as far as the age
limit reaches.  Deleted rows leave space PostgreSQL reuses (autovacuum) for
new entries, so the table stops growing at about the size limit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..store import locks

if TYPE_CHECKING:
    from ..settings import Settings
    from ..store.database import Database

__all__ = ["AGE_CUT_SQL", "SIZE_CUT_SQL", "RetentionPolicy", "log_status", "prune", "prune_all", "pruned_through"]

log = logging.getLogger("ranklock.querylog")


# The oldest entry young enough to keep: an index scan from the oldest id that
# stops at the first young entry (it reads only what the age limit removes).
AGE_CUT_SQL = (
    "SELECT id FROM ranklock.query_log WHERE logged_at >= now() - make_interval(secs => %s) ORDER BY id LIMIT 1"
)
# The newest entry that no longer fits in the size limit: a backward index scan
# whose running sum streams into LIMIT 1 (it reads only what the limit keeps, plus one).
SIZE_CUT_SQL = (
    "SELECT id FROM (SELECT q.id, sum(coalesce(q.bytes, pg_column_size(q.*))) "
    "OVER (ORDER BY q.id DESC) AS newer FROM ranklock.query_log q ORDER BY q.id DESC) s "
    "WHERE s.newer > %s LIMIT 1"
)


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep entries younger than ``max_age_s`` (0: any age) and at most ``max_bytes`` of them (0: any size)."""

    max_age_s: float
    max_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionPolicy:
        return cls(max_age_s=settings.log_retention, max_bytes=settings.log_max_bytes)

    def describe(self) -> str:
        age = "any age" if not self.max_age_s else f"{_human_age(self.max_age_s)}"
        size = "any size" if not self.max_bytes else f"{_human_bytes(self.max_bytes)}"
        return f"{age}, {size}"

    def as_dict(self) -> dict[str, Any]:
        return {"max_age_s": self.max_age_s, "max_bytes": self.max_bytes, "describe": self.describe()}


def _human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _human_bytes(n: int) -> str:
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n}B"


def prune(db: Database, policy: RetentionPolicy, *, batch: int) -> dict[str, Any]:
    """Delete at most ``batch`` of the oldest entries the policy no longer keeps.

    Returns ``{"deleted", "bytes", "pruned_through", "skipped"}``; ``skipped`` is
    true when another process was pruning (it holds the advisory lock).
    """
    if batch < 1:
        raise ConfigError(f"prune batch must be at least 1, got {batch}.")
    with db.connection() as conn, conn.transaction():
        row = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", [locks.LOG_PRUNE]).fetchone()
        if row is None or not row[0]:
            return {"deleted": 0, "bytes": 0, "pruned_through": None, "skipped": True}
        cutoff = 0
        if policy.max_age_s > 0:
            # The oldest entry young enough to keep; ids grow with time, so every
            # lower id is older (a concurrent insert can lag by a moment).
            young = conn.execute(AGE_CUT_SQL, [policy.max_age_s]).fetchone()
            if young is not None:
                cutoff = int(young[0]) - 1
            else:
                newest = conn.execute("SELECT max(id) FROM ranklock.query_log").fetchone()
                cutoff = int(newest[0]) if newest is not None and newest[0] is not None else 0
        if policy.max_bytes > 0:
            # Walk back from the newest entry, adding sizes, and stop at the
            # first one that no longer fits: it and everything older go.
            over = conn.execute(SIZE_CUT_SQL, [policy.max_bytes]).fetchone()
            if over is not None:
                cutoff = max(cutoff, int(over[0]))
        if cutoff <= 0:
            return {"deleted": 0, "bytes": 0, "pruned_through": None, "skipped": False}
        gone = conn.execute(
            "WITH d AS (DELETE FROM ranklock.query_log WHERE id IN (SELECT id FROM ranklock.query_log "
            "WHERE id <= %s ORDER BY id LIMIT %s) RETURNING id, coalesce(bytes, 0) AS bytes) "
            "SELECT count(*), coalesce(sum(bytes), 0), max(id) FROM d",
            [cutoff, batch],
        ).fetchone()
        assert gone is not None  # an aggregate always returns one row
        deleted, nbytes, through = int(gone[0]), int(gone[1]), gone[2]
        if deleted:
            conn.execute(
                "UPDATE ranklock.query_log_retention SET pruned_through = greatest(pruned_through, %s), "
                "pruned_rows = pruned_rows + %s, pruned_bytes = pruned_bytes + %s, last_pruned_at = now()",
                [through, deleted, nbytes],
            )
    return {"deleted": deleted, "bytes": nbytes, "pruned_through": through, "skipped": False}


def prune_all(db: Database, policy: RetentionPolicy, *, batch: int = 10_000) -> dict[str, Any]:
    """Prune in batches (one transaction each) until the policy holds; the totals."""
    total: dict[str, Any] = {"deleted": 0, "deleted_bytes": 0, "batches": 0}
    while True:
        step = prune(db, policy, batch=batch)
        if step["skipped"]:
            total["skipped"] = True
            break
        if not step["deleted"]:
            break
        total["deleted"] += step["deleted"]
        total["deleted_bytes"] += step["bytes"]
        total["batches"] += 1
    total.setdefault("skipped", False)
    total.update(log_status(db, policy))
    return total


def log_status(db: Database, policy: RetentionPolicy) -> dict[str, Any]:
    """Rows, bytes, oldest and newest entry, the retention watermark and the policy."""
    row = db.fetchone(
        "SELECT count(*) AS rows, coalesce(sum(coalesce(q.bytes, pg_column_size(q.*))), 0) AS bytes, "
        "min(q.logged_at) AS oldest, max(q.logged_at) AS newest, min(q.id) AS first_id, max(q.id) AS last_id, "
        "pg_total_relation_size('ranklock.query_log') AS table_bytes FROM ranklock.query_log q"
    )
    wm = db.fetchone(
        "SELECT pruned_through, pruned_rows, pruned_bytes, last_pruned_at FROM ranklock.query_log_retention"
    )
    assert row is not None and wm is not None  # an aggregate; the one-row table of migration 0005
    return {
        "rows": int(row["rows"]),
        "bytes": int(row["bytes"]),
        "table_bytes": int(row["table_bytes"]),
        "oldest": row["oldest"].isoformat() if row["oldest"] else None,
        "newest": row["newest"].isoformat() if row["newest"] else None,
        "first_id": row["first_id"],
        "last_id": row["last_id"],
        "pruned_through": int(wm["pruned_through"]),
        "pruned_rows": int(wm["pruned_rows"]),
        "pruned_bytes": int(wm["pruned_bytes"]),
        "last_pruned_at": wm["last_pruned_at"].isoformat() if wm["last_pruned_at"] else None,
        "policy": policy.as_dict(),
    }


def pruned_through(db: Database) -> int:
    """Every query id at or below this was deleted by retention."""
    row = db.fetchone("SELECT pruned_through FROM ranklock.query_log_retention")
    return int(row["pruned_through"]) if row is not None else 0
