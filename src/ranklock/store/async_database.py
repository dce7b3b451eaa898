"""The async twin of :class:`~ranklock.store.database.Database`: psycopg_pool's ``AsyncConnectionPool``.

``AsyncEngine`` reads through it; the read paths themselves are the steps
generators of ranklock.store.steps, shared with the sync ``Database``, so this
module holds no SQL of a feature, only connections:

* the same connection settings as the sync pool (pgvector registered, no
  server-side prepared statements, ``plan_cache_mode = force_custom_plan``, one
  traced cursor), so a statement is planned the same way on either;
* the same recovery: a dead connection found at checkout, or one that breaks
  under a request, restarts the embedded server (the ``restart`` hook runs in a
  worker thread: it blocks for seconds) or reaches the external one again, and
  replaces the pool; a request whose connection broke gets
  :class:`~ranklock.errors.DatabaseUnavailable` (HTTP 503);
* one pool per event loop: asyncio objects belong to the loop that made them,
  so used from another loop (a second ``asyncio.run``, a test client that runs
  each request in a fresh loop) the database opens a new pool there and closes
  the old pool's connections without awaiting anything on a loop that may be gone.

It never migrates: ``AsyncEngine`` opens a sync ``Engine`` first, whose
``Database`` checks the server and migrates the schema.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from ..errors import DatabaseUnavailable, QueryTimeout
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
from .database import _redact
from .errors import first_line, map_data_errors
from .ops import adrive
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
from .steps import Batch, Block, Fetch, Offload, Step, Steps, mark_failed
from .timeout import SET_TIMEOUT, timeout_error, timeout_value
from .trace import Hooks, Timer, Tracer, async_cursor_class

__all__ = ["AsyncDatabase"]

T = TypeVar("T")
AConn = psycopg.AsyncConnection[Any]


class _LoopPool:
    """One event loop's pool, the connections it made (to close them from anywhere), and its recovery."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], conns: weakref.WeakSet[AConn], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.pool = pool
        self.conns = conns
        self.loop = loop
        #: The recovery under way on this loop, if any (AsyncDatabase.recover).
        self.job: asyncio.Task[None] | None = None
        self.generation = 0

    def abandon(self) -> None:
        # The pool's loop is gone or another one: nothing of it can be awaited here.
        # Closing each socket (PQfinish) frees the server's backends at once.
        for conn in list(self.conns):
            if not conn.closed:
                conn.pgconn.finish()


