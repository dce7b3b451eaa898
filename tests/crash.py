"""Killing a writer mid-way, as a crash or the OOM killer would (SIGKILL), for the crash tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

from ranklock import Engine


def kill_while_building(engine: Engine, proc: subprocess.Popen[Any], collection_id: int, after: int) -> int | None:
    """SIGKILL ``proc`` as soon as the collection has a snapshot newer than ``after`` that is building.

    Returns that snapshot's id, or None when ``proc`` ended first (it is then killed if still alive).
    Waits for ``proc`` to end either way.
    """
    sid = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            row = engine.db.fetchone(
                "SELECT id, status FROM ranklock.snapshots WHERE collection_id = %s AND id > %s ORDER BY id LIMIT 1",
                [collection_id, after],
            )
            if row is not None and row["status"] == "building":
                sid = int(row["id"])
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.005)
    finally:
        if proc.poll() is None and sid is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    return sid
