"""Database work written once, run by a sync or an async driver ("sans-I/O" steps).

A read path (the search, a collection lookup) is a generator that *yields* what it
wants done and is *sent* the answer; it never touches a connection itself.  The
same generator is then driven by :func:`run_steps` over a :class:`Database`
(psycopg's ``ConnectionPool``) or by ``AsyncDatabase.run`` over psycopg_pool's
``AsyncConnectionPool`` (ranklock.store.async_database).  So the SQL composition,
the completeness count, fusion and the tie-breaks exist once, and ``Engine`` and
``AsyncEngine`` return the same bytes for the same query and snapshot.

Three kinds of step::

    rows = yield Fetch(query, params)                 # list of dict rows ([] for a statement with none)
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
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg import sql
from psycopg.rows import dict_row, tuple_row

from .ops import drive
from .timeout import statement_timeout

if TYPE_CHECKING:
    import psycopg

    from .database import Database

__all__ = ["Block", "Fetch", "Offload", "Step", "Steps", "run_steps"]

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


Step = Fetch | Block | Offload
#: A read path: yields steps, is sent each step's value, returns ``T``.
Steps = Generator[Step, Any, T]


def fetch_on(conn: psycopg.Connection[Any], step: Fetch) -> list[Any]:
    """The rows of ``step`` on ``conn`` (sync)."""
    with conn.cursor(row_factory=dict_row if step.dicts else tuple_row) as cur:
        cur.execute(step.query, step.params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description is not None else []


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
            if step.transaction:
                stack.enter_context(c.transaction())
            stack.enter_context(statement_timeout(c, step.timeout))
            return _run(db, primary, c, step.steps)

    return drive(steps, do)
