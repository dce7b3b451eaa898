"""Finishing a build: the vectors digest, the manifest, and the switch to ``ready``.

Called by :func:`ranklock.snapshot.build.build_snapshot` while the builder
still holds the snapshot's build lock, so a reaper never mistakes a
finishing build for a dead one.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..errors import SnapshotError
from ..store.database import Database
from ..store.tables import snapshot_table
from .manifest import build_manifest

__all__ = ["finish_snapshot"]


def finish_snapshot(
    db: Database,
    coll: CollectionInfo,
    emb: Embedder,
    sid: int,
    *,
    documents: int,
    chunks: int,
    stats: dict[str, Any],
    index_build: dict[str, Any] | None = None,
    conn: psycopg.Connection[Any] | None = None,
) -> dict[str, Any]:
    """Write the vectors digest and the manifest and mark the snapshot ready, if it is still building.

    ``stats`` is merged into the snapshot's build statistics.  Conditional on the status (``WHERE status = 'building'``) and checked: a
    snapshot reaped or marked failed meanwhile is never marked ready.  ``conn``: the builder's lock
    connection; the switch to ready runs on it, so a builder whose lock died with its connection
    cannot mark anything ready.
    """
    pairs = [
        (r["doc_id"], r["content_hash"])
        for r in db.fetchall(
            "SELECT doc_id, content_hash FROM ranklock.snapshot_documents WHERE snapshot_id = %s", [sid]
        )
    ]
    digest_row = db.fetchone(
        sql.SQL(
            "SELECT encode(sha256(convert_to(coalesce(string_agg(vec_digest, '' ORDER BY row_id), ''), 'UTF8')), "
            "'hex') AS d FROM {}"
        ).format(snapshot_table("chunks", sid))
    )
    stats_row = db.fetchone("SELECT stats FROM ranklock.snapshots WHERE id = %s", [sid])
    if digest_row is None or stats_row is None:
        raise SnapshotError(f"snapshot {sid} of {coll.name!r} vanished while it was finishing; ingest again.")
    manifest = build_manifest(
        coll,
        emb,
        snapshot_id=sid,
        doc_hashes=pairs,
        documents=documents,
        chunks=chunks,
        vectors_digest=digest_row["d"],
        lexical_stats=stats_row["stats"],
        index_build=index_build,
    )
    query = (
        "UPDATE ranklock.snapshots SET status = 'ready', manifest = %s, manifest_hash = %s, doc_count = %s, "
        "chunk_count = %s, built_at = now(), stats = stats || %s WHERE id = %s AND status = 'building'"
    )
    params = [
        Jsonb(manifest),
        manifest["manifest_hash"],
        documents,
        chunks,
        Jsonb(stats),
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
