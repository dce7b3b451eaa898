"""Snapshot retention: which snapshots of a collection stay, and dropping the others after each write.

Every write makes a snapshot (a merge one more), and a snapshot keeps its segments, so without a
policy 100 writes keep 121 snapshots and every version they ever held.  A collection's policy
(``ranklock snapshot retention NAME --keep 10 --keep-for 7d``; default: the newest
:data:`~ranklock.settings.SNAPSHOT_KEEP`) keeps a ready snapshot when it is one of the newest ``keep``
ready ones, or younger than ``keep_for``.  Whatever the policy, these always stay, each with its reason:

* the active snapshot, and the previous one (what ``snapshot rollback`` returns to);
* one still building;
* one a pinned log entry ran against (``ranklock log pin``: its replay must keep working);
* one a streaming replica's catalog still names active or previous (it has not replayed the
  switch yet, and a client reading it directly still searches it).

The policy runs after every ingest, delete and merge (the Engine calls :func:`apply_retention`), and
on demand (``ranklock snapshot prune NAME``, ``--dry-run`` to see first).  A snapshot it drops goes
as ``snapshot drop`` would drop it (ranklock.snapshot.lifecycle.drop_snapshots); a query that ran
against it can no longer be replayed, and says so.

    >>> plan_retention(db, coll, {}).dropped   # doctest: +SKIP
    (3, 4)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from ..collection import CollectionInfo, read_collection
from ..errors import ConfigError
from ..settings import SNAPSHOT_KEEP, human_duration
from ..store.database import Database
from . import lifecycle
from .writer import writing

__all__ = ["RetentionPlan", "SnapshotRetention", "apply_retention", "plan_retention", "read_retention", "set_retention"]


@dataclass(frozen=True)
class SnapshotRetention:
    """Keep the newest ``keep`` ready snapshots (None: no count rule) and those younger than ``keep_for_s``
    (None: no age rule); with neither rule every snapshot stays (retention off)."""

    keep: int | None = SNAPSHOT_KEEP
    keep_for_s: float | None = None

    def __post_init__(self) -> None:
        if self.keep is not None and (isinstance(self.keep, bool) or self.keep < 1):
            raise ConfigError(
                f"snapshot retention --keep {self.keep!r} must be at least 1 (the active snapshot is one); "
                "or pass --keep-for DURATION alone, or --off to keep every snapshot."
            )
        if self.keep_for_s is not None and self.keep_for_s <= 0:
            raise ConfigError(
                f"snapshot retention --keep-for {self.keep_for_s!r} s must be more than 0; e.g. --keep-for 7d."
            )

    @property
    def off(self) -> bool:
        return self.keep is None and self.keep_for_s is None

    def describe(self) -> str:
        if self.off:
            return "every snapshot (retention off)"
        rules = []
        if self.keep is not None:
            rules.append(f"the newest {self.keep}")
        if self.keep_for_s is not None:
            rules.append(f"those younger than {human_duration(self.keep_for_s)}")
        return " and ".join(rules) + ", with the active, previous, pinned and replica-held ones"

    def as_dict(self) -> dict[str, Any]:
        return {"keep": self.keep, "keep_for_s": self.keep_for_s, "describe": self.describe()}


@dataclass(frozen=True)
class RetentionPlan:
    """What the policy keeps (snapshot id -> why) and drops, for one collection at one moment."""

    collection: str
    policy: SnapshotRetention
    kept: Mapping[int, str]
    dropped: tuple[int, ...]
    #: False for a dry run (``snapshot prune --dry-run``): ``dropped`` is what would go.
    applied: bool = False

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["policy"] = self.policy.as_dict()
        out["kept"] = {str(k): v for k, v in self.kept.items()}
        out["dropped"] = list(self.dropped)
        return out


def read_retention(coll: CollectionInfo) -> SnapshotRetention:
    """The collection's policy: as set with :func:`set_retention`, else the default."""
    raw = coll.retention
    if raw is None:
        return SnapshotRetention()
    return SnapshotRetention(keep=raw.get("keep"), keep_for_s=raw.get("keep_for_s"))


def set_retention(db: Database, coll: CollectionInfo, policy: SnapshotRetention) -> None:
    """Record ``policy`` as the collection's (it applies from the next write, or ``snapshot prune``)."""
    db.execute(
        "UPDATE ranklock.collections SET retention = %s WHERE id = %s",
        [Jsonb({"keep": policy.keep, "keep_for_s": policy.keep_for_s}), coll.id],
    )


def plan_retention(db: Database, coll: CollectionInfo, replicas: Mapping[int, str]) -> RetentionPlan:
    """Which snapshots the policy keeps (and why) and which it drops; ``replicas``: snapshot id -> the replica
    whose catalog still names it (:meth:`ranklock.store.replicas.ReadRouter.snapshots_in_use`)."""
    policy = read_retention(coll)
    rows = db.fetchall(
        "SELECT s.id, s.status, s.created_at, "
        "(SELECT min(q.id) FROM ranklock.query_log q WHERE q.pinned AND q.snapshot_id = s.id) AS pinned_query, "
        "(SELECT min(a.answer_id) FROM ranklock.answer_log a WHERE a.pinned AND a.snapshot_id = s.id) AS pinned_answer "
        "FROM ranklock.snapshots s WHERE s.collection_id = %s ORDER BY s.id DESC",
        [coll.id],
    )
    now = datetime.now(UTC)
    kept: dict[int, str] = {}
    dropped: list[int] = []
    ready = 0
    for r in rows:
        sid = int(r["id"])
        ready += r["status"] == "ready"
        why = _protected(sid, r, coll, replicas)
        if why is None and r["status"] == "ready":
            if policy.off:
                why = "retention off"
            elif policy.keep is not None and ready <= policy.keep:
                why = f"one of the newest {policy.keep}"
            elif policy.keep_for_s is not None and (now - r["created_at"]).total_seconds() < policy.keep_for_s:
                why = f"younger than {human_duration(policy.keep_for_s)}"
        if why is None:
            dropped.append(sid)
        else:
            kept[sid] = why
    return RetentionPlan(coll.name, policy, dict(sorted(kept.items())), tuple(sorted(dropped)))


def _protected(sid: int, row: Mapping[str, Any], coll: CollectionInfo, replicas: Mapping[int, str]) -> str | None:
    """Why snapshot ``sid`` stays whatever the policy, or None."""
    if sid == coll.active_snapshot_id:
        return "active"
    if sid == coll.previous_snapshot_id:
        return "previous (snapshot rollback returns to it)"
    if row["status"] == "building":
        return "building"
    if row["pinned_query"] is not None:
        return f"pinned by query {row['pinned_query']}"
    if row["pinned_answer"] is not None:
        return f"pinned by answer {row['pinned_answer']}"
    if sid in replicas:
        return f"still named by {replicas[sid]}"
    return None


def apply_retention(
    db: Database, coll: CollectionInfo, replicas: Mapping[int, str], *, lock_wait: float, dry_run: bool = False
) -> RetentionPlan:
    """Drop what :func:`plan_retention` drops (nothing for a ``dry_run``), in one transaction.

    Planned under the collection's writer lock, so no activation moves the pointers between the plan
    and the drop.
    """
    with writing(db, coll.id, coll.name, lock_wait):
        plan = plan_retention(db, read_collection(db, coll.name), replicas)
        if dry_run or not plan.dropped:
            return plan
        lifecycle.drop_snapshots(db, coll, plan.dropped, lock_wait)
    return RetentionPlan(plan.collection, plan.policy, plan.kept, plan.dropped, applied=True)
