"""One traced cursor: every statement ranklock sends goes through :class:`TracedCursor`.

``Database`` makes its connections (the pool's, the probe's, the
migrations') with a cursor factory derived from this class, so
``conn.execute``, ``cursor.execute``, ``executemany`` and ``COPY`` are all
seen here, whichever module sends them.  Two hooks:

- ``tracer(sql, params)``, called *before* the statement runs (the
  ``Engine(tracer=...)`` hook; tests use it to act at an exact statement);
- ``timer(sql, params, ms, rows)``, called *after* it, with its duration in
  milliseconds and the cursor's row count.  ``RANKLOCK_TRACE=1``
  (``Settings.trace``) installs :func:`stderr_timer`, which prints::

      -- 1.84 ms, 3 rows, params: [12, 'docs']
      SELECT id FROM ranklock.snapshots WHERE ...;

With neither hook set, a statement costs one attribute read more than a
plain psycopg cursor: its text is composed only when someone listens.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import psycopg
from psycopg import sql
from psycopg.abc import Params, Query
from psycopg.copy import Copy, Writer
from psycopg.rows import Row

__all__ = [
    "AsyncTracedCursor",
    "async_cursor_class",
    "Hooks",
    "Timer",
    "TracedCursor",
    "Tracer",
    "cursor_class",
    "stderr_timer",
    "statement_text",
]

#: Called before each statement with its text and parameters.
Tracer = Callable[[str, Any], None]
#: Called after each statement with its text, parameters, milliseconds and row count (-1: none).
Timer = Callable[[str, Any, float, int], None]


@dataclass(frozen=True)
class Hooks:
    """Who listens to a database's statements."""

    tracer: Tracer | None = None
    timer: Timer | None = None


def statement_text(query: Any, context: psycopg.Connection[Any] | psycopg.AsyncConnection[Any] | None) -> str:
    """The SQL text of ``query`` (str, bytes or composed) as the server receives it, before binding."""
    if isinstance(query, str):
        return query
    if isinstance(query, bytes):
        return query.decode("utf-8", "replace")
    if isinstance(query, sql.Composable):
        return query.as_string(context)
    return str(query)


class TracedCursor(psycopg.Cursor[Row]):
    """A psycopg cursor that reports each statement to its class's :class:`Hooks`."""

    hooks: ClassVar[Hooks] = Hooks()

    def execute(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Self:
        hooks = self.hooks
        base: Any = super()  # psycopg's overloads split str and Template queries; both pass through
        if hooks.tracer is None and hooks.timer is None:
            base.execute(query, params, prepare=prepare, binary=binary)
            return self
        text = statement_text(query, self.connection)
        if hooks.tracer is not None:
            hooks.tracer(text, params)
        t0 = time.perf_counter()
        try:
            base.execute(query, params, prepare=prepare, binary=binary)
            return self
        finally:
            if hooks.timer is not None:
                hooks.timer(text, params, (time.perf_counter() - t0) * 1000, self.rowcount)

    def executemany(self, query: Query, params_seq: Iterable[Params], *, returning: bool = False) -> None:
        hooks = self.hooks
        if hooks.tracer is None and hooks.timer is None:
            return super().executemany(query, params_seq, returning=returning)
        text = statement_text(query, self.connection)
        if hooks.tracer is not None:
            hooks.tracer(text, None)
        t0 = time.perf_counter()
        try:
            return super().executemany(query, params_seq, returning=returning)
        finally:
            if hooks.timer is not None:
                hooks.timer(text, None, (time.perf_counter() - t0) * 1000, self.rowcount)

    @contextmanager
    def copy(self, statement: Query, params: Params | None = None, *, writer: Writer | None = None) -> Iterator[Copy]:
        hooks = self.hooks
        text = statement_text(statement, self.connection) if hooks.tracer or hooks.timer else ""
        if hooks.tracer is not None:
            hooks.tracer(text, params)
        t0 = time.perf_counter()
        try:
            with super().copy(statement, params, writer=writer) as cp:
                yield cp
        finally:
            # The rows copied are counted, not printed.
            if hooks.timer is not None:
                hooks.timer(text, params, (time.perf_counter() - t0) * 1000, self.rowcount)


class AsyncTracedCursor(psycopg.AsyncCursor[Row]):
    """The async twin of :class:`TracedCursor` (``AsyncDatabase``): the same hooks around ``execute``.

    ``AsyncEngine`` only reads, one statement at a time, so ``execute`` is the one door it needs.
    """

    hooks: ClassVar[Hooks] = Hooks()

    async def execute(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Self:
        hooks = self.hooks
        base: Any = super()
        if hooks.tracer is None and hooks.timer is None:
            await base.execute(query, params, prepare=prepare, binary=binary)
            return self
        text = statement_text(query, self.connection)
        if hooks.tracer is not None:
            hooks.tracer(text, params)
        t0 = time.perf_counter()
        try:
            await base.execute(query, params, prepare=prepare, binary=binary)
            return self
        finally:
            if hooks.timer is not None:
                hooks.timer(text, params, (time.perf_counter() - t0) * 1000, self.rowcount)


def async_cursor_class(hooks: Hooks) -> type[AsyncTracedCursor[Any]]:
    """An :class:`AsyncTracedCursor` subclass bound to ``hooks`` (one per AsyncDatabase)."""
    return type("AsyncTracedCursor", (AsyncTracedCursor,), {"hooks": hooks})


def cursor_class(hooks: Hooks) -> type[TracedCursor[Any]]:
    """A :class:`TracedCursor` subclass bound to ``hooks`` (one per Database)."""
    return type("TracedCursor", (TracedCursor,), {"hooks": hooks})


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stderr_timer(text: str, params: Any, ms: float, rows: int) -> None:
    """Print a statement, its duration, row count and (shortened) parameters to stderr (``RANKLOCK_TRACE=1``).

    The empty statement the pool sends to check a connection on every checkout is not printed.
    """
    if not text.strip():
        return
    head = f"-- {ms:.2f} ms"
    if rows >= 0:
        head += f", {rows} row{'s' if rows != 1 else ''}"
    if params:
        shown = [_short(p) for p in params] if isinstance(params, (list, tuple)) else [_short(params)]
        head += f", params: [{', '.join(shown)}]"
    sys.stderr.write(f"{head}\n{text.strip()};\n")
