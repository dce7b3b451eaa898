"""Database work written once, run by a sync or an async driver ("sans-I/O" steps).

A read path (the search, a collection lookup) is a generator that *yields* what it
wants done and is *sent* the answer; it never touches a connection itself.  The
same generator is then driven by :func:`run_steps` over a :class:`Database`
(psycopg's ``ConnectionPool``) or by ``AsyncDatabase.run`` over psycopg_pool's
``AsyncConnectionPool`` (ranklock.store.async_database).  So the SQL composition,
the completeness count, fusion and the tie-breaks exist once, and ``Engine`` and
``AsyncEngine`` return the same bytes for the same query and snapshot.

Four kinds of step::

    rows = yield Fetch(query, params)                 # list of dict rows ([] for a statement with none)
    a, b = yield Batch((Fetch(q1), Fetch(q2)))         # several statements, one round trip (pipeline mode)
    n = yield Block(count_steps(...), timeout=30.0)    # a sub-generator on one connection, in a transaction
    vec = yield Offload(lambda: emb.embed([q]))        # CPU-bound work: the async driver runs it in a thread

An error raised while running a step is thrown into the generator at its
``yield``, exactly where the sync code would have raised it, so ``try``/``except``
around a step works as it reads.  psycopg itself is built the same way
(``psycopg.generators``): one protocol, two drivers.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import psycopg
from psycopg import sql
from psycopg.rows import dict_row, tuple_row

from .ops import drive
from .timeout import SET_TIMEOUT, statement_timeout, timeout_error, timeout_value

if TYPE_CHECKING:
    from .database import Database

__all__ = ["Batch", "Block", "Fetch", "Offload", "Step", "Steps", "failed_at", "gather", "mark_failed", "run_steps"]

T = TypeVar("T")


@dataclass(frozen=True)
class Fetch:
    """Run one statement; the step's value is its rows (``[]`` when it returns none).

    Inside a :class:`Block` it runs on the block's connection; outside one on a
    connection of its own (autocommit).  ``primary``: on the primary even when
    the path reads a replica (the query log, the caches: a replica cannot write).
    """

    query: sql.Composable | str
    params: Any = None
    #: dict rows (``row["id"]``) or tuples (``row[0]``, what the search statement's readers expect).
    dicts: bool = True
    primary: bool = False


@dataclass(frozen=True)
class Batch:
    """Run ``fetches`` on one connection in one round trip; the step's value is the list of their rows.

    psycopg's pipeline mode sends every statement, then one Sync, then reads every reply: the
    statements run in order as one implicit transaction (one ``set_config(..., true)`` holds for the
    ones after it, an advisory ``xact`` lock until the last), and the first that fails rolls back the
    whole batch and skips the rest.  ``timeout`` (seconds) limits each of them, set by a first
    statement in the same round trip.  Its error is raised with :attr:`BatchError.index`, the failed
    fetch's position, so a caller that runs several reads at once knows whose it was.
    ``primary``: on the primary even when the path reads a replica.
    """

    fetches: tuple[Fetch, ...]
    timeout: float | None = None
    primary: bool = False


@dataclass(frozen=True)
class Block:
    """Run ``steps`` on one connection: in a transaction (a savepoint when nested) unless told not to.

    ``timeout`` (seconds) limits each of its statements (ranklock.store.timeout):
    a cancelled one raises :class:`~ranklock.errors.QueryTimeout`.
    """

    steps: Steps[Any]
    transaction: bool = True
    timeout: float | None = None
    primary: bool = False


@dataclass(frozen=True)
class Offload:
    """Call ``fn`` (CPU-bound: embedding a query); the async driver runs it in a worker thread."""

    fn: Callable[[], Any]


Step = Fetch | Batch | Block | Offload
#: A read path: yields steps, is sent each step's value, returns ``T``.
Steps = Generator[Step, Any, T]


def fetch_on(conn: psycopg.Connection[Any], step: Fetch) -> list[Any]:
    """The rows of ``step`` on ``conn`` (sync)."""
    with conn.cursor(row_factory=dict_row if step.dicts else tuple_row) as cur:
        cur.execute(step.query, step.params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description is not None else []


def failed_at(exc: BaseException) -> int | None:
    """The position in its :class:`Batch` of the fetch whose error ``exc`` is (None: not a batch's)."""
    # The store may have raised a ranklock error from psycopg's (ranklock.store.errors): look behind it too.
    for e in (exc, exc.__cause__):
        index = getattr(e, "ranklock_batch_index", None)
        if isinstance(index, int):
            return index
    return None


def mark_failed(exc: BaseException, cursors: list[Any], first: int) -> BaseException:
    """``exc`` marked with the position of the first of ``cursors[first:]`` that has no result: the one that failed."""
    failed = next((i for i, cur in enumerate(cursors[first:]) if cur.pgresult is None), None)
    exc.ranklock_batch_index = failed  # type: ignore[attr-defined]
    return exc


def batch_on(conn: psycopg.Connection[Any], step: Batch) -> list[list[Any]]:
    """The rows of each of ``step``'s fetches, run in one round trip on ``conn`` (sync)."""
    with ExitStack() as stack:
        cursors = [
            stack.enter_context(conn.cursor(row_factory=dict_row if f.dicts else tuple_row)) for f in step.fetches
        ]
        first = 0
        try:
            with conn.pipeline():
                if step.timeout is not None:
                    first = 1
                    cursors.insert(0, stack.enter_context(conn.cursor()))
                    cursors[0].execute(SET_TIMEOUT, [timeout_value(step.timeout)])
                for cur, f in zip(cursors[first:], step.fetches, strict=True):
                    cur.execute(f.query, f.params)  # type: ignore[arg-type]
        except psycopg.errors.QueryCanceled as exc:
            mapped = None if step.timeout is None else timeout_error(exc, step.timeout)
            raise mark_failed(mapped or exc, cursors, first) from (exc if mapped else None)
        except psycopg.Error as exc:
            raise mark_failed(exc, cursors, first) from None
        return [cur.fetchall() if cur.description is not None else [] for cur in cursors[first:]]


def run_steps(db: Database, steps: Steps[T], *, primary: Database | None = None) -> T:
    """Run ``steps`` on ``db`` (reads) and ``primary`` (steps marked ``primary``; default ``db``)."""
    return _run(db, primary or db, None, steps)


def _run(db: Database, primary: Database, conn: psycopg.Connection[Any] | None, steps: Steps[T]) -> T:
    def do(step: Step) -> Any:
        if isinstance(step, Offload):
            return step.fn()
        target = primary if step.primary else db
        with ExitStack() as stack:
            c = conn if conn is not None else stack.enter_context(target.connection())
            if isinstance(step, Fetch):
                return fetch_on(c, step)
            if isinstance(step, Batch):
                return batch_on(c, step)
            if step.transaction:
                stack.enter_context(c.transaction())
            stack.enter_context(statement_timeout(c, step.timeout))
            return _run(db, primary, c, step.steps)

    return drive(steps, do)


def gather(*children: Steps[Any], timeout: float | None = None) -> Steps[list[Any]]:
    """Run ``children`` side by side, their reads of each round in one :class:`Batch`: one round trip, not one each.

    Like ``asyncio.gather`` for steps: each child runs as it would alone, and their values come
    back in their order.  Each round, the :class:`Fetch` and :class:`Batch` steps the children wait
    on (those without a timeout of their own) travel in one batch per target, the primary's and
    the read node's, in the children's order; any other step (an :class:`Offload`, a
    :class:`Block`) runs alone.  A failed fetch's error is thrown into the child that asked for
    it, which may catch it, as it would alone; the others' reads that the failure rolled back or
    skipped are asked again in the next round.  A child that raises ends the gathering with its
    error, and the others are closed.  ``timeout`` (seconds) limits every statement of the batches.

    >>> rows_a, rows_b = yield from gather(read_a(), read_b())   # doctest: +SKIP
    """
    results: list[Any] = [None] * len(children)
    waiting: dict[int, Step] = {}
    errors: dict[int, BaseException] = {}

    def advance(i: int, value: Any = None) -> None:
        try:
            error = errors.pop(i, None)
            waiting[i] = children[i].throw(error) if error is not None else children[i].send(value)
        except StopIteration as stop:
            waiting.pop(i, None)
            results[i] = stop.value

    def mergeable(step: Step) -> bool:
        return isinstance(step, Fetch) or (isinstance(step, Batch) and step.timeout is None)

    try:
        for i in range(len(children)):
            advance(i)
        while waiting:
            for i, step in [(i, s) for i, s in waiting.items() if not mergeable(s)]:
                try:
                    value = yield step
                except Exception as exc:  # the child decides, as it would alone
                    errors[i] = exc
                    value = None
                advance(i, value)
            groups: dict[bool, list[tuple[int, Step]]] = {}
            for i, step in waiting.items():
                if mergeable(step):
                    groups.setdefault(cast(Fetch | Batch, step).primary, []).append((i, step))
            for primary, group in groups.items():
                fetches: list[Fetch] = []
                spans: list[tuple[int, int, int]] = []  # child, first fetch, fetches
                for i, step in group:
                    own = (step,) if isinstance(step, Fetch) else cast(Batch, step).fetches
                    spans.append((i, len(fetches), len(own)))
                    fetches.extend(own)
                if len(group) == 1 and isinstance(group[0][1], Fetch) and timeout is None:
                    batch: Step = group[0][1]  # one statement: no pipeline needed
                else:
                    batch = Batch(tuple(fetches), timeout=timeout, primary=primary)
                try:
                    value = yield batch
                except Exception as exc:
                    at = 0 if isinstance(batch, Fetch) else failed_at(exc)
                    if at is None:
                        raise
                    i, first, n = next(span for span in spans if span[1] <= at < span[1] + span[2])
                    exc.ranklock_batch_index = at - first  # type: ignore[attr-defined]
                    errors[i] = exc
                    advance(i)
                    continue
                values = [value] if isinstance(batch, Fetch) else value
                for i, first, n in spans:
                    step = waiting[i]
                    advance(i, values[first] if isinstance(step, Fetch) else values[first : first + n])
    finally:
        for i in list(waiting):
            children[i].close()
    return results
