"""Connections: the pool, recovery from a lost server, and the query helpers.

On open the server is checked and the schema migrated
(ranklock.store.migrate); every statement goes through one traced cursor
(ranklock.store.trace).

Losing the server (a crash, ``kill -9``, a restart) is noticed when a
connection is checked out (each is checked with an empty statement) or when
one breaks mid-request.  Then :meth:`Database.recover` restarts the embedded
server (through the ``restart`` hook the engine passes) or reaches the
external one again, and replaces the pool; the request that noticed gets a
:class:`DatabaseUnavailable` (HTTP 503) only if the connection broke under it,
and no request waits longer than ``pool_timeout`` for a connection.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ..errors import DatabaseUnavailable
from .errors import map_data_errors
from .migrate import MIN_PGVECTOR, MIN_POSTGRES, check_server, migrate, migrations
from .trace import Hooks, Timer, Tracer, cursor_class

__all__ = ["Database", "MIN_PGVECTOR", "MIN_POSTGRES", "Timer", "Tracer", "pool_timeout_error"]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _redact(dsn: str) -> str:
    dsn = re.sub(r"(//[^:/@\s]+):[^@/\s]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def pool_timeout_error(
    stats: dict[str, int], max_size: int, pool_timeout: float, recovered: bool
) -> DatabaseUnavailable | None:
    """Why no connection came within ``pool_timeout``, or None when a recovery should be tried.

    Every connection busy is overload, not a dead server: reconnecting would not
    help.  Shared by the sync and the async pool (ranklock.store.async_database).
    """
    if stats.get("pool_size", 0) >= max_size and not stats.get("pool_available", 0):
        return DatabaseUnavailable(
            f"all {max_size} database connections stayed busy for {pool_timeout:g} s "
            "(pool_timeout); the server is overloaded by concurrent searches. Retry later, or raise "
            "RANKLOCK_POOL_TIMEOUT."
        )
    if recovered:
        return DatabaseUnavailable(
            f"no database connection within {pool_timeout:g} s even after reconnecting; "
            "retry the request, and check the server (`ranklock db status`)."
        )
    return None


class Database:
    """A pool of connections to one PostgreSQL database, migrated on open.

    ``restart`` (the embedded server's) is called to bring a server that died
    back; it returns the DSN to use.  ``pool_timeout`` bounds how long a
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
        restart: Callable[[], str] | None = None,
    ) -> None:
        self.dsn = dsn
        self.tracer = tracer
        self.cursor_factory = cursor_class(Hooks(tracer=tracer, timer=timer))
        self.min_size, self.max_size = min_size, max_size
        self.pool_timeout = pool_timeout
        self._restart = restart
        # One recovery at a time; the generation tells a waiting caller that
        # another thread already replaced the pool it saw fail.
        self._recover_lock = threading.Lock()
        self._generation = 0
        self.recoveries = 0
        try:
            # A quick direct probe gives a clear error for a wrong DSN before the
            # pool starts retrying in the background.
            with psycopg.connect(dsn, connect_timeout=10, autocommit=True, cursor_factory=self.cursor_factory) as conn:
                self._check_server(conn)
                self._migrate(conn)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL at {_redact(dsn)}: {str(exc).strip()}. "
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
            with map_data_errors(), conn:  # commit or roll back as psycopg_pool's own connection() does
                yield conn
        except psycopg.OperationalError as exc:
            if not (conn.broken or conn.closed):
                raise  # a statement error on a working connection (e.g. a cancelled statement)
            self.recover(gen, f"the connection broke during the request: {_first_line(exc)}")
            raise DatabaseUnavailable(
                f"the connection to PostgreSQL was lost during this request ({_first_line(exc)}); "
                f"{self._what_recovery_did()}. Retry the request."
            ) from exc
        finally:
            pool.putconn(conn)

    def _checkout(self) -> tuple[ConnectionPool, int, psycopg.Connection[Any]]:
        # The pool's own `check=` would discard a dead connection and then sleep
        # with a backoff before the next one; after a server crash every idle
        # connection is dead, so the check runs here and the first dead one
        # starts a recovery at once.
        recovered = False
        while True:
            pool, gen = self.pool, self._generation
            try:
                conn = pool.getconn(timeout=self.pool_timeout)
            except PoolClosed as exc:
                if gen != self._generation:
                    continue  # a recovery replaced the pool while this caller waited
                raise DatabaseUnavailable(f"the connection pool is closed ({exc}); open a new Engine.") from exc
            except PoolTimeout as exc:
                if gen != self._generation:
                    continue
                failed = pool_timeout_error(pool.get_stats(), self.max_size, self.pool_timeout, recovered)
                if failed is not None:
                    raise failed from exc
                self.recover(gen, f"no connection within {self.pool_timeout:g} s")
                recovered = True
                continue
            try:
                ConnectionPool.check_connection(conn)
            except psycopg.Error as exc:
                pool.putconn(conn)  # broken: the pool discards it
                if recovered:
                    raise DatabaseUnavailable(
                        f"the database connection failed right after reconnecting ({_first_line(exc)}); "
                        "retry the request, and check the server (`ranklock db status`)."
                    ) from exc
                self.recover(gen, _first_line(exc))
                recovered = True
                continue
            return pool, gen, conn

    def recover(self, generation: int, reason: str) -> None:
        """Restart (embedded) or reach again (external) the server, then replace the pool.

        ``generation`` is the pool generation the caller saw fail: when another
        thread has replaced that pool meanwhile, there is nothing left to do.
        Raises :class:`DatabaseUnavailable` when the server cannot be brought back.
        """
        with self._recover_lock:
            if generation != self._generation:
                return
            try:
                if self._restart is not None:
                    self.dsn = self._restart()
                with psycopg.connect(self.dsn, connect_timeout=self._connect_timeout, autocommit=True):
                    pass
            except (psycopg.OperationalError, DatabaseUnavailable) as exc:
                how = (
                    "restart the embedded server"
                    if self._restart is not None
                    else f"reach PostgreSQL at {_redact(self.dsn)}"
                )
                raise DatabaseUnavailable(
                    f"lost the database connection ({reason}) and could not {how}: {_first_line(exc)}. "
                    "ranklock tries again on every request; start the server or fix the DSN "
                    "(`ranklock db status` says whether the embedded server runs)."
                ) from exc
            old, self.pool = self.pool, self._open_pool()
            self._generation += 1
            self.recoveries += 1
            # Callers still waiting on the old pool get PoolClosed and move to
            # the new one; closing waits for its workers, so not on this thread.
            threading.Thread(target=old.close, kwargs={"timeout": 2.0}, daemon=True).start()

    def _what_recovery_did(self) -> str:
        if self._restart is not None:
            return "ranklock restarted the embedded server and reconnected"
        return "ranklock reconnected to the server"

    def trace(self, query: Any, params: Any) -> None:
        """Nothing: statements are traced by the cursor (ranklock.store.trace); kept for old callers."""

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
