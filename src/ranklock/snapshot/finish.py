"""Finishing a build: the manifest, the live totals, and the switch to ``ready``.

Called by :func:`ranklock.snapshot.build.build_snapshot` while the builder
still holds the snapshot's build lock, so a reaper never mistakes a
finishing build for a dead one.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..errors import SnapshotError
from ..store.database import Database
from .composition import Totals
from .manifest import build_manifest

__all__ = ["finish_snapshot"]


def finish_snapshot(
    db: Database,
    coll: CollectionInfo,
    emb: Embedder,
    sid: int,
    *,
    totals: Totals,
    stats: dict[str, Any],
    index_build: dict[str, Any] | None = None,
    conn: psycopg.Connection[Any] | None = None,
) -> dict[str, Any]:
    """Write the manifest and the live totals and mark the snapshot ready, if it is still building.

    ``stats`` is merged into the snapshot's build statistics.  Conditional on the status (``WHERE status = 'building'``) and checked: a
    snapshot reaped or marked failed meanwhile is never marked ready.  ``conn``: the builder's lock
    connection; the switch to ready runs on it, so a builder whose lock died with its connection
    cannot mark anything ready.
    """
    if not index_build and totals.segments:
        # A write that wrote no segment (nothing changed, a delete) serves the indexes of the
        # segments it shares: the manifest names the build of the newest, as the write that made it did.
        row = db.fetchone(
            "SELECT stats -> 'index_build' AS b FROM ranklock.segments WHERE id = %s",
            [max(int(g["id"]) for g in totals.segments)],
        )
        index_build = (row or {}).get("b") or {}
    manifest = build_manifest(coll, emb, totals=totals, index_build=index_build)
    query = (
        "UPDATE ranklock.snapshots SET status = 'ready', manifest = %s, manifest_hash = %s, doc_count = %s, "
        "chunk_count = %s, built_at = now(), stats = stats || %s WHERE id = %s AND status = 'building'"
    )
    params = [
        Jsonb(manifest),
        manifest["manifest_hash"],
        totals.documents,
        totals.chunks,
        Jsonb({**stats, **totals.stats()}),
        sid,
    ]
    with db.connection() if conn is None else nullcontext(conn) as c:
        cur = c.execute(query, params)
        if cur.rowcount != 1:
            now = c.execute("SELECT status FROM ranklock.snapshots WHERE id = %s", [sid]).fetchone()
            raise SnapshotError(
                f"snapshot {sid} of {coll.name!r} became {now[0] if now else 'deleted'} (changed by another "
                "process) while it was finishing, so it was not marked ready and nothing was activated; "
                "ingest again."
            )
    return manifest
