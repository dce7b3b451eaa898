"""Readiness: can this process serve searches right now?

Ready means the database answers and every collection's active snapshot can
be read: its status is ``ready`` and its chunk table exists and returns a row
read.  ``GET /readyz`` reports this (HTTP 503 with the failing part when not
ready); ``GET /healthz`` only says that the process is up.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from ..errors import RanklockError
from .build import chunk_table

if TYPE_CHECKING:
    from ..store.database import Database

__all__ = ["readiness"]


def readiness(db: Database, timeout: float) -> dict[str, Any]:
    """``{"ready": bool, "database": {...}, "collections": [...], "error": {...}?}``; every check bounded by ``timeout``."""
    from ..store.timeout import statement_timeout

    t0 = time.perf_counter()
    collections: list[dict[str, Any]] = []
    try:
        with db.connection() as conn, conn.transaction(), statement_timeout(conn, timeout):
            rows = conn.execute(
                "SELECT c.name, c.active_snapshot_id, s.status FROM ranklock.collections c "
                "LEFT JOIN ranklock.snapshots s ON s.id = c.active_snapshot_id ORDER BY c.name"
            ).fetchall()
            for name, sid, status in rows:
                entry: dict[str, Any] = {"name": name, "snapshot_id": sid, "ok": True}
                if sid is not None and status != "ready":
                    entry.update(ok=False, error=f"active snapshot {sid} is {status or 'missing'}, not ready")
                elif sid is not None:
                    try:
                        with conn.transaction():  # a savepoint: one broken table does not hide the others
                            conn.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(chunk_table(int(sid))))
                    except psycopg.Error as exc:
                        entry.update(ok=False, error=f"active snapshot {sid} cannot be read: {_line(exc)}")
                collections.append(entry)
    except RanklockError as exc:
        return {
            "ready": False,
            "database": {"ok": False, "error": str(exc)},
            "collections": collections,
            "error": {"type": type(exc).__name__, "message": str(exc)},
        }
    database = {"ok": True, "ms": round((time.perf_counter() - t0) * 1000, 1), "recoveries": db.recoveries}
    failing = [c for c in collections if not c["ok"]]
    out: dict[str, Any] = {"ready": not failing, "database": database, "collections": collections}
    if failing:
        names = ", ".join(f"{c['name']} ({c['error']})" for c in failing)
        out["error"] = {
            "type": "SnapshotError",
            "message": f"{len(failing)} collection(s) cannot serve: {names}. "
            "Activate a ready snapshot (`ranklock snapshot activate`) or re-ingest.",
        }
    return out


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
