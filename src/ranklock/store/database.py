"""Connections: the pool, recovery from a lost server, and the query helpers.

On open the server is checked and the schema migrated
(ranklock.store.migrate); every statement goes through one traced cursor
(ranklock.store.trace).

Losing the server (a crash, ``kill -9``, a restart) is noticed when a
connection is checked out (a closed one has an end of file to read: no round
trip, ranklock.store.checkout.suspect) or when one breaks mid-request.  Then :meth:`Database.recover` restarts the embedded
server (through the ``restart`` hook the engine passes) or reaches the
external one again, and replaces the pool; the request that noticed gets a
:class:`DatabaseUnavailable` (HTTP 503) only if the connection broke under it,
and no request waits longer than ``pool_timeout`` for a connection.

A recovery runs in a thread of its own, one at a time, and may take longer
than a request may wait (crash recovery on a busy disk): the request that
started it, and any that arrive meanwhile, wait for it at most their own
``pool_timeout`` and are answered 503; the recovery goes on.  A server that
cannot start because its disk is full fails at once, naming the disk
(ranklock.store.server).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from ..errors import ConfigError, DatabaseUnavailable
from .checkout import (
    CURRENT,
    Check,
    CheckoutOp,
    GetConn,
    PutConn,
    Recover,
    checkout_steps,
    lost_during_request,
    suspect,
)
from .errors import first_line, map_data_errors
from .migrate import MIN_PGVECTOR, MIN_POSTGRES, check_server, migrate, migrations
from .ops import drive
from .recovery import (
    RESTART_WAIT_S,
    Pause,
    Probe,
    RecoveryOp,
    Restart,
    diagnosed,
    recovery_pending,
    recovery_steps,
)
from .trace import Hooks, Timer, Tracer, cursor_class

__all__ = [
    "MIN_PGVECTOR",
    "MIN_POSTGRES",
    "Database",
    "Timer",
    "Tracer",
    "data_directory",
]


def _redact(dsn: str) -> str:
    dsn = re.sub(r"(//[^:/@\s]+):[^@/\s]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def check_dsn(dsn: str) -> None:
    """Refuse a DSN that is no connection string at all (libpq's own parser says why), before connecting."""
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(
            f"the PostgreSQL DSN {_redact(dsn)!r} is not a connection string ({first_line(exc)}). Give a URI such "
            "as postgresql://user@host:5432/dbname or key=value pairs such as 'host=db.example dbname=ranklock' "
            "(--dsn or RANKLOCK_DSN), or unset RANKLOCK_DSN to use the embedded server."
        ) from None


def data_directory(conn: psycopg.Connection[Any]) -> str | None:
    """The server's data directory, or None when this role may not read it (pg_read_all_settings)."""
    try:
        row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    return str(row[0]) if row is not None else None


class _RecoveryJob:
    """One recovery under way: done when it has finished, ``error`` its failure message."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: str | None = None


class Database:
    """A pool of connections to one PostgreSQL database, migrated on open.

    ``restart`` (the embedded server's) is called with the seconds it may take
    to bring a server that died back; it returns the DSN to use, and ``diagnose`` says why it could
    not (ranklock.store.server), or None.  ``pool_timeout`` bounds how long a
    caller waits for a connection before the server is checked.  Every
    statement on its connections goes through one traced cursor
    (ranklock.store.trace): ``tracer`` hears it before it runs, ``timer``
    after, with its duration.
    """

    def __init__(
        self,
        dsn: str,
        *,
        tracer: Tracer | None = None,
        timer: Timer | None = None,
        min_size: int = 1,
        max_size: int = 8,
        pool_timeout: float = 5.0,
        restart: Callable[[float], str] | None = None,
        diagnose: Callable[[], str | None] | None = None,
    ) -> None:
        self.dsn = dsn
        self.tracer = tracer
        self.cursor_factory = cursor_class(Hooks(tracer=tracer, timer=timer))
        self.min_size, self.max_size = min_size, max_size
        self.pool_timeout = pool_timeout
        self._restart, self._diagnose = restart, diagnose
        # One recovery at a time (self._job); the generation tells a waiting caller
        # that another thread already replaced the pool it saw fail.
        self._recover_lock = threading.Lock()
        self._generation = 0
        self.recoveries = 0
        self._job: _RecoveryJob | None = None
        #: Why the last recovery failed, until one succeeds: the server is down, so the next request
        #: tries to bring it back at once instead of first waiting pool_timeout for a connection.
        self.down: str | None = None
        #: The server's data directory when this role may read it (a full disk's message names it).
        self.data_directory: str | None = None
        check_dsn(dsn)
        try:
            # A quick direct probe gives a clear error for a wrong DSN before the
            # pool starts retrying in the background.
            with psycopg.connect(dsn, connect_timeout=10, autocommit=True, cursor_factory=self.cursor_factory) as conn:
                self._check_server(conn)
                self._migrate(conn)
                self.data_directory = data_directory(conn)
        except psycopg.OperationalError as exc:
            # libpq's text spans lines and may end in a question ("...accepting TCP/IP connections?"):
            # one line, and no full stop after a question mark.
            said = " ".join(str(exc).split())
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL at {_redact(dsn)}: {said}{'' if said.endswith(('.', '?', '!')) else '.'} "
                "Check that the server runs and the DSN is right, or unset RANKLOCK_DSN "
                "to use the embedded server."
            ) from exc
        self.pool = self._open_pool()

    def _open_pool(self) -> ConnectionPool:
        return ConnectionPool(
            self.dsn,
            min_size=self.min_size,
            max_size=self.max_size,
            open=True,
            configure=self._configure,
            timeout=self.pool_timeout,
            # No server-side prepared statements: after five executions psycopg
            # would prepare, and PostgreSQL may then switch to a generic plan.
            # A different plan for the same query can walk an ANN index
            # differently and return different rows; one statement, one plan.
            # A bounded connect: an unreachable host must not stall the pool's workers.
            kwargs={
                "autocommit": True,
                "prepare_threshold": None,
                "connect_timeout": self._connect_timeout,
                "cursor_factory": self.cursor_factory,
            },
        )

    @property
    def _connect_timeout(self) -> int:
        return max(2, int(self.pool_timeout))  # libpq's minimum is 2 s

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        # Belt and braces for statements prepared by anything else: always plan
        # with the actual parameter values.
        conn.execute("SET plan_cache_mode = force_custom_plan")

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A checked connection from the pool; a lost server is restarted or reached again."""
        pool, gen, conn = self._checkout()
        try:
            # Every statement runs inside one of these blocks (the helpers below
            # too), so this is where a refused value becomes a ranklock error.
            # Commit or roll back as psycopg_pool's own connection() does.
            with map_data_errors(self.data_directory), conn:
                yield conn
        except psycopg.OperationalError as exc:
            if not (conn.broken or conn.closed):
                raise  # a statement error on a working connection (e.g. a cancelled statement)
            self.recover(gen, f"the connection broke during the request: {first_line(exc)}")
            raise lost_during_request(exc, restarted=self._restart is not None) from exc
        finally:
            pool.putconn(conn)

    def _checkout(self) -> tuple[ConnectionPool, int, psycopg.Connection[Any]]:
        # ranklock.store.checkout: the algorithm, shared with AsyncDatabase.
        steps = checkout_steps(pool_timeout=self.pool_timeout, max_size=self.max_size, down=self.down, reopen="Engine")
        pool, gen, conn = drive(steps, self._checkout_op)
        return pool, gen, conn

    def _checkout_op(self, op: CheckoutOp) -> Any:
        if isinstance(op, GetConn):
            return op.pool.getconn(timeout=op.timeout)
        if isinstance(op, Check):
            return ConnectionPool.check_connection(op.conn) if suspect(op.conn) else None
        if isinstance(op, PutConn):
            return op.pool.putconn(op.conn)
        if isinstance(op, Recover):
            return self.recover(op.generation, op.reason, deadline=op.deadline)
        assert op is CURRENT
        return self.pool, self._generation

    def recover(self, generation: int, reason: str, *, deadline: float | None = None) -> None:
        """Restart (embedded) or reach again (external) the server, then replace the pool.

        ``generation`` is the pool generation the caller saw fail: when another
        thread has replaced that pool meanwhile, there is nothing left to do.
        The recovery runs in a thread of its own, one at a time; the caller
        waits for it until ``deadline`` (``time.monotonic()``; default: in
        ``pool_timeout``), so a restart that takes longer (crash recovery on a
        busy disk) goes on while the caller is answered in time.  Raises
        :class:`DatabaseUnavailable` when the server cannot be brought back, or
        not by the deadline.
        """
        end = time.monotonic() + self.pool_timeout if deadline is None else deadline
        with self._recover_lock:
            if generation != self._generation:
                return
            job = self._job
            if job is None:
                job = self._job = _RecoveryJob()
                threading.Thread(
                    target=self._recover_now, args=(job, reason), name="ranklock-recover", daemon=True
                ).start()
        if not job.done.wait(max(0.0, end - time.monotonic())):
            raise DatabaseUnavailable(recovery_pending(reason, self.pool_timeout, self.down))
        if job.error is not None:
            raise DatabaseUnavailable(job.error)

    def _recover_now(self, job: _RecoveryJob, reason: str) -> None:
        how = "restart the embedded server" if self._restart is not None else f"reach PostgreSQL at {_redact(self.dsn)}"
        try:
            new = drive(recovery_steps(reason, how, restart=self._restart is not None), self._recovery_op)
        except DatabaseUnavailable as exc:
            job.error = self.down = diagnosed(str(exc), self._diagnose)
        else:
            with self._recover_lock:
                self.down = None
                old, self.pool = self.pool, new
                self._generation += 1
                self.recoveries += 1
            # Callers still waiting on the old pool get PoolClosed and move to
            # the new one; closing waits for its workers, so not on a request's thread.
            old.close(timeout=2.0)
        finally:
            with self._recover_lock:
                self._job = None
            job.done.set()

    def _recovery_op(self, op: RecoveryOp) -> Any:
        """Perform one operation of the recovery (ranklock.store.recovery) with a blocking call."""
        if isinstance(op, Restart):
            assert self._restart is not None
            self.dsn = self._restart(RESTART_WAIT_S)
        elif isinstance(op, Probe):
            psycopg.connect(self.dsn, connect_timeout=self._connect_timeout, autocommit=True).close()
        elif isinstance(op, Pause):
            time.sleep(op.seconds)
        else:
            return self._open_pool()
        return None

    def fetchall(self, query: sql.Composable | str, params: Any = None) -> list[dict[str, Any]]:
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, params)  # type: ignore[arg-type]
            return cur.fetchall()

    def fetchone(self, query: sql.Composable | str, params: Any = None) -> dict[str, Any] | None:
        rows = self.fetchall(query, params)
        return rows[0] if rows else None

    def execute(self, query: sql.Composable | str, params: Any = None) -> None:
        with self.connection() as conn:
            conn.execute(query, params)  # type: ignore[arg-type]

    # -- checks and migrations: ranklock.store.migrate ------------------------------

    # Overridable steps of opening: a read-only standby's pool (store.replicas) checks that it is
    # in recovery instead, and never migrates.
    @staticmethod
    def _check_server(conn: psycopg.Connection[Any]) -> None:
        check_server(conn)

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        migrate(conn)

    @staticmethod
    def migrations() -> list[tuple[int, str, str]]:
        """Every migration shipped with ranklock: (version, name, SQL), in order."""
        return migrations()
