"""Snapshot operations: list, show, rollback, diff, drop, manifest, gated activation.

The :class:`~ranklock.Engine` exposes each as a thin method; the CLI
(``ranklock snapshot …``) is a shell over those::

    >>> eng.list_snapshots("docs")                 # every snapshot, the active one marked
    >>> eng.rollback("docs")                       # re-activate the previous snapshot, atomically
    >>> eng.diff_snapshots("docs", 3, 4)["documents"]["changed"]
    >>> eng.drop_snapshot("docs", 3)               # never the active one

Snapshots are immutable, so everything here either reads or switches a
pointer in one transaction, except :func:`drop_snapshot`, which deletes a
snapshot that no reader is pointed at and then garbage-collects document
versions no snapshot references.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, NotFound, SnapshotError
from ..store import locks
from .build import drop_snapshot_tables
from .manifest import diff_manifests
from .writer import writing

if TYPE_CHECKING:
    from ..engine import Engine
    from ..store.database import Database

__all__ = [
    "activate_gated",
    "diff_snapshots",
    "drop_snapshot",
    "holding_versions",
    "list_snapshots",
    "manifest",
    "manifest_json",
    "rollback",
    "snapshot_info",
    "write_manifest",
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


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _row(r: dict[str, Any], active: int | None, previous: int | None) -> dict[str, Any]:
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


def list_snapshots(eng: Engine, name: str) -> list[dict[str, Any]]:
    """Every snapshot of ``name``, oldest first, with the active and previous ones marked."""
    coll = eng.collection(name)
    # A build whose builder died is discarded here too, so the list never
    # shows a dead build as 'building'.
    from .build import reap_dead_builds

    reap_dead_builds(eng.db, coll.id)
    rows = eng.db.fetchall(_SELECT + " ORDER BY id", [coll.id])
    return [_row(r, coll.active_snapshot_id, coll.previous_snapshot_id) for r in rows]


def _require(eng: Engine, name: str, sid: int | None) -> tuple[Any, int]:
    coll = eng.collection(name)
    if sid is None:
        if coll.active_snapshot_id is None:
            raise NotFound(f"collection {name!r} has no active snapshot yet; ingest documents first.")
        sid = coll.active_snapshot_id
    return coll, int(sid)


def _missing(name: str, sid: int) -> NotFound:
    return NotFound(f"collection {name!r} has no snapshot {sid}; see `ranklock snapshot list {name}`.")


def snapshot_info(eng: Engine, name: str, snapshot_id: int | None = None) -> dict[str, Any]:
    """One snapshot (default: the active one) with its manifest and build statistics."""
    coll, sid = _require(eng, name, snapshot_id)
    r = eng.db.fetchone(_SELECT + " AND id = %s", [coll.id, sid])
    if r is None:
        raise _missing(name, sid)
    full = eng.db.fetchone("SELECT manifest FROM ranklock.snapshots WHERE id = %s", [sid])
    out = _row(r, coll.active_snapshot_id, coll.previous_snapshot_id)
    out["collection"] = name
    out["stats"] = r["stats"]
    out["manifest"] = full["manifest"] if full else None
    return out


def rollback(eng: Engine, name: str) -> dict[str, Any]:
    """Re-activate the previous snapshot; the one active until now becomes the previous one.

    A single UPDATE swaps the two pointers under a row lock, so a reader
    resolves either the old or the new snapshot, never something in between,
    and a second rollback undoes the first.  It holds the collection's writer
    lock (ranklock.snapshot.writer), so it runs before or after a concurrent
    ingest, never between its reading the active snapshot and activating.
    """
    coll = eng.collection(name)  # NotFound with the list of collections
    with writing(eng.db, coll.id, name, eng.settings.lock_wait), eng.db.connection() as conn, conn.transaction():
        row = conn.execute(
            "SELECT c.id, c.active_snapshot_id, c.previous_snapshot_id, s.status FROM ranklock.collections c "
            "LEFT JOIN ranklock.snapshots s ON s.id = c.previous_snapshot_id WHERE c.name = %s FOR UPDATE OF c",
            [name],
        ).fetchone()
        if row is None:
            eng.collection(name)  # raises NotFound with the list of collections
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
    return {"collection": name, "from": active, "to": previous}


def diff_snapshots(eng: Engine, name: str, old: int, new: int) -> dict[str, Any]:
    """Documents added, removed and changed from ``old`` to ``new``, and manifest fields changed."""
    coll = eng.collection(name)
    found = {
        int(r["id"]): r
        for r in eng.db.fetchall(
            "SELECT id, manifest FROM ranklock.snapshots WHERE collection_id = %s AND id = ANY(%s)",
            [coll.id, [old, new]],
        )
    }
    for sid in (old, new):
        if sid not in found:
            raise _missing(name, sid)
    rows = eng.db.fetchall(
        "SELECT coalesce(a.doc_id, b.doc_id) AS doc_id, a.content_hash AS old_hash, b.content_hash AS new_hash "
        "FROM (SELECT doc_id, content_hash FROM ranklock.snapshot_documents WHERE snapshot_id = %s) AS a "
        "FULL OUTER JOIN (SELECT doc_id, content_hash FROM ranklock.snapshot_documents WHERE snapshot_id = %s) AS b "
        "ON a.doc_id = b.doc_id "
        "WHERE a.content_hash IS DISTINCT FROM b.content_hash "
        'ORDER BY coalesce(a.doc_id, b.doc_id) COLLATE "C"',
        [old, new],
    )
    added = [r["doc_id"] for r in rows if r["old_hash"] is None]
    removed = [r["doc_id"] for r in rows if r["new_hash"] is None]
    changed = [
        {"doc_id": r["doc_id"], "old": r["old_hash"], "new": r["new_hash"]}
        for r in rows
        if r["old_hash"] is not None and r["new_hash"] is not None
    ]
    ma, mb = found[old]["manifest"], found[new]["manifest"]
    return {
        "collection": name,
        "old": old,
        "new": new,
        "documents": {"added": added, "removed": removed, "changed": changed},
        "manifest": diff_manifests(ma, mb) if ma is not None and mb is not None else None,
    }


def drop_snapshot(eng: Engine, name: str, snapshot_id: int) -> dict[str, Any]:
    """Drop a snapshot that is not active: its chunk table, its document list, its cache entries.

    Document versions that no remaining snapshot references are then deleted,
    unless an ingest of the collection is in flight (it may be about to
    reference them); ``versions_gc`` says which happened.
    """
    coll = eng.collection(name)
    sid = int(snapshot_id)
    # Under the writer lock: never between an ingest's reading the active
    # snapshot and its activating, nor racing an activation of this snapshot.
    with writing(eng.db, coll.id, name, eng.settings.lock_wait), eng.db.connection() as conn, conn.transaction():
        cur = conn.execute(
            "SELECT active_snapshot_id, previous_snapshot_id FROM ranklock.collections WHERE id = %s FOR UPDATE",
            [coll.id],
        ).fetchone()
        assert cur is not None  # the collection was just read
        active, previous = cur
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
        # Every per-snapshot table (ranklock.store.tables) goes with the snapshot, in this transaction.
        tables = drop_snapshot_tables(conn, sid)
        n_docs = conn.execute(
            "WITH d AS (DELETE FROM ranklock.snapshot_documents WHERE snapshot_id = %s RETURNING 1) "
            "SELECT count(*) FROM d",
            [sid],
        ).fetchone()
        conn.execute("DELETE FROM ranklock.snapshots WHERE id = %s", [sid])
        # Exclusive against the shared lock every ingest holds (holding_versions):
        # never collect a version an in-flight build is about to reference.
        free = conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [locks.VERSIONS, coll.id]).fetchone()
        collected: int | None = None
        if free and free[0]:
            gc = conn.execute(
                "WITH d AS (DELETE FROM ranklock.documents AS d WHERE d.collection_id = %s AND NOT EXISTS ("
                "  SELECT 1 FROM ranklock.snapshot_documents sd JOIN ranklock.snapshots s ON s.id = sd.snapshot_id "
                "  WHERE s.collection_id = d.collection_id AND sd.doc_id = d.doc_id "
                "  AND sd.content_hash = d.content_hash) RETURNING 1) SELECT count(*) FROM d",
                [coll.id],
            ).fetchone()
            collected = int(gc[0]) if gc else 0
    return {
        "collection": name,
        "dropped": sid,
        "tables": tables,
        "snapshot_documents": int(n_docs[0]) if n_docs else 0,
        "versions_gc": "done" if collected is not None else "deferred: an ingest is in progress",
        "versions_deleted": collected or 0,
    }


def manifest(eng: Engine, name: str, snapshot_id: int | None = None) -> dict[str, Any]:
    """The manifest of a snapshot (default: the active one)."""
    coll, sid = _require(eng, name, snapshot_id)
    row = eng.db.fetchone(
        "SELECT status, manifest FROM ranklock.snapshots WHERE id = %s AND collection_id = %s", [sid, coll.id]
    )
    if row is None:
        raise _missing(name, sid)
    if row["manifest"] is None:
        raise SnapshotError(f"snapshot {sid} of {name!r} is {row['status']} and has no manifest; only a built one has.")
    out: dict[str, Any] = row["manifest"]
    return out


def manifest_json(m: dict[str, Any]) -> str:
    """The manifest as stable text for version control: sorted keys, two-space indent, final newline."""
    return json.dumps(m, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_manifest(m: dict[str, Any], path: str | Path) -> Path:
    p = Path(path)
    try:
        p.write_text(manifest_json(m), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the manifest to {p}: {exc.strerror}; check the path and permissions.") from exc
    return p


def activate_gated(
    eng: Engine, name: str, snapshot_id: int, golden: str | Path, *, rsi_threshold: float = 0.9
) -> dict[str, Any]:
    """Activate ``snapshot_id`` only if the promotion gate passes; the gate's report either way."""
    try:
        gate_mod: Any = importlib.import_module("ranklock.eval.gate")
    except ModuleNotFoundError as exc:
        if exc.name not in ("ranklock.eval.gate", "ranklock.eval"):
            raise
        raise ConfigError(
            "the promotion gate (ranklock.eval.gate) is not part of this installation; "
            "activate without --gate, or install a ranklock version that has it."
        ) from exc
    coll = eng.collection(name)
    # The gate compares against the active snapshot: hold the writer lock from
    # the comparison to the switch, so no ingest changes the active one between.
    with writing(eng.db, coll.id, name, eng.settings.lock_wait):
        report = gate_mod.promotion_gate(eng, name, snapshot_id, golden, rsi_threshold=rsi_threshold)
        passed = bool(report.passed)
        previous = eng.collection(name).active_snapshot_id
        if passed:
            previous = eng.activate(name, snapshot_id)["from"]
    return {
        "collection": name,
        "snapshot_id": snapshot_id,
        "activated": passed,
        "gate": report.to_dict(),
        "previous": previous,
    }
