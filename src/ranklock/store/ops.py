"""Running a generator of operations: the one driver of the algorithms written once for both databases.

An algorithm (the checkout of ranklock.store.checkout, the recovery of
ranklock.store.recovery) yields the operations it needs and receives their
results; ``Database`` performs each with a blocking call (:func:`run_ops`),
``AsyncDatabase`` with an await (:func:`arun_ops`).  An operation's exception
is thrown back into the algorithm where it asked, so it handles a refused
connection in one place for both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["arun_ops", "run_ops"]

Op = TypeVar("Op")


def run_ops(steps: Generator[Op, Any, Any], do: Callable[[Op], Any]) -> Any:
    """Run the algorithm with blocking operations; an operation's exception goes back in where it was asked."""
    reply: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = steps.send(reply) if failure is None else steps.throw(failure)
        except StopIteration as stop:
            return stop.value
        try:
            reply, failure = do(op), None
        except Exception as exc:
            reply, failure = None, exc


async def arun_ops(steps: Generator[Op, Any, Any], do: Callable[[Op], Awaitable[Any]]) -> Any:
    """:func:`run_ops` with awaited operations (the async database)."""
    reply: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = steps.send(reply) if failure is None else steps.throw(failure)
        except StopIteration as stop:
            return stop.value
        try:
            reply, failure = await do(op), None
        except Exception as exc:
            reply, failure = None, exc
