"""Rewriting a table so that the rows deleted from it leave no byte behind: copy and swap.

A DELETE leaves a row's bytes where they were: in its heap page, its TOAST
chunks and every index entry, until the space happens to be reused.  A plain
VACUUM frees that space but does not clear it (the page is compacted, the old
bytes stay in its free space), and a GIN index never removes a key once
written.  ``VACUUM FULL`` rewrites the table, but under an ACCESS EXCLUSIVE
lock for the whole rewrite, index builds included: every search of the
collection would wait for an HNSW build (docs/reliability.md has the figures).

:func:`copy_and_swap` writes a new table beside the old one, in the caller's
transaction, while readers go on reading the old one (the copy takes only
ACCESS SHARE on it); builds its indexes in bulk; and then swaps in one short
step: the old table is dropped (PostgreSQL truncates its files at commit and
unlinks them at the next checkpoint) and the new one and its indexes take the
old names.  The swap waits for a moment when no reader holds the old table,
in bounded attempts, so a queued swap never holds readers back for long.

>>> copy_and_swap(conn, "ranklock_data", "chunks_12")   # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ..errors import SnapshotError

__all__ = ["copy_and_swap"]

#: How long one attempt of the swap waits for the readers of the old table: the longest a search that
#: starts meanwhile can be held back by the queued swap.
SWAP_ATTEMPT_MS = 200
#: The pause between two attempts, so the readers that queued behind one get through.
_SWAP_PAUSE_S = 0.05


@dataclass(frozen=True)
class _Index:
    """One index of a table, as the catalog describes it."""

    name: str
    #: Everything that defines it but its name and table: what ``LIKE … INCLUDING INDEXES`` copies.
    shape: tuple[Any, ...]
    definition: str
    constraint: str | None
    constraint_def: str | None


def _indexes(conn: psycopg.Connection[Any], table: sql.Identifier) -> list[_Index]:
    rows = conn.execute(
        "SELECT c.relname, i.indisunique, i.indisprimary, a.amname, i.indkey::text, i.indclass::text, "
        "i.indoption::text, i.indcollation::text, pg_get_expr(i.indexprs, i.indrelid), "
        "pg_get_expr(i.indpred, i.indrelid), c.reloptions::text, pg_get_indexdef(i.indexrelid), con.conname, "
        "pg_get_constraintdef(con.oid) FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
        "JOIN pg_am AS a ON a.oid = c.relam LEFT JOIN pg_constraint AS con ON con.conindid = i.indexrelid "
        "AND con.conrelid = i.indrelid WHERE i.indrelid = %s::regclass ORDER BY i.indexrelid",
        [table.as_string(conn)],
    ).fetchall()
    return [_Index(r[0], tuple(r[1:11]), r[11], r[12], r[13]) for r in rows]


def copy_and_swap(conn: psycopg.Connection[Any], schema: str, name: str, *, lock_wait: float = 300.0) -> None:
    """Replace table ``schema.name`` by a fresh copy of its rows as the caller's transaction sees them.

    Runs inside the caller's transaction (which should have set the
    maintenance settings its index builds want).  The new table has the old
    one's columns, defaults, constraints, storage and statistics targets
    (``LIKE … INCLUDING ALL``) and the same indexes, under the same names,
    each built once over the copied rows.  Raises :class:`SnapshotError` when
    readers kept the old table for longer than ``lock_wait`` seconds.
    """
    old = sql.Identifier(schema, name)
    tmp_name = f"{name}__rw"
    tmp = sql.Identifier(schema, tmp_name)
    conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(tmp, old))
    before, copied = _indexes(conn, old), _indexes(conn, tmp)
    # The copies' names are made up by LIKE: each is matched with the old index of its shape
    # (in creation order, as LIKE copies them), to take the old name after the swap.
    by_shape: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for ix in before:
        by_shape[ix.shape].append(ix.name)
    renames = [(ix.name, by_shape[ix.shape].pop(0)) for ix in copied]
    # Empty indexes would be filled row by row, many times slower than a build over the whole
    # table (an HNSW graph above all): drop them, copy, and build them again from their own
    # definitions (the server's text for this very table, so no name is rewritten by hand).
    for ix in copied:
        if ix.constraint is not None:
            conn.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(tmp, sql.Identifier(ix.constraint)))
        else:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, ix.name)))
    conn.execute(sql.SQL("INSERT INTO {} OVERRIDING SYSTEM VALUE SELECT * FROM {}").format(tmp, old))
    for ix in copied:
        if ix.constraint is not None and ix.constraint_def is not None:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                    tmp, sql.Identifier(ix.constraint), _catalog_ddl(ix.constraint_def)
                )
            )
        else:
            conn.execute(_catalog_ddl(ix.definition))
    _lock_for_swap(conn, old, lock_wait)
    conn.execute(sql.SQL("DROP TABLE {}").format(old))
    conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(tmp, sql.Identifier(name)))
    for made, wanted in renames:
        # Renaming the index of a PRIMARY KEY or UNIQUE constraint renames the constraint too.
        conn.execute(
            sql.SQL("ALTER INDEX {} RENAME TO {}").format(sql.Identifier(schema, made), sql.Identifier(wanted))
        )


def _catalog_ddl(text: str) -> sql.SQL:
    """DDL the server wrote itself (``pg_get_indexdef``, ``pg_get_constraintdef``) for a table of ours.

    Its names are quoted by the server and it holds no value from outside, so it runs as it is.
    """
    return sql.SQL(text)


def _lock_for_swap(conn: psycopg.Connection[Any], table: sql.Identifier, lock_wait: float) -> None:
    """Take ACCESS EXCLUSIVE on ``table`` in short attempts (a savepoint each), at most ``lock_wait`` seconds."""
    deadline = time.monotonic() + lock_wait
    row = conn.execute("SELECT current_setting('lock_timeout')").fetchone()
    before = str(row[0]) if row else "0"
    while True:
        try:
            with conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", [f"{SWAP_ATTEMPT_MS}ms"])
                conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
            if time.monotonic() > deadline:
                raise SnapshotError(
                    f"readers held {table.as_string(conn)} for more than {lock_wait:g} s without a pause, so its "
                    "rewrite could not be swapped in; nothing was changed. Retry when fewer searches run, or raise "
                    "RANKLOCK_LOCK_WAIT."
                ) from None
            time.sleep(_SWAP_PAUSE_S)
            continue
        conn.execute("SELECT set_config('lock_timeout', %s, true)", [before])
        return
