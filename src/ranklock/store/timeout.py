"""The statement timeout every search runs under.

A search sets ``statement_timeout`` with ``set_config(..., true)`` (that is,
``SET LOCAL``) inside its own transaction, so the limit ends with the
transaction and a pooled connection never carries it into the next use.
PostgreSQL cancels a statement that runs longer; the transaction rolls back,
the connection goes back to the pool, and the caller gets a
:class:`~ranklock.errors.QueryTimeout` that names the limit and the setting::

    with db.connection() as conn, conn.transaction(), statement_timeout(conn, 30.0):
        conn.execute(search_sql, params)

A replay runs under the timeout the logged search ran under
(:func:`timeout_override`), so the echoed parameters match byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg

from ..errors import QueryTimeout

__all__ = [
    "SET_TIMEOUT",
    "effective_timeout",
    "statement_timeout",
    "timeout_error",
    "timeout_override",
    "timeout_value",
]

_OVERRIDE: ContextVar[float | None] = ContextVar("ranklock_statement_timeout", default=None)


def effective_timeout(configured: float) -> float:
    """The timeout this search runs under: a replay's logged one, else the configured one."""
    override = _OVERRIDE.get()
    return configured if override is None else override


@contextmanager
def timeout_override(seconds: float | None) -> Iterator[None]:
    """Run the searches of this block (this thread or task only) under ``seconds``."""
    token = _OVERRIDE.set(seconds)
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


#: Sets the limit for the rest of the caller's transaction (``SET LOCAL``); binds the limit as text.
SET_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"


def timeout_value(seconds: float) -> str:
    """The ``statement_timeout`` setting for ``seconds`` (milliseconds, at least 1)."""
    return f"{max(1, round(seconds * 1000))}ms"


def timeout_error(exc: psycopg.errors.QueryCanceled, seconds: float) -> QueryTimeout | None:
    """The QueryTimeout for a statement the limit cancelled; None when something else cancelled it."""
    if "statement timeout" not in str(exc):
        return None  # cancelled for another reason (pg_cancel_backend): not ours to rename
    return QueryTimeout(
        f"the search ran longer than the statement timeout of {seconds:g} s and PostgreSQL cancelled it; "
        "its connection is released. Narrow the query or filter, lower depth or k, or raise the limit "
        "(RANKLOCK_STATEMENT_TIMEOUT, e.g. 60s)."
    )


@contextmanager
def statement_timeout(conn: psycopg.Connection[Any], seconds: float | None) -> Iterator[None]:
    """Limit every statement of the caller's transaction to ``seconds``; a cancelled one raises QueryTimeout.

    ``None`` sets no limit (callers outside a search).  ``AsyncDatabase`` does the same on an async
    connection with :data:`SET_TIMEOUT` and :func:`timeout_error`.
    """
    if seconds is None:
        yield
        return
    conn.execute(SET_TIMEOUT, [timeout_value(seconds)])
    try:
        yield
    except psycopg.errors.QueryCanceled as exc:
        mapped = timeout_error(exc, seconds)
        if mapped is None:
            raise
        raise mapped from exc
