"""Snapshot lifecycle: resolve, activate, list, show, rollback, diff, drop, manifest.

Every function takes the database and the collection record, never the
Engine; :class:`~ranklock.Engine` exposes each as a thin method and the CLI
(``ranklock snapshot …``) is a shell over those::

    >>> lifecycle.list_snapshots(db, coll)           # every snapshot, the active one marked
    >>> lifecycle.rollback(db, coll, lock_wait=300)  # re-activate the previous snapshot, atomically
    >>> lifecycle.diff_snapshots(db, coll, 3, 4).changed
    >>> lifecycle.drop_snapshot(db, coll, 3, lock_wait=300)   # never the active one

Snapshots are immutable, so everything here either reads or switches a
pointer in one transaction, except :func:`drop_snapshot`, which deletes a
snapshot that no reader is pointed at and then garbage-collects document
versions no snapshot references.  The gated activation (evaluate, then
activate) lives in the Engine, which sits above both eval and snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from psycopg import sql

from ..collection import CollectionInfo, read_collection
from ..errors import NotFound, SnapshotError
from ..store import locks
from ..store.database import Database
from ..store.steps import Fetch, Offload, Steps, run_steps
from .build import DIED, drop_segment_tables, drop_snapshot_tables, reap_dead_builds
from .info import Activation, DropReport, LexicalStatsReport, SnapshotDetail, SnapshotDiff, SnapshotInfo
from .manifest import diff_manifests
from .purged import purges_of
from .segments import collect_segments, live_documents_sql, segments_sql
from .writer import writing

__all__ = [
    "activate",
    "check_ready_steps",
    "diff_snapshots",
    "drop_snapshot",
    "drop_snapshots",
    "holding_versions",
    "lexical_stats",
    "list_snapshots",
    "list_snapshots_steps",
    "manifest",
    "resolve",
    "resolve_steps",
    "rollback",
    "snapshot_info",
]


@contextmanager
def holding_versions(db: Database, collection_id: int) -> Iterator[None]:
    """Hold the collection's version lock (shared) for the duration of an ingest.

    An ingest holds ``locks.VERSIONS`` shared from storing versions until its
    snapshot references them; garbage collection needs it exclusively, so it
    never deletes a version an in-flight build is about to reference.
    """
    with db.connection() as conn:
        conn.execute("SELECT pg_advisory_lock_shared(%s, %s)", [locks.VERSIONS, collection_id])
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock_shared(%s, %s)", [locks.VERSIONS, collection_id])


def resolve(db: Database, coll: CollectionInfo, snapshot: int | None) -> dict[str, Any]:
    """The snapshot row a read of ``coll`` uses: ``snapshot`` or the active one, which must be ready."""
    return run_steps(db, resolve_steps(coll, snapshot))


def resolve_steps(coll: CollectionInfo, snapshot: int | None) -> Steps[dict[str, Any]]:
    """:func:`resolve` as steps (ranklock.store.steps), for the sync and the async engine."""
    sid = snapshot if snapshot is not None else coll.active_snapshot_id
    if sid is None:
        raise NotFound(f"collection {coll.name!r} has no active snapshot yet; ingest documents first.")
    rows = yield Fetch(
        sql.SQL(
            "SELECT s.id, s.status, s.manifest_hash, s.manifest, s.stats, {segments} AS segments "
            "FROM ranklock.snapshots AS s WHERE s.id = %s AND s.collection_id = %s"
        ).format(segments=segments_sql(sql.SQL("s.id"))),
        [sid, coll.id],
    )
    row: dict[str, Any] | None = rows[0] if rows else None
    if row is None:
        raise NotFound(f"collection {coll.name!r} has no snapshot {sid}; see `ranklock snapshot list {coll.name}`.")
    ready: dict[str, Any] = yield from check_ready_steps(coll, row)
    return ready


def check_ready_steps(coll: CollectionInfo, row: dict[str, Any]) -> Steps[dict[str, Any]]:
    """Snapshot ``row`` of ``coll`` if it can be searched; a :func:`not_ready` error if it is building or failed."""
    sid = int(row["id"])
    if row["status"] == "building":
        # Building, or its builder died and nobody has reaped it yet (a write does): the build lock says.
        # On a standby the primary's locks are not visible, so there it is only "building".
        live = yield Fetch(
            "SELECT pg_is_in_recovery() OR EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid = %s AND objid = %s AND objsubid = 2 AND granted) AS alive",
            [locks.BUILD, sid],
        )
        if not live[0]["alive"]:
            row = {**row, "status": "failed", "stats": {**(row["stats"] or {}), "failure": DIED}}
    if row["status"] != "ready":
        raise not_ready(coll, sid, row["status"], row["stats"], "searched")
    return row


def not_ready(coll: CollectionInfo, sid: int, status: str, stats: dict[str, Any] | None, what: str) -> SnapshotError:
    """Why snapshot ``sid`` (not ready) cannot be ``what`` (searched, diffed): still building, or never finished."""
    failure = str((stats or {}).get("failure") or "")
    active = coll.active_snapshot_id
    instead = f"use the active snapshot ({active})" if active is not None else "ingest again"
    if status == "building":
        return SnapshotError(
            f"snapshot {sid} of {coll.name!r} is still being built, so it cannot be {what} yet; wait until "
            f"`ranklock snapshot list {coll.name}` shows it ready, or {instead}."
        )
    if failure == DIED:
        return SnapshotError(
            f"snapshot {sid} of {coll.name!r} was never finished: the process building it ended (killed or "
            f"crashed) before it was ready, and its tables are discarded, so it cannot be {what}; {instead}."
        )
    return SnapshotError(
        f"snapshot {sid} of {coll.name!r} is {status}{f' ({failure})' if failure else ''}, so it cannot be "
        f"{what}; {instead}."
    )


def activate(
    db: Database, coll: CollectionInfo, snapshot_id: int, lock_wait: float, *, keep_previous: bool = False
) -> Activation:
    """Make ``snapshot_id`` the active snapshot of ``coll``, atomically; returns which was active before.

    It holds the collection's writer lock (ranklock.snapshot.writer): it
    runs before or after a concurrent ingest, never in the middle of one.
    ``keep_previous`` leaves the previous snapshot as it was: a merge holds the
    documents of the snapshot it replaces, so a rollback after it undoes the
    last write, not the merge (ranklock.snapshot.merge).
    """
    name = coll.name
    with writing(db, coll.id, name, lock_wait), db.connection() as conn, conn.transaction():
        row = conn.execute(
            "SELECT c.id, c.active_snapshot_id, s.status FROM ranklock.collections c "
            "LEFT JOIN ranklock.snapshots s ON s.id = %s AND s.collection_id = c.id "
            "WHERE c.name = %s FOR UPDATE OF c",
            [snapshot_id, name],
        ).fetchone()
        if row is None:
            raise NotFound(f"no collection named {name!r}.")
        cid, active, status = row
        if status is None:
            raise NotFound(f"collection {name!r} has no snapshot {snapshot_id}; see `ranklock snapshot list {name}`.")
        if status != "ready":
            raise SnapshotError(f"snapshot {snapshot_id} is {status}, not ready; only a built snapshot can serve.")
        if active != snapshot_id:
            previous = sql.SQL("previous_snapshot_id" if keep_previous else "active_snapshot_id")
            conn.execute(
                sql.SQL(
                    "UPDATE ranklock.collections SET previous_snapshot_id = {}, active_snapshot_id = %s WHERE id = %s"
                ).format(previous),
                [snapshot_id, cid],
            )
    return Activation(name, active, snapshot_id)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _fields(r: dict[str, Any], active: int | None, previous: int | None) -> dict[str, Any]:
    stats = r.get("stats") or {}
    return {
        "id": int(r["id"]),
        "status": r["status"],
        "active": r["id"] == active,
        "previous": r["id"] == previous,
        "parent_id": r["parent_id"],
        "documents": r["doc_count"],
        "chunks": r["chunk_count"],
        "corpus_digest": r["corpus_digest"],
        "manifest_hash": r["manifest_hash"],
        "embedded": stats.get("embedded"),
        "reused": stats.get("reused"),
        "created_at": _iso(r["created_at"]),
        "built_at": _iso(r["built_at"]),
    }


_SELECT = (
    "SELECT id, status, parent_id, doc_count, chunk_count, manifest_hash, manifest -> 'corpus' ->> 'digest' "
    "AS corpus_digest, stats, created_at, built_at FROM ranklock.snapshots WHERE collection_id = %s"
)


def list_snapshots(db: Database, coll: CollectionInfo) -> list[SnapshotInfo]:
    """Every snapshot of ``coll``, oldest first, with the active and previous ones marked."""
    # A build whose builder died is discarded here too, so the list never
    # shows a dead build as 'building'.
    return run_steps(db, list_snapshots_steps(db, coll))


def list_snapshots_steps(db: Database, coll: CollectionInfo) -> Steps[list[SnapshotInfo]]:
    """:func:`list_snapshots` as steps; the reaping (a write, rare) runs on the sync ``db``, off the event loop."""
    yield Offload(lambda: reap_dead_builds(db, coll.id))
    rows = yield Fetch(_SELECT + " ORDER BY id", [coll.id])
    return [SnapshotInfo(**_fields(r, coll.active_snapshot_id, coll.previous_snapshot_id)) for r in rows]


def _require(coll: CollectionInfo, sid: int | None) -> int:
    if sid is None:
        if coll.active_snapshot_id is None:
            raise NotFound(f"collection {coll.name!r} has no active snapshot yet; ingest documents first.")
        sid = coll.active_snapshot_id
    return int(sid)


def _missing(name: str, sid: int) -> NotFound:
    return NotFound(f"collection {name!r} has no snapshot {sid}; see `ranklock snapshot list {name}`.")


def snapshot_info(db: Database, coll: CollectionInfo, snapshot_id: int | None = None) -> SnapshotDetail:
    """One snapshot (default: the active one) with its manifest and build statistics."""
    name = coll.name
    sid = _require(coll, snapshot_id)
    r = db.fetchone(_SELECT + " AND id = %s", [coll.id, sid])
    if r is None:
        raise _missing(name, sid)
    full = db.fetchone("SELECT manifest FROM ranklock.snapshots WHERE id = %s", [sid])
    return SnapshotDetail(
        **_fields(r, coll.active_snapshot_id, coll.previous_snapshot_id),
        collection=name,
        stats=r["stats"] or {},
        manifest=full["manifest"] if full else None,
        purges=tuple(purges_of(db, sid)),
    )


def rollback(db: Database, coll: CollectionInfo, lock_wait: float) -> Activation:
    """Re-activate the previous snapshot; the one active until now becomes the previous one.

    A single UPDATE swaps the two pointers under a row lock, so a reader
    resolves either the old or the new snapshot, never something in between,
    and a second rollback undoes the first.  It holds the collection's writer
    lock (ranklock.snapshot.writer), so it runs before or after a concurrent
    ingest, never between its reading the active snapshot and activating.
    """
    name = coll.name
    with writing(db, coll.id, name, lock_wait), db.connection() as conn, conn.transaction():
        row = conn.execute(
            "SELECT c.id, c.active_snapshot_id, c.previous_snapshot_id, s.status FROM ranklock.collections c "
            "LEFT JOIN ranklock.snapshots s ON s.id = c.previous_snapshot_id WHERE c.name = %s FOR UPDATE OF c",
            [name],
        ).fetchone()
        if row is None:
            read_collection(db, name)  # raises NotFound with the list of collections
            raise NotFound(f"no collection named {name!r}.")
        cid, active, previous, status = row
        if previous is None:
            raise SnapshotError(
                f"collection {name!r} has no previous snapshot to roll back to (active: {active}); "
                f"activate a specific one with `ranklock snapshot activate {name} ID`."
            )
        if status != "ready":
            raise SnapshotError(
                f"the previous snapshot {previous} of {name!r} is {status or 'gone'}, not ready; "
                f"activate a ready one with `ranklock snapshot activate {name} ID`."
            )
        conn.execute(
            "UPDATE ranklock.collections SET active_snapshot_id = previous_snapshot_id, "
            "previous_snapshot_id = active_snapshot_id WHERE id = %s",
            [cid],
        )
    return Activation(name, active, previous)


def diff_snapshots(db: Database, coll: CollectionInfo, old: int, new: int) -> SnapshotDiff:
    """Documents added, removed and changed from ``old`` to ``new``, and manifest fields changed."""
    name = coll.name
    reap_dead_builds(db, coll.id)  # a dead build is no snapshot to diff: it is marked failed first
    found = {
        int(r["id"]): r
        for r in db.fetchall(
            "SELECT id, status, stats, manifest FROM ranklock.snapshots WHERE collection_id = %s AND id = ANY(%s)",
            [coll.id, [old, new]],
        )
    }
    for sid in (old, new):
        if sid not in found:
            raise _missing(name, sid)
        if found[sid]["status"] != "ready":
            raise not_ready(coll, sid, found[sid]["status"], found[sid]["stats"], "diffed")
    rows = db.fetchall(
        sql.SQL(
            "SELECT coalesce(a.doc_id, b.doc_id) AS doc_id, a.content_hash AS old_hash, b.content_hash AS new_hash "
            "FROM ({a}) AS a FULL OUTER JOIN ({b}) AS b ON a.doc_id = b.doc_id "
            "WHERE a.content_hash IS DISTINCT FROM b.content_hash "
            'ORDER BY coalesce(a.doc_id, b.doc_id) COLLATE "C"'
        ).format(a=live_documents_sql("old"), b=live_documents_sql("new")),
        {"old": old, "new": new, "ids": None},
    )
    ma, mb = found[old]["manifest"], found[new]["manifest"]
    return SnapshotDiff(
        name,
        old,
        new,
        added=tuple(r["doc_id"] for r in rows if r["old_hash"] is None),
        removed=tuple(r["doc_id"] for r in rows if r["new_hash"] is None),
        changed=tuple(
            {"doc_id": r["doc_id"], "old": r["old_hash"], "new": r["new_hash"]}
            for r in rows
            if r["old_hash"] is not None and r["new_hash"] is not None
        ),
        manifest=diff_manifests(ma, mb) if ma is not None and mb is not None else None,
    )


def drop_snapshot(db: Database, coll: CollectionInfo, snapshot_id: int, lock_wait: float) -> DropReport:
    """Drop a snapshot that is not active: what it references, the segments no other snapshot uses, its caches.

    A segment goes (its tables dropped) only when no remaining snapshot
    references it.  Document versions that no remaining segment holds are
    then deleted, unless an ingest of the collection is in flight (it may be
    about to reference them); ``versions_gc`` says which happened.
    """
    return drop_snapshots(db, coll, [snapshot_id], lock_wait)


def drop_snapshots(db: Database, coll: CollectionInfo, snapshot_ids: Sequence[int], lock_wait: float) -> DropReport:
    """:func:`drop_snapshot` of several snapshots in one transaction, the segments and versions collected once
    (snapshot retention drops many at a time: ranklock.snapshot.retention)."""
    name = coll.name
    ids = sorted({int(i) for i in snapshot_ids})
    # Under the writer lock: never between an ingest's reading the active
    # snapshot and its activating, nor racing an activation of this snapshot.
    with writing(db, coll.id, name, lock_wait), db.connection() as conn, conn.transaction():
        cur = conn.execute(
            "SELECT active_snapshot_id, previous_snapshot_id FROM ranklock.collections WHERE id = %s FOR UPDATE",
            [coll.id],
        ).fetchone()
        assert cur is not None  # the collection was just read
        active, previous = cur
        tables: list[str] = []
        for sid in ids:
            if active == sid:
                raise SnapshotError(
                    f"snapshot {sid} is the active snapshot of {name!r} and keeps serving; activate or roll back "
                    f"to another snapshot first, then drop it."
                )
            snap = conn.execute(
                "SELECT status FROM ranklock.snapshots WHERE id = %s AND collection_id = %s FOR UPDATE", [sid, coll.id]
            ).fetchone()
            if snap is None:
                raise _missing(name, sid)
            if snap[0] == "building":
                got = conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [locks.BUILD, sid]).fetchone()
                if not got or not got[0]:
                    raise SnapshotError(
                        f"snapshot {sid} of {name!r} is being built by a live process; wait for the build to "
                        "finish (then drop it) or stop that process."
                    )
            if previous == sid:
                conn.execute("UPDATE ranklock.collections SET previous_snapshot_id = NULL WHERE id = %s", [coll.id])
            # The snapshot's own table and its row (and with it what it references).
            tables += drop_snapshot_tables(conn, sid)
            conn.execute("DELETE FROM ranklock.snapshots WHERE id = %s", [sid])
        # Then every segment no remaining snapshot references, with its tables (ranklock.store.tables).
        segments = collect_segments(conn, coll.id)
        for g in segments:
            tables += drop_segment_tables(conn, g)
        # Exclusive against the shared lock every ingest holds (holding_versions):
        # never collect a version an in-flight build is about to reference.
        free = conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [locks.VERSIONS, coll.id]).fetchone()
        collected: int | None = None
        if free and free[0]:
            gc = conn.execute(
                "WITH d AS (DELETE FROM ranklock.documents AS d WHERE d.collection_id = %s AND NOT EXISTS ("
                "  SELECT 1 FROM ranklock.segment_documents sd JOIN ranklock.segments g ON g.id = sd.segment_id "
                "  WHERE g.collection_id = d.collection_id AND sd.doc_id = d.doc_id "
                "  AND sd.content_hash = d.content_hash) RETURNING 1) SELECT count(*) FROM d",
                [coll.id],
            ).fetchone()
            collected = int(gc[0]) if gc else 0
    return DropReport(
        name,
        ids[0] if len(ids) == 1 else None,
        tables=tuple(sorted(tables)),
        segments_dropped=tuple(segments),
        versions_gc="done" if collected is not None else "deferred: an ingest is in progress",
        versions_deleted=collected or 0,
        snapshots=tuple(ids),
    )


def lexical_stats(db: Database, coll: CollectionInfo, snapshot_id: int | None, *, force: bool) -> LexicalStatsReport:
    """Build, complete or (``force``) rebuild the BM25 tables, filter tables and value counts of a snapshot's segments.

    What a snapshot built by an older ranklock lacks is made here once (its searches work without it,
    slower: a filter without value counts counts rows).  The report names the largest segment's BM25
    entry (what the CLI prints) and every segment's.
    """
    from .filter_table import build_filter_table
    from .lexical_stats import build_lexical_stats
    from .segments import Layout
    from .value_counts import complete_counts

    snap = resolve(db, coll, snapshot_id)
    t = time.perf_counter()
    segments = Layout.of(snap).segments
    entries = {g.id: build_lexical_stats(db, g.id, force=force) for g in segments}
    for g in segments:
        build_filter_table(db, g.id)  # the lexical plans check constraints there (none before it)
    complete_counts(db, int(snap["id"]), [f.name for f in coll.fields])
    largest = max(segments, key=lambda g: g.chunks).id
    return LexicalStatsReport(coll.name, int(snap["id"]), time.perf_counter() - t, entries[largest], entries)


def manifest(db: Database, coll: CollectionInfo, snapshot_id: int | None = None) -> dict[str, Any]:
    """The manifest of a snapshot (default: the active one)."""
    name = coll.name
    sid = _require(coll, snapshot_id)
    row = db.fetchone(
        "SELECT status, manifest FROM ranklock.snapshots WHERE id = %s AND collection_id = %s", [sid, coll.id]
    )
    if row is None:
        raise _missing(name, sid)
    if row["manifest"] is None:
        raise SnapshotError(f"snapshot {sid} of {name!r} is {row['status']} and has no manifest; only a built one has.")
    out: dict[str, Any] = row["manifest"]
    return out
