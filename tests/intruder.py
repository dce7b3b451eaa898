"""Another user of the machine, trying a home's servers the way issue 48's finding was made.

``psql`` (the wheel's own) run as the OS user ``nobody`` with no password anywhere: no
``PGPASSWORD``, no readable ``~/.pgpass``, and ``-w`` so it never waits for one.  The command it
sends is the one that made the finding serious: ``COPY ... TO PROGRAM`` runs a program as the
server's OS user, so a refused connection is checked by the program's file not existing after.
The tests run as root (the servers then run as ``embedded_postgres``): only root can be another user.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from ranklock.store.local_node import pg_bin

__all__ = ["Attempt", "as_nobody", "refused_as_nobody"]


@dataclass(frozen=True)
class Attempt:
    """What ``nobody`` got: psql's exit status and messages, and whether its program ran on the server."""

    returncode: int
    stdout: str
    stderr: str
    program_ran: bool


def as_nobody(host: str, port: int | None = None, database: str = "ranklock") -> Attempt:
    """Connect as OS user ``nobody`` to ``host`` (an address, or a socket folder) as role postgres; try TO PROGRAM."""
    assert os.geteuid() == 0, "these tests impersonate another OS user (nobody): run them as root, as CI does"
    marker = Path("/tmp") / f"ranklock-intruder-{uuid.uuid4().hex}"
    args = [pg_bin("psql"), "-X", "-w", "-h", host, "-U", "postgres", "-d", database]
    if port is not None:
        args += ["-p", str(port)]
    args += ["-c", f"COPY (SELECT 1) TO PROGRAM 'id > {marker}'"]
    run = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", *args],
        capture_output=True,
        text=True,
        timeout=60,
        # Nothing of root's: no PG* variable, and a home that does not exist (no ~/.pgpass).
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"},
    )
    ran = marker.exists()
    marker.unlink(missing_ok=True)
    return Attempt(run.returncode, run.stdout, run.stderr, ran)


def refused_as_nobody(host: str, port: int | None = None, database: str = "ranklock") -> str:
    """psql's message when ``nobody`` is refused; AssertionError (with what it got) when it got in."""
    got = as_nobody(host, port, database)
    assert got.returncode == 2 and not got.program_ran, f"nobody got in to {host}:{port}: {got}"
    return got.stderr
