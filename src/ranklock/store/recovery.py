"""Bringing the server back after a lost connection, written once for the sync and the async database.

The procedure (:func:`recovery_steps`): restart the embedded server (or, for
an external one, only reach it again), connect until it takes connections
(a server replaying its WAL after a crash is on its way up, not failed), and
open a new pool; a failure becomes the one message a caller sees.  As with the
checkout (ranklock.store.checkout), it is a generator of the operations it
needs, which ``Database`` performs with blocking calls and ``AsyncDatabase``
with awaits (``drive``/``adrive``, ranklock.store.ops).  What
differs stays with each database: who waits for a recovery under way (a thread
and an event, a task per event loop) and how the old pool is closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import psycopg

from ..errors import DatabaseUnavailable
from .errors import first_line

__all__ = [
    "OPEN_POOL",
    "PROBE",
    "RESTART",
    "RESTART_WAIT_S",
    "Pause",
    "RecoveryOp",
    "recovery_failure",
    "recovery_pending",
    "recovery_steps",
    "starting",
]

#: How long a recovery may take to start the embedded server again (crash recovery on a busy disk),
#: whatever a request's own deadline: the request is answered, the restart goes on.
RESTART_WAIT_S = 10.0
#: Between two connection attempts to a server that is still starting.
PROBE_PAUSE_S = 0.2


@dataclass(frozen=True)
class Restart:
    """Start the embedded server again, waiting at most :data:`RESTART_WAIT_S`; the database keeps the DSN it returns."""


@dataclass(frozen=True)
class Probe:
    """Open one connection to the server and close it (raises ``psycopg.OperationalError`` when refused)."""


@dataclass(frozen=True)
class Pause:
    """Sleep ``seconds`` (off the event loop's back for the async database)."""

    seconds: float


@dataclass(frozen=True)
class OpenPool:
    """Open a new pool (or, async, a new pool for this event loop); its reply is what the database swaps in."""


RESTART, PROBE, OPEN_POOL = Restart(), Probe(), OpenPool()
RecoveryOp = Restart | Probe | Pause | OpenPool


def starting(exc: BaseException) -> bool:
    """Whether a refused connection is a server on its way up (crash recovery, start-up: SQLSTATE 57P03)."""
    return isinstance(exc, psycopg.OperationalError) and "the database system is" in str(exc)


def recovery_pending(reason: str, pool_timeout: float, down: str | None) -> str:
    """The message of a request whose wait for a recovery under way ran out."""
    last = f" The last attempt failed: {down}" if down else ""
    return (
        f"lost the database connection ({reason}); ranklock is bringing the server back, which has taken "
        f"longer than {pool_timeout:g} s (RANKLOCK_POOL_TIMEOUT). Retry the request in a moment.{last}"
    )


def recovery_failure(reason: str, exc: BaseException, how: str) -> str:
    """The message of a recovery that could not bring the server back."""
    return (
        f"lost the database connection ({reason}) and could not {how}: {first_line(exc)}. "
        "ranklock tries again on every request; start the server or fix the DSN "
        "(`ranklock db status` says whether the embedded server runs, and why not)."
    )


def diagnosed(message: str, diagnose: Callable[[], str | None] | None) -> str:
    """``message`` led by the server's own diagnosis (a full disk, named), when it has one.

    A server that PANICs on a full WAL disk restarts into crash recovery, which can outlast the
    wait: the failure the probe sees ("the database system is in recovery mode") does not say why.
    """
    found = diagnose() if diagnose is not None else None
    # A restart that failed on its own already says it (EmbeddedServer's failure leads with it).
    return message if found is None or found in message else f"{found} ({message})"


def recovery_steps(reason: str, how: str, *, restart: bool) -> Generator[RecoveryOp, Any, Any]:
    """The recovery as operations; returns the new pool, or raises :class:`DatabaseUnavailable` saying why not.

    ``how`` names what failed in the message ("restart the embedded server",
    "reach PostgreSQL at ..."); ``restart``: the server is embedded, start it.
    """
    try:
        if restart:
            yield RESTART
        deadline = time.monotonic() + RESTART_WAIT_S
        while True:
            try:
                yield PROBE
                break
            except psycopg.OperationalError as exc:
                if not starting(exc) or time.monotonic() > deadline:
                    raise
            yield Pause(PROBE_PAUSE_S)
        return (yield OPEN_POOL)
    except (psycopg.OperationalError, DatabaseUnavailable) as exc:
        raise DatabaseUnavailable(recovery_failure(reason, exc, how)) from exc