class AsyncDatabase:
    """An ``AsyncConnectionPool`` on ``dsn``; reads run as steps (:meth:`run`).

    ``restart`` (the embedded server's) brings a server that died back and returns
    the DSN, ``diagnose`` says why it could not; ``pool_timeout`` bounds the wait for a connection, as in ``Database``.
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
        data_directory: str | None = None,
    ) -> None:
        self.dsn = dsn
        self.data_directory = data_directory
        self.cursor_factory = async_cursor_class(Hooks(tracer=tracer, timer=timer))
        self.min_size, self.max_size = min_size, max_size
        self.pool_timeout = pool_timeout
        self._restart, self._diagnose = restart, diagnose
        #: Why the last recovery failed, until one succeeds (as Database.down).
        self.down: str | None = None
        self._current: _LoopPool | None = None
        self._closed = False
        self.recoveries = 0
        # Closing a replaced pool runs in the background (as the sync Database's thread does);
        # kept here so the task is neither garbage-collected nor left running when we release.
        self._closing: set[asyncio.Task[None]] = set()

    # -- the pool of this loop ----------------------------------------------------

    async def _loop_pool(self) -> _LoopPool:
        if self._closed:
            raise DatabaseUnavailable("the async connection pool is closed; open a new AsyncEngine.")
        loop = asyncio.get_running_loop()
        current = self._current
        if current is not None and current.loop is loop:
            return current
        if current is not None:
            current.abandon()
        self._current = _LoopPool(*await self._open_pool(), loop)
        return self._current

    async def _open_pool(self) -> tuple[AsyncConnectionPool[Any], weakref.WeakSet[AConn]]:
        conns: weakref.WeakSet[AConn] = weakref.WeakSet()

        async def configure(conn: AConn) -> None:
            from pgvector.psycopg import register_vector_async

            await register_vector_async(conn)
            # As in Database: always plan with the actual parameter values.
            await conn.execute("SET plan_cache_mode = force_custom_plan")
            conns.add(conn)

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.dsn,
            min_size=self.min_size,
            max_size=self.max_size,
            open=False,
            configure=configure,
            timeout=self.pool_timeout,
            # The sync pool's reasons hold here too (ranklock.store.database): no prepared
            # statements (one statement, one plan), a bounded connect, the traced cursor.
            kwargs={
                "autocommit": True,
                "prepare_threshold": None,
                "connect_timeout": max(2, int(self.pool_timeout)),
                "cursor_factory": self.cursor_factory,
            },
        )
        await pool.open()
        return pool, conns

    async def close(self) -> None:
        """Close this loop's pool (other loops' connections are closed without awaiting); no use after."""
        self._closed = True
        await self.release()

    async def release(self) -> None:
        """Close the pool and its connections; a later use opens a new pool (a server's shutdown hook)."""
        current, self._current = self._current, None
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        mine = [t for t in self._closing if t.get_loop() is running]
        self._closing.clear()  # another loop's tasks cannot be awaited here; that loop ends them
        if mine:
            await asyncio.gather(*mine, return_exceptions=True)
        if current is None:
            return
        if current.loop is running:
            await current.pool.close()
        else:
            current.abandon()

    def backend_pids(self) -> list[int]:
        """The server process ids of the connections this database holds open now (none after :meth:`close`)."""
        current = self._current
        if current is None:
            return []
        return sorted(c.info.backend_pid for c in list(current.conns) if not c.closed)

    # -- connections ---------------------------------------------------------------

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AConn]:
        """A checked connection from this loop's pool; a lost server is restarted or reached again."""
        lp, pool, gen, conn = await self._checkout()
        try:
            with map_data_errors(self.data_directory):
                async with conn:  # commit or roll back, as the sync Database does
                    yield conn
        except psycopg.OperationalError as exc:
            if not (conn.broken or conn.closed):
                raise
            await self.recover(lp, gen, f"the connection broke during the request: {first_line(exc)}")
            raise lost_during_request(exc, restarted=self._restart is not None) from exc
        finally:
            # Back to the pool it came from: a recovery meanwhile (this request's or
            # another's) replaced lp.pool, and a pool refuses another pool's connection.
            await pool.putconn(conn)

    async def _checkout(self) -> tuple[_LoopPool, AsyncConnectionPool[Any], int, AConn]:
        # ranklock.store.checkout: the algorithm, shared with the sync Database.
        held: list[_LoopPool] = []  # this loop's pool, as the last CURRENT found it

        async def do(op: CheckoutOp) -> Any:
            if isinstance(op, GetConn):
                return await op.pool.getconn(timeout=op.timeout)
            if isinstance(op, Check):
                return await AsyncConnectionPool.check_connection(op.conn) if suspect(op.conn) else None
            if isinstance(op, PutConn):
                return await op.pool.putconn(op.conn)
            if isinstance(op, Recover):
                return await self.recover(held[-1], op.generation, op.reason, deadline=op.deadline)
            assert op is CURRENT
            held[:] = [await self._loop_pool()]
            return held[-1].pool, held[-1].generation

        steps = checkout_steps(
            pool_timeout=self.pool_timeout, max_size=self.max_size, down=self.down, reopen="AsyncEngine"
        )
        pool, gen, conn = await adrive(steps, do)
        return held[-1], pool, gen, conn

    async def recover(self, lp: _LoopPool, generation: int, reason: str, *, deadline: float | None = None) -> None:
        """Restart (embedded) or reach again (external) the server, then replace this loop's pool.

        As ``Database.recover``: one recovery task at a time, which the caller
        awaits until ``deadline`` and which goes on after it.
        """
        end = time.monotonic() + self.pool_timeout if deadline is None else deadline
        if generation != lp.generation:
            return  # another task already replaced the pool it saw fail
        if lp.job is None:
            lp.job = asyncio.get_running_loop().create_task(self._recover_now(lp, reason))
            # Its failure reaches the callers that await it; read here too, so none left unheard is logged.
            lp.job.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        try:
            # shield: a caller out of time must not cancel the recovery the next caller needs.
            await asyncio.wait_for(asyncio.shield(lp.job), timeout=max(0.0, end - time.monotonic()))
        except TimeoutError:
            raise DatabaseUnavailable(recovery_pending(reason, self.pool_timeout, self.down)) from None

    async def _recover_now(self, lp: _LoopPool, reason: str) -> None:
        how = "restart the embedded server" if self._restart is not None else f"reach PostgreSQL at {_redact(self.dsn)}"
        try:
            new = await adrive(recovery_steps(reason, how, restart=self._restart is not None), self._recovery_op)
        except DatabaseUnavailable as exc:
            self.down = diagnosed(str(exc), self._diagnose)
            raise DatabaseUnavailable(self.down) from exc
        finally:
            lp.job = None
        self.down = None
        old = lp.pool
        lp.pool, lp.conns = new
        lp.generation += 1
        self.recoveries += 1
        # Tasks still waiting on the old pool get PoolClosed and move to the new one.
        task = asyncio.get_running_loop().create_task(old.close(timeout=2.0))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _recovery_op(self, op: RecoveryOp) -> Any:
        """Perform one operation of the recovery (ranklock.store.recovery) with an await."""
        if isinstance(op, Restart):
            assert self._restart is not None
            # Starting a server blocks for seconds: not on the event loop.
            self.dsn = await asyncio.to_thread(self._restart, RESTART_WAIT_S)
        elif isinstance(op, Probe):
            probe = await psycopg.AsyncConnection.connect(
                self.dsn, connect_timeout=max(2, int(self.pool_timeout)), autocommit=True
            )
            await probe.close()
        elif isinstance(op, Pause):
            await asyncio.sleep(op.seconds)
        else:
            return await self._open_pool()
        return None

    # -- running steps -------------------------------------------------------------

    async def run(self, steps: Steps[T]) -> T:
        """Run a steps generator (ranklock.store.steps) with genuinely async I/O; CPU work goes to a thread."""
        return await self._drive(None, steps)

    async def fetchall(self, query: Any, params: Any = None) -> list[dict[str, Any]]:
        """Every row of one statement, as dicts."""
        rows: list[dict[str, Any]] = await self._do(None, Fetch(query, params))
        return rows

    async def _drive(self, conn: AConn | None, steps: Steps[T]) -> T:
        return await adrive(steps, lambda step: self._do(conn, step))

    async def _do(self, conn: AConn | None, step: Step) -> Any:
        if isinstance(step, Offload):
            return await asyncio.to_thread(step.fn)
        async with AsyncExitStack() as stack:
            c = conn if conn is not None else await stack.enter_async_context(self.connection())
            if isinstance(step, Fetch):
                return await _fetch(c, step)
            if isinstance(step, Batch):
                return await _batch(c, step)
            return await self._block(c, step)

    async def _block(self, conn: AConn, step: Block) -> Any:
        async with AsyncExitStack() as stack:
            if step.transaction:
                await stack.enter_async_context(conn.transaction())
            if step.timeout is None:
                return await self._drive(conn, step.steps)
            await conn.execute(SET_TIMEOUT, [timeout_value(step.timeout)])
            try:
                return await self._drive(conn, step.steps)
            except psycopg.errors.QueryCanceled as exc:
                mapped: QueryTimeout | None = timeout_error(exc, step.timeout)
                if mapped is None:
                    raise
                raise mapped from exc


