"""Readiness: can this process serve searches right now?

Ready means the database answers and every collection's active snapshot can
be read: its status is ``ready`` and its chunk table exists and returns a row
read.  ``GET /readyz`` reports this (HTTP 503 with the failing part when not
ready); ``GET /healthz`` only says that the process is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from ..errors import RanklockError
from ..phrasing import plural
from ..store.steps import Block, Fetch, Steps
from ..store.tables import segment_table
from .segments import Layout, segments_sql

if TYPE_CHECKING:
    from ..store.database import Database

__all__ = ["Readiness", "readiness", "readiness_steps"]


@dataclass(frozen=True)
class Readiness:
    """Whether this process can serve searches: the database, each collection, and what fails (``GET /readyz``)."""

    ready: bool
    #: ``{ok, ms, recoveries}``, or ``{ok: false, error}`` when the database does not answer.
    database: Mapping[str, Any]
    #: ``{name, snapshot_id, ok, error?}`` per collection, by name.
    collections: tuple[Mapping[str, Any], ...]
    #: ``{type, message}`` naming the failing part and the fix; None when ready.
    error: Mapping[str, str] | None = None
    #: The embedding models (``Engine.warm``): ``{state, lines}``; while ``loading`` a lexical search is
    #: served at once and one that needs a vector waits for the load.
    models: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``/readyz`` (with ``status`` for ``ready``): ``error`` only when not ready."""
        out: dict[str, Any] = {"ready": self.ready, "database": self.database, "collections": list(self.collections)}
        if self.models is not None:
            out["models"] = self.models
        if self.error is not None:
            out["error"] = self.error
        return out


def readiness(db: Database, timeout: float) -> Readiness:
    """The database and every active snapshot checked, each check bounded by ``timeout``."""
    from ..store.steps import run_steps

    return run_steps(db, readiness_steps(timeout, lambda: db.recoveries))


def readiness_steps(timeout: float, recoveries: Callable[[], int]) -> Steps[Readiness]:
    """:func:`readiness` as steps (ranklock.store.steps); ``recoveries`` reads the pool's recovery count."""
    t0 = time.perf_counter()
    collections: list[dict[str, Any]] = []
    try:
        yield Block(_check_collections(collections), timeout=timeout)
    except RanklockError as exc:
        return Readiness(
            False,
            {"ok": False, "error": str(exc)},
            tuple(collections),
            {"type": type(exc).__name__, "message": str(exc)},
        )
    database = {"ok": True, "ms": round((time.perf_counter() - t0) * 1000, 1), "recoveries": recoveries()}
    failing = [c for c in collections if not c["ok"]]
    if not failing:
        return Readiness(True, database, tuple(collections))
    names = ", ".join(f"{c['name']} ({c['error']})" for c in failing)
    error = {
        "type": "SnapshotError",
        "message": f"{plural(len(failing), 'collection')} cannot serve: {names}. "
        "Activate a ready snapshot (`ranklock snapshot activate`) or re-ingest.",
    }
    return Readiness(False, database, tuple(collections), error)


def _check_collections(collections: list[dict[str, Any]]) -> Steps[None]:
    """Append one entry per collection to ``collections``, in one transaction under the caller's timeout."""
    rows = yield Fetch(
        sql.SQL(
            "SELECT c.name, c.active_snapshot_id, s.status, s.stats, {} AS segments FROM ranklock.collections c "
            "LEFT JOIN ranklock.snapshots s ON s.id = c.active_snapshot_id ORDER BY c.name"
        ).format(segments_sql(sql.SQL("s.id"))),
        dicts=False,
    )
    for name, sid, status, stats, segments in rows:
        entry: dict[str, Any] = {"name": name, "snapshot_id": sid, "ok": True}
        if sid is not None and status != "ready":
            entry.update(ok=False, error=f"active snapshot {sid} is {status or 'missing'}, not ready")
        elif sid is not None:
            try:
                # A nested block is a savepoint: one broken table does not hide the others.
                layout = Layout.of({"id": sid, "stats": stats, "segments": segments})
                # Every segment's table: a search reads them all.
                for g in layout.segments:
                    yield Block(_read_one(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(segment_table("chunks", g.id))))
            except psycopg.Error as exc:
                entry.update(ok=False, error=f"active snapshot {sid} cannot be read: {_line(exc)}")
        collections.append(entry)


def _read_one(query: sql.Composable) -> Steps[None]:
    yield Fetch(query)


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
