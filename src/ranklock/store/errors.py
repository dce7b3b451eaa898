"""PostgreSQL's refusals of a value, and its lack of resources, mapped to the ranklock error tree in one place.

The edges (loaders, query and filter parsing) validate input so the database
never sees a value it would refuse; this mapping is the backstop for what
they miss.  It covers the *data* errors only: SQLSTATE class 22 (a value out
of range, not encodable, malformed), class 54 (an input too large or too
complex for the server) and psycopg's own client-side refusals (a NUL byte
in a text value).  Connection loss and timeouts are another matter and are
not handled here.

A Citus worker that fails in the middle of a statement (killed, unreachable)
fails the whole statement on the coordinator, never part of it; the error
names the node and becomes :class:`~ranklock.errors.DatabaseUnavailable`
with the fix (:func:`node_error`).

SQLSTATE class 53 (insufficient resources: a full disk, no memory, too many
connections) is not bad input: it maps to
:class:`~ranklock.errors.InsufficientResources` (HTTP 503, exit 2), and a full
disk names the file PostgreSQL could not write, where it lies on this machine
(a tablespace's link resolved), and the fix (:func:`resource_error`).

Which class is raised depends on what was running: a search maps to
:class:`~ranklock.errors.QueryError`, an ingest to
:class:`~ranklock.errors.IngestError` (see :func:`refusals_as`); anything
else to :class:`~ranklock.errors.InputError`::

    with refusals_as(QueryError):
        db.fetchall(...)          # NumericValueOutOfRange -> QueryError("... out of range ...")
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import psycopg

from ..errors import DatabaseUnavailable, InputError, InsufficientResources

__all__ = ["data_error", "first_line", "map_data_errors", "node_error", "refusals_as", "resource_error"]

_ERROR_CLASS: ContextVar[type[InputError]] = ContextVar("ranklock_refusal_class", default=InputError)

# (SQLSTATE prefix, what happened, the fix); the first matching prefix wins.
_EXPLAINED: tuple[tuple[str, str, str], ...] = (
    (
        "22003",
        "a number is out of range for its database type",
        "use a smaller value (integers are 64-bit: -9223372036854775808 to 9223372036854775807)",
    ),
    (
        "22021",
        "a text value holds a byte sequence that is not valid UTF-8",
        "re-encode the input as UTF-8",
    ),
    (
        "22P05",
        "a text value holds a character PostgreSQL cannot store (a NUL byte, \\u0000)",
        "remove the NUL characters from the input",
    ),
    ("22P02", "a value has the wrong form for its type", "fix the value"),
    ("22007", "a date or timestamp has the wrong form", "write it in ISO 8601, e.g. 2026-01-31T12:00:00Z"),
    ("22008", "a date or timestamp is out of range", "use a date between the years 1 and 9999"),
    ("22023", "a parameter value is invalid", "fix the parameter"),
    ("22", "the database refused a value", "fix the value"),
    ("54", "the input is too large or too complex for the database", "shorten or simplify it"),
)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (psycopg's carry DETAIL and HINT lines after it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def data_error(exc: psycopg.Error) -> InputError | None:
    """The ranklock error for a psycopg data error, or None when ``exc`` is not one."""
    cls = _ERROR_CLASS.get()
    state = exc.sqlstate or ""
    if not state:
        # psycopg's own refusal, before anything reached the server.
        if isinstance(exc, psycopg.DataError) and "NUL" in str(exc):
            return cls(
                "a text value contains a NUL byte (\\u0000), which PostgreSQL cannot store; "
                "remove the NUL characters from the input."
            )
        if isinstance(exc, psycopg.DataError):
            return cls(f"the database driver refused a value ({first_line(exc)}); fix the value.")
        return None
    for prefix, what, fix in _EXPLAINED:
        if state.startswith(prefix):
            return cls(f"{what} (PostgreSQL {state}: {first_line(exc)}); {fix}.")
    return None


# PostgreSQL names the file it failed to write relative to its data directory:
# `could not extend file "base/16384/16397": No space left on device`.
_QUOTED_FILE = re.compile(r'file "([^"]+)"')


def _on_disk(relative: str, data_directory: str | None) -> str:
    """Where the file PostgreSQL named lies: under the data directory, a tablespace's link followed."""
    if os.path.isabs(relative) or data_directory is None:
        return relative
    path = os.path.join(data_directory, relative)
    # A tablespace is a link under pg_tblspc; the full disk is the one the link points to.
    return os.path.realpath(path) if os.path.exists(os.path.dirname(path)) else path


