"""After rows were deleted for good: rewrite what still holds their bytes, and retire the WAL that logged them.

A purge (ranklock.snapshot.purge) deletes a document's rows in one
transaction and swaps in rewritten segment tables (ranklock.store.rewrite).
The bytes are still in three places after it commits, and :func:`erase_leftovers`
reaches each where the server lets it:

* the shared catalog tables it deleted rows from (stored versions, document
  lists, logs, caches): each is rewritten with ``VACUUM (FULL, ANALYZE)``,
  which also re-reads its statistics (a short lock each: these tables hold one
  row a document or a log entry, not the chunks);
* ``pg_statistic``: ANALYZE replaced the rows that quoted the text (most
  common values, histogram bounds), and their old versions stay in its heap
  until ``VACUUM FULL pg_statistic`` (a superuser's right);
* the WAL: every segment written before the purge holds the rows as they were
  inserted.  The embedded server runs with ``wal_recycle = off``
  (ranklock.store.server), so a checkpoint deletes old segments instead of
  renaming them for reuse; ``pg_switch_wal`` moves writing to a fresh segment,
  once more for each segment a server recycled before that setting (each
  switch fills the rest of its segment with zeros), and ``CHECKPOINT`` then
  removes every segment before it.

What it cannot reach it says, as sentences for the caller to show: a WAL
archive, base backups and copies, replicas' own files, the file system's free
blocks, and whatever this role is not allowed to do.

>>> erase_leftovers(db, ["ranklock.documents"])     # doctest: +SKIP
Leftovers(rewritten=('ranklock.documents',), wal_removed=3, unreached=('the file system\u2019s free blocks …',))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from .database import Database

__all__ = ["FREE_BLOCKS", "Leftovers", "erase_leftovers"]

#: Always true, on any server: dropping or rewriting a file frees its blocks, it does not overwrite them.
FREE_BLOCKS = (
    "the file system's free blocks: PostgreSQL truncates and unlinks the files it rewrote, it does not "
    "overwrite them, so a forensic read of the disk can find old bytes (full-disk encryption, or wiping "
    "free space, reaches them)"
)
#: Always true: what was copied before the purge is not ranklock's to change.
COPIES = "copies and backups of the data made before the purge (a copied home, a base backup, a dump)"

_SEGMENT = re.compile(r"^[0-9A-F]{24}$")


@dataclass(frozen=True)
class Leftovers:
    """What :func:`erase_leftovers` rewrote and removed, and what it could not reach (sentences)."""

    rewritten: tuple[str, ...]
    wal_removed: int
    unreached: tuple[str, ...]


def erase_leftovers(db: Database, tables: Sequence[str], *, embedded: bool) -> Leftovers:
    """Rewrite ``tables`` (qualified names) and ``pg_statistic``, then retire the WAL; see the module docstring.

    ``embedded``: the server is ranklock's own (its home holds the data directory, and nothing
    but ranklock uses it), as opposed to one reached through ``RANKLOCK_DSN``.
    """
    unreached: list[str] = [FREE_BLOCKS, COPIES]
    with db.connection() as conn:  # autocommit: VACUUM cannot run in a transaction
        info = conn.execute(
            "SELECT r.rolsuper, current_user, current_setting('archive_mode'), current_setting('wal_recycle'), "
            "(SELECT count(*) FROM pg_stat_replication), (SELECT count(*) FROM pg_replication_slots) "
            "FROM pg_roles AS r WHERE r.rolname = current_user"
        ).fetchone()
        superuser, role, archive, recycle, standbys, slots = info if info else (False, "?", "off", "on", 0, 0)
        rewritten = []
        for name in tables:
            schema, _, table = name.partition(".")
            ident = sql.Identifier(schema, table)
            # VACUUM skips a table this role may not maintain with a warning, not an error: asked first.
            if not _may_maintain(conn, ident):
                unreached.append(
                    f"{name}: role {role!r} may not rewrite it (it is not its owner); its owner can "
                    f"(`VACUUM (FULL, ANALYZE) {name}`)"
                )
                continue
            conn.execute(sql.SQL("VACUUM (FULL, ANALYZE) {}").format(ident))
            rewritten.append(name)
            if not _clear_stale_statistics(conn, ident, schema, table, superuser=bool(superuser)):
                unreached.append(
                    f"the statistics of {name}: the purge emptied it, ANALYZE leaves an empty table's statistics as "
                    "they were, and this server (before PostgreSQL 18) lets only a superuser delete them"
                )
        if superuser:
            conn.execute("VACUUM FULL pg_catalog.pg_statistic")
            rewritten.append("pg_catalog.pg_statistic")
        else:
            unreached.append(
                f"pg_statistic's old row versions: role {role!r} is not a superuser, so it cannot rewrite the "
                "catalog; a superuser can (`VACUUM FULL pg_catalog.pg_statistic`)"
            )
        removed, why = 0, None
        if superuser:
            try:
                removed, why = _retire_wal(conn)
            except psycopg.Error as exc:  # a server that refuses a step (a setting, an extension's hook)
                why = f"the server's WAL: it refused to switch segments and checkpoint ({str(exc).strip()[:200]})"
        if not superuser:
            unreached.append(
                f"the server's WAL: role {role!r} may not switch WAL segments and checkpoint; a superuser can "
                "(`SELECT pg_switch_wal(); CHECKPOINT;`)"
            )
        elif why is not None:
            unreached.append(why)
    if archive != "off":
        unreached.append(
            f"the WAL archive (archive_mode = {archive}): the archived segments logged the rows; they last as "
            "long as the archive keeps them"
        )
    if standbys or slots:
        unreached.append(
            f"replicas' own files ({standbys} standby(s) streaming, {slots} replication slot(s)): a standby "
            "replays the rewrite, but its WAL and its disk's free blocks keep the old bytes until it "
            "recycles them; rebuild a standby from a new base backup to be sure"
        )
    if not embedded and recycle != "off":
        unreached.append(
            "WAL segments this server recycled (wal_recycle = on): renamed for reuse, they keep old bytes until "
            "overwritten; `ALTER SYSTEM SET wal_recycle = off` before a purge makes its checkpoint delete them"
        )
    return Leftovers(tuple(rewritten), removed, tuple(unreached))


def _clear_stale_statistics(
    conn: psycopg.Connection[Any], ident: sql.Identifier, schema: str, table: str, *, superuser: bool
) -> bool:
    """ANALYZE of a table with no row keeps its old statistics (its most common values quote the rows just
    deleted): delete them.  Returns False when this server does not let the role."""
    if conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(ident)).fetchone() != (False,):
        return True
    if conn.info.server_version >= 180000:
        conn.execute(
            "SELECT pg_clear_attribute_stats(%s, %s, a.attname, false) FROM pg_attribute AS a "
            "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
            [schema, table, ident.as_string(conn)],
        )
        return True
    if superuser:
        conn.execute("DELETE FROM pg_catalog.pg_statistic WHERE starelid = %s::regclass", [ident.as_string(conn)])
        return True
    return False


def _may_maintain(conn: psycopg.Connection[Any], table: sql.Identifier) -> bool:
    """Whether this role may VACUUM ``table``: a superuser, a member of its owner, or (PostgreSQL 17) MAINTAIN."""
    maintain = "has_table_privilege(c.oid, 'MAINTAIN')" if conn.info.server_version >= 170000 else "false"
    row = conn.execute(
        sql.SQL(
            "SELECT r.rolsuper OR pg_has_role(c.relowner, 'MEMBER') OR {} FROM pg_class AS c, pg_roles AS r "
            "WHERE c.oid = %s::regclass AND r.rolname = current_user"
        ).format(sql.SQL(maintain)),
        [table.as_string(conn)],
    ).fetchone()
    return bool(row and row[0])


def _wal_segments(conn: psycopg.Connection[Any]) -> list[str]:
    return sorted(str(r[0]) for r in conn.execute("SELECT name FROM pg_ls_waldir()") if _SEGMENT.match(str(r[0])))


def _retire_wal(conn: psycopg.Connection[Any]) -> tuple[int, str | None]:
    """Switch past every WAL segment that exists, then checkpoint; return how many were removed, and what stayed."""
    before = _wal_segments(conn)
    row = conn.execute("SELECT pg_walfile_name(pg_current_wal_insert_lsn())").fetchone()
    current = str(row[0]) if row else ""
    # A segment after the current one was recycled: renamed ahead of use, still holding old bytes.
    # Each switch moves writing to the next segment and fills the rest of the one it leaves with
    # zeros; a switch needs a record written since the last one, which the message is.
    for _ in range(1 + sum(1 for name in before if name > current)):
        conn.execute("SELECT pg_logical_emit_message(false, 'ranklock', 'purge')")
        conn.execute("SELECT pg_switch_wal()")
    conn.execute("CHECKPOINT")
    after = _wal_segments(conn)
    row = conn.execute("SELECT pg_walfile_name(pg_current_wal_insert_lsn())").fetchone()
    now = str(row[0]) if row else ""
    kept = [name for name in after if name < now and name in before]
    removed = len([name for name in before if name not in after])
    if not kept:
        return removed, None
    reasons = conn.execute(
        "SELECT current_setting('wal_keep_size'), (SELECT string_agg(slot_name, ', ' ORDER BY slot_name) "
        "FROM pg_replication_slots), current_setting('archive_mode')"
    ).fetchone()
    keep, slots, archive = reasons if reasons else ("0", None, "off")
    return removed, (
        f"{len(kept)} WAL segment(s) from before the purge ({kept[0]} …) that the server keeps: "
        f"wal_keep_size = {keep}, replication slots: {slots or 'none'}, archive_mode = {archive}; they go once "
        "no slot, standby or archiver needs them and the next checkpoint runs"
    )
