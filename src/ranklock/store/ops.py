"""Running a generator of operations, blocking or awaited: the one driver below the store's algorithms.

The read paths (ranklock.store.steps), the connection checkout (ranklock.store.checkout)
and the recovery (ranklock.store.recovery) are generators that yield the
operations they need and are sent each result.  :func:`drive` performs them
with blocking calls (``Database``), :func:`adrive` with awaits
(``AsyncDatabase``).  An operation's exception is thrown back in where it was
asked, so the algorithm handles it in one place for both.  It sits below
``database`` and ``steps`` so that both can import it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["adrive", "drive"]

T = TypeVar("T")
#: An operation the generator yields: a read step, a checkout or a recovery operation.
Op = TypeVar("Op")


def drive(steps: Generator[Op, Any, T], do: Callable[[Op], Any]) -> T:
    """Run ``steps`` to the end with ``do`` (one step -> its value); errors are thrown back in."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = do(step)
        except Exception as exc:  # the generator decides: it catches it at its yield, or it propagates
            error = exc


async def adrive(steps: Generator[Op, Any, T], do: Callable[[Op], Awaitable[Any]]) -> T:
    """:func:`drive` with awaited operations (the async database)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await do(step)
        except Exception as exc:
            error = exc