async def _fetch(conn: AConn, step: Fetch) -> list[Any]:
    async with conn.cursor(row_factory=dict_row if step.dicts else tuple_row) as cur:
        await cur.execute(step.query, step.params)  # type: ignore[arg-type]
        return await cur.fetchall() if cur.description is not None else []


async def _batch(conn: AConn, step: Batch) -> list[list[Any]]:
    """:func:`ranklock.store.steps.batch_on` on an async connection: one round trip, the same errors."""
    async with AsyncExitStack() as stack:
        cursors = [
            await stack.enter_async_context(conn.cursor(row_factory=dict_row if f.dicts else tuple_row))
            for f in step.fetches
        ]
        first = 0
        try:
            async with conn.pipeline():
                if step.timeout is not None:
                    first = 1
                    cursors.insert(0, await stack.enter_async_context(conn.cursor()))
                    await cursors[0].execute(SET_TIMEOUT, [timeout_value(step.timeout)])
                for cur, f in zip(cursors[first:], step.fetches, strict=True):
                    await cur.execute(f.query, f.params)  # type: ignore[arg-type]
        except psycopg.errors.QueryCanceled as exc:
            mapped = None if step.timeout is None else timeout_error(exc, step.timeout)
            raise mark_failed(mapped or exc, cursors, first) from (exc if mapped else None)
        except psycopg.Error as exc:
            raise mark_failed(exc, cursors, first) from None
        return [await cur.fetchall() if cur.description is not None else [] for cur in cursors[first:]]
