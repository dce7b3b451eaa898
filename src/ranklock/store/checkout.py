"""Checking a connection out of the pool, written once for the sync and the async database.

The algorithm (:func:`checkout_steps`) is a generator of the operations it
needs: the pool in use now, a connection from it, a check of that connection,
returning a broken one, a recovery.  ``Database`` performs each with a
blocking call, ``AsyncDatabase`` with an await (``drive`` and ``adrive`` of
ranklock.store.ops); an operation's exception is thrown back into the
algorithm where it asked, so the two databases cannot drift apart in what
they do when the server is gone.

The pool's own ``check=`` would discard a dead connection and then sleep with
a backoff before the next one; after a server crash every idle connection is
dead, so the check runs here and the first dead one starts a recovery at once.

The check costs no round trip (:func:`suspect`): an idle connection has
nothing to read unless the server closed it (a crash, a restart,
``pg_terminate_backend``, an idle timeout all leave an end of file or a FATAL
message on its socket); only such a connection is probed with an empty
statement.  One the network lost silently is found when a statement fails on
it: a search then retries once (ranklock.search.pipeline).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

from ..errors import ConnectionLost, DatabaseUnavailable
from .errors import first_line

__all__ = [
    "CURRENT",
    "Check",
    "CheckoutOp",
    "GetConn",
    "PutConn",
    "Recover",
    "checkout_steps",
    "checkout_wait",
    "lost_during_request",
    "pool_timeout_error",
    "suspect",
]


@dataclass(frozen=True)
class Current:
    """Ask for the pool in use now and its generation (a recovery replaces the pool and counts up)."""


#: The one :class:`Current` operation.
CURRENT = Current()


@dataclass(frozen=True)
class GetConn:
    """A connection from ``pool``, waiting at most ``timeout`` seconds."""

    pool: Any
    timeout: float


@dataclass(frozen=True)
class Check:
    """Check ``conn``: probed with an empty statement when :func:`suspect`; raises ``psycopg.Error`` when it is dead."""

    conn: Any


def suspect(conn: Any) -> bool:
    """Whether idle ``conn`` has something to read: the server closed it, or said why it will (no round trip)."""
    import select

    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True  # no socket any more: closed
    return bool(readable)


@dataclass(frozen=True)
class PutConn:
    """Give ``conn`` back to ``pool`` (a broken one is discarded by the pool)."""

    pool: Any
    conn: Any


@dataclass(frozen=True)
class Recover:
    """Bring the server back and replace the pool of ``generation``, waiting until ``deadline`` (monotonic)."""

    generation: int
    reason: str
    deadline: float


CheckoutOp = Current | GetConn | Check | PutConn | Recover


def checkout_wait(stats: dict[str, int], max_size: int, deadline: float, pool_timeout: float) -> float:
    """How long to wait for a pooled connection before the server is checked.

    A full pool of busy connections is a queue: wait up to the deadline.  A pool
    with room only waits while it connects, which takes milliseconds when the
    server is up; after half the pool timeout it is checked (and restarted),
    so a request to a dead server is still answered within the pool timeout.
    """
    left = max(0.1, deadline - time.monotonic())
    if stats.get("pool_size", 0) >= max_size:
        return left
    return min(left, max(0.1, pool_timeout / 2))


def pool_timeout_error(
    stats: dict[str, int], max_size: int, pool_timeout: float, recovered: bool
) -> DatabaseUnavailable | None:
    """Why no connection came within ``pool_timeout``, or None when a recovery should be tried.

    Every connection busy is overload, not a dead server: reconnecting would not help.
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


def checkout_steps(
    *, pool_timeout: float, max_size: int, down: str | None, reopen: str
) -> Generator[CheckoutOp, Any, tuple[Any, int, Any]]:
    """A checked connection: ``(pool, generation, conn)``; at most one recovery per failure, all by one deadline.

    ``down`` is why the last recovery failed (the server was down at the last
    request: recover first); ``reopen`` names what to open again when the pool
    was closed for good ("Engine", "AsyncEngine").
    """
    recovered = False
    deadline = time.monotonic() + pool_timeout
    if down is not None:
        _, gen = yield CURRENT
        yield Recover(gen, "the server was down at the last request", deadline)
        recovered = True
    while True:
        pool, gen = yield CURRENT
        try:
            conn = yield GetConn(pool, checkout_wait(pool.get_stats(), max_size, deadline, pool_timeout))
        except PoolClosed as exc:
            _, now = yield CURRENT
            if gen != now:
                continue  # a recovery replaced the pool while this caller waited
            raise DatabaseUnavailable(f"the connection pool is closed ({exc}); open a new {reopen}.") from exc
        except PoolTimeout as exc:
            _, now = yield CURRENT
            if gen != now:
                continue
            failed = pool_timeout_error(pool.get_stats(), max_size, pool_timeout, recovered)
            if failed is not None:
                raise failed from exc
            yield Recover(gen, f"no connection within {pool_timeout:g} s", deadline)
            recovered = True
            continue
        try:
            yield Check(conn)
        except psycopg.Error as exc:
            yield PutConn(pool, conn)  # broken: the pool discards it
            if recovered:
                raise DatabaseUnavailable(
                    f"the database connection failed right after reconnecting ({first_line(exc)}); "
                    "retry the request, and check the server (`ranklock db status`)."
                ) from exc
            yield Recover(gen, first_line(exc), deadline)
            recovered = True
            continue
        return pool, gen, conn


def lost_during_request(exc: BaseException, restarted: bool) -> ConnectionLost:
    """The error of a request whose connection broke under it, once the recovery it started has run."""
    did = (
        "ranklock restarted the embedded server and reconnected" if restarted else "ranklock reconnected to the server"
    )
    return ConnectionLost(
        f"the connection to PostgreSQL was lost during this request ({first_line(exc)}); {did}. Retry the request."
    )
