"""Rewriting a table so that the rows deleted from it leave no byte behind: copy and swap.

A DELETE leaves a row's bytes where they were: in its heap page, its TOAST
chunks and every index entry, until the space happens to be reused.  A plain
VACUUM frees that space but does not clear it (the page is compacted, the old
bytes stay in its free space), and a GIN index never removes a key once
written.  ``VACUUM FULL`` rewrites the table, but under an ACCESS EXCLUSIVE
lock for the whole rewrite, index builds included: every search of the
collection would wait for an HNSW build (docs/reliability.md has the figures).

:func:`copy_table` writes a new table beside the old one, in the caller's
transaction, while readers go on reading the old one (the copy takes only
ACCESS SHARE on it), and builds its indexes in bulk; :func:`swap_in` then
swaps all of them in one short step: the old tables are dropped (PostgreSQL
truncates their files at commit and unlinks them at the next checkpoint) and
the new ones and their indexes take the old names.  The swap takes its locks
only at a moment when no reader holds any of the old tables, so it never
waits holding one of them.

>>> copies = [copy_table(conn, "ranklock_data", "chunks_12")]   # doctest: +SKIP
>>> swap_in(conn, copies, lock_wait=300)                          # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ..errors import SnapshotError

__all__ = ["Copy", "copy_table", "swap_in"]

#: The pause between two attempts to lock the old tables.
_SWAP_PAUSE_S = 0.01


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


@dataclass(frozen=True)
class Copy:
    """A table's copy made by :func:`copy_table`, waiting to be swapped in by :func:`swap_in`."""

    schema: str
    name: str
    tmp_name: str
    #: (the copy's index name, the old index's name it takes at the swap)
    renames: tuple[tuple[str, str], ...]


def copy_table(conn: psycopg.Connection[Any], schema: str, name: str) -> Copy:
    """A fresh copy of table ``schema.name``, of its rows as the caller's transaction sees them, analyzed.

    Runs inside the caller's transaction (which should have set the maintenance settings its index
    builds want) and takes only ACCESS SHARE on the old table, so its readers go on.  The copy has the
    old one's columns, defaults, constraints, storage and statistics targets (``LIKE … INCLUDING
    ALL``) and the same indexes, each built once over the copied rows; it is analyzed here, before the
    swap, so the swap's short lock does not wait for ANALYZE.
    """
    old = sql.Identifier(schema, name)
    tmp_name = f"{name}__rw"
    tmp = sql.Identifier(schema, tmp_name)
    # A serial column's sequence belongs to the old table and would go with it at the swap, leaving
    # the copy's default pointing at nothing: refused loudly (an identity column gets its own).
    owned = conn.execute(
        "SELECT string_agg(s.relname, ', ') FROM pg_depend AS d JOIN pg_class AS s ON s.oid = d.objid "
        "WHERE d.refobjid = %s::regclass AND d.deptype = 'a' AND s.relkind = 'S'",
        [old.as_string(conn)],
    ).fetchone()
    if owned and owned[0]:
        raise SnapshotError(
            f"{old.as_string(conn)} owns the sequence(s) {owned[0]}, which a copy and swap cannot keep; "
            "use an identity column (or none) in a segment table."
        )
    conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(tmp, old))
    before, copied = _indexes(conn, old), _indexes(conn, tmp)
    # The copies' names are made up by LIKE: each is matched with the old index of its shape
    # (in creation order, as LIKE copies them), to take the old name after the swap.
    by_shape: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for ix in before:
        by_shape[ix.shape].append(ix.name)
    renames = tuple((ix.name, by_shape[ix.shape].pop(0)) for ix in copied)
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
    conn.execute(sql.SQL("ANALYZE {}").format(tmp))
    return Copy(schema, name, tmp_name, renames)


def swap_in(
    conn: psycopg.Connection[Any], copies: list[Copy], *, also_drop: Sequence[sql.Identifier] = (), lock_wait: float
) -> None:
    """Drop the old tables of ``copies`` (and the tables ``also_drop``) and give the copies (and their
    indexes) the old names.

    Every old table is locked in one statement that does not wait (NOWAIT), retried until no
    reader holds any of them: a swap that held one table while it waited for another could
    wait for a reader that itself waits for the first, and every search queued behind.  The
    caller keeps new readers off first where it can (ranklock.snapshot.purge's read gate).
    Raises :class:`SnapshotError` after ``lock_wait`` seconds of readers.
    """
    olds = [sql.Identifier(c.schema, c.name) for c in copies]
    if not olds and not also_drop:
        return
    _lock_all(conn, [*olds, *also_drop], lock_wait)
    for table in also_drop:
        conn.execute(sql.SQL("DROP TABLE {}").format(table))
    for c, old in zip(copies, olds, strict=True):
        conn.execute(sql.SQL("DROP TABLE {}").format(old))
        conn.execute(
            sql.SQL("ALTER TABLE {} RENAME TO {}").format(sql.Identifier(c.schema, c.tmp_name), sql.Identifier(c.name))
        )
        for made, wanted in c.renames:
            # Renaming the index of a PRIMARY KEY or UNIQUE constraint renames the constraint too.
            conn.execute(
                sql.SQL("ALTER INDEX {} RENAME TO {}").format(sql.Identifier(c.schema, made), sql.Identifier(wanted))
            )


def _catalog_ddl(text: str) -> sql.SQL:
    """DDL the server wrote itself (``pg_get_indexdef``, ``pg_get_constraintdef``) for a table of ours.

    Its names are quoted by the server and it holds no value from outside, so it runs as it is.
    """
    return sql.SQL(text)


def _lock_all(conn: psycopg.Connection[Any], tables: list[sql.Identifier], lock_wait: float) -> None:
    """ACCESS EXCLUSIVE on every one of ``tables``, all or none per attempt (a savepoint each)."""
    deadline = time.monotonic() + lock_wait
    statement = sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE NOWAIT").format(sql.SQL(", ").join(tables))
    while True:
        try:
            with conn.transaction():
                conn.execute(statement)
        except psycopg.errors.LockNotAvailable:
            if time.monotonic() > deadline:
                raise SnapshotError(
                    f"readers held the tables {', '.join(t.as_string(conn) for t in tables)} for more than "
                    f"{lock_wait:g} s without a pause, so their rewrite could not be swapped in; nothing was "
                    "changed. Retry when fewer searches run, or raise RANKLOCK_LOCK_WAIT."
                ) from None
            time.sleep(_SWAP_PAUSE_S)
            continue
        return