def resource_error(exc: psycopg.Error, data_directory: str | None = None) -> InsufficientResources | None:
    """The ranklock error for SQLSTATE class 53 (insufficient resources), or None for any other error.

    ``data_directory`` (the server's, when known) turns the relative file name
    of a full disk into a path on this machine.
    """
    state = exc.sqlstate or ""
    if not state.startswith("53"):
        return None
    first = first_line(exc)
    if state == "53100":
        m = _QUOTED_FILE.search(str(exc))
        where = f" writing {_on_disk(m.group(1), data_directory)}" if m else ""
        disk = os.path.dirname(_on_disk(m.group(1), data_directory)) if m else data_directory
        free = (
            f"Free space on the file system that holds {disk} (`df -h {disk}`)"
            if disk
            else "Free space on the database server's disk"
        )
        return InsufficientResources(
            f"the database server's disk is full: no space left on device{where} (PostgreSQL {state}: {first}). "
            f"Nothing of this operation was stored. {free}, or move the data to a larger disk, then run the "
            "command again; do not delete the data directory: it holds every collection."
        )
    if state == "53200":
        return InsufficientResources(
            f"the database server ran out of memory (PostgreSQL {state}: {first}). Nothing of this operation "
            "was stored. Lower k, depth or the number of concurrent requests, or give the server more memory "
            "(work_mem, maintenance_work_mem, the machine's RAM)."
        )
    if state == "53300":
        return InsufficientResources(
            f"the database server refused the connection: it has too many clients (PostgreSQL {state}: {first}). "
            "Retry when fewer clients are connected, or raise the server's max_connections."
        )
    return InsufficientResources(
        f"the database server reached one of its configured limits (PostgreSQL {state}: {first}). Nothing of this "
        "operation was stored. Raise the limit the message names in the server's configuration, or make the "
        "operation smaller."
    )


# How Citus names the node it lost: "connection to the remote node 127.0.0.1:9701 failed with the following
# error: ...", "failure on connection marked as essential: 127.0.0.1:9701".
_CITUS_NODE = re.compile(r"(?:remote node|connection marked as essential:)\s*([^\s:,]+:\d+)")


def node_error(exc: psycopg.Error) -> DatabaseUnavailable | None:
    """The ranklock error for a Citus node that failed during the statement, or None when ``exc`` is not one."""
    m = _CITUS_NODE.search(str(exc))
    if m is None:
        return None
    return DatabaseUnavailable(
        f"the Citus node {m.group(1)} failed during the statement ({first_line(exc)}): nothing was answered "
        "in part and nothing of this operation was stored. Start the node (`ranklock db cluster start` for "
        "a local cluster) or fail it over to its replica, then run the command again."
    )


@contextmanager
def map_data_errors(data_directory: str | None = None) -> Iterator[None]:
    """Turn psycopg data errors (and class 53) raised inside the block into ranklock errors; let others through."""
    try:
        yield
    except psycopg.Error as exc:
        mapped: Exception | None = data_error(exc) or resource_error(exc, data_directory) or node_error(exc)
        if mapped is None:
            raise
        raise mapped from exc
    except UnicodeEncodeError as exc:
        # A lone surrogate (from a JSON "\ud800" escape or undecodable argv) cannot be sent as UTF-8.
        raise _ERROR_CLASS.get()(
            f"a text value holds {exc.object[exc.start : exc.end]!r}, which is not valid Unicode text "
            "(a lone surrogate); remove it or fix the input's encoding."
        ) from exc


@contextmanager
def refusals_as(cls: type[InputError]) -> Iterator[None]:
    """Map the data errors of the block (and of every Database call in it) to ``cls``."""
    token = _ERROR_CLASS.set(cls)
    try:
        with map_data_errors():
            yield
    finally:
        _ERROR_CLASS.reset(token)
