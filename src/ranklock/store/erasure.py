"""After rows were deleted for good: rewrite what still holds their bytes, check it, and retire the WAL that logged them.

A purge (ranklock.snapshot.purge) deletes a document's rows in one
transaction and swaps in rewritten segment tables (ranklock.store.rewrite).
The bytes are still in three places after it commits, and :func:`erase_leftovers`
reaches each where the server lets it, on the server and on every Citus worker it reaches:

* the shared catalog tables it deleted rows from (stored versions, document
  lists, logs, caches): each is rewritten with ``VACUUM (FULL, ANALYZE)``,
  which also re-reads its statistics (a short lock each: these tables hold one
  row a document or a log entry, not the chunks);
* ``pg_statistic``: ANALYZE replaced the rows that quoted the text (most
  common values, histogram bounds), and their old versions stay in its heap
  until ``VACUUM FULL pg_statistic`` (a superuser's right);
* the WAL: every segment written before the purge holds the rows as they were
  inserted.  ranklock's own servers run with ``wal_recycle = off`` (the embedded
  one from its start, a local cluster's nodes from their first purge), so a
  checkpoint deletes old segments instead of renaming them for reuse;
  ``pg_switch_wal`` moves writing to a fresh segment, once more for each segment
  a server recycled before that setting (each switch fills the rest of its segment
  with zeros), and ``CHECKPOINT`` then removes every segment before it.

A rewrite copies every row some snapshot can still see, the deleted ones too: before each
rewrite it waits, at most ``wait`` seconds in all, until nothing holds the server's xmin horizon
behind the deletions (older sessions, replicas' feedback, prepared transactions:
ranklock.store.horizon), and after the rewrite and the checkpoint it reads the rewritten tables'
files for the purged ids and words (ranklock.store.residue).  What it still finds is
``remaining``, one sentence a table with who held the rows: the purge is then not finished.

What it cannot reach it says, as sentences for the caller to show: a WAL
archive, base backups and copies, replicas' own files, the file system's free
blocks, a worker it cannot connect to, and whatever this role is not allowed to do.

>>> erase_leftovers(db, Erasure(["ranklock.documents"], before=812, needles=["victim-zq81"]))   # doctest: +SKIP
Leftovers(rewritten=('ranklock.documents', 'pg_catalog.pg_statistic'), wal_removed=3, unreached=(…), remaining=())
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from .database import Database
from .horizon import Horizon, next_xid, wait_for_horizon
from .residue import find_residue, may_read_files, shard_tables

__all__ = ["COPIES", "FREE_BLOCKS", "Erasure", "Leftovers", "erase_leftovers"]

#: Always true, on any server: dropping or rewriting a file frees its blocks, it does not overwrite them.
FREE_BLOCKS = (
    "the file system's free blocks: PostgreSQL truncates and unlinks the files it rewrote, it does not "
    "overwrite them, so a forensic read of the disk can find old bytes (full-disk encryption, or wiping "
    "free space, reaches them)"
)
#: Always true: what was copied before the purge is not ranklock's to change.
COPIES = "copies and backups of the data made before the purge (a copied home, a base backup, a dump)"

_SEGMENT = re.compile(r"^[0-9A-F]{24}$")
#: Seconds to connect to a Citus worker: one that does not answer in that time is named as not reached.
_WORKER_CONNECT_S = 5
#: After ``wal_recycle`` is turned off with a reload, the time the checkpointer gets to read it (a reload is
#: asynchronous: the postmaster passes the signal on).
_RELOAD_S = 0.3
#: The least a rewrite waits for its table's lock, even past the purge's wait: a search holds one for milliseconds.
_MIN_LOCK_WAIT_S = 2.0


@dataclass(frozen=True)
class Erasure:
    """What :func:`erase_leftovers` is asked to do.

    ``tables``: the shared tables to rewrite (``schema.name``); ``distributed``: Citus tables to rewrite
    (their shards, on the workers); ``scan``: the tables among them whose files to check (those that
    hold text: an embedding cache holds vectors, where a byte scan only meets chance matches);
    ``before``: the rows were deleted by transactions older than this xid8 (the purge's own, plus one);
    ``needles``: what the check looks for (ranklock.store.residue.needles); ``owned``: the servers are
    ranklock's own (the embedded one, a home's local cluster), so it may turn their ``wal_recycle`` off;
    ``wait``: the longest it waits, in all, for what holds the rows (ranklock.store.horizon); ``nudges``:
    how to make a local standby report its position at once, by its slot.
    """

    tables: Sequence[str]
    before: int
    needles: Sequence[str] = ()
    distributed: Sequence[str] = ()
    scan: Sequence[str] | None = None
    owned: bool = False
    wait: float = 60.0
    nudges: Mapping[str, Callable[[], None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Leftovers:
    """What :func:`erase_leftovers` rewrote and removed, what it could not reach, and what it found left (sentences).

    ``remaining`` empty means the check found no byte of the rows in the rewritten tables; ``checked``
    says whether the check ran at all (it needs to read the server's files).
    """

    rewritten: tuple[str, ...]
    wal_removed: int
    unreached: tuple[str, ...]
    remaining: tuple[str, ...] = ()
    checked: bool = False
    waited_s: float = 0.0


@dataclass
class _Node:
    """One server the erasure works on: the one it is connected to, or a Citus worker."""

    label: str
    conn: psycopg.Connection[Any]
    before: int
    worker: bool = False
    holders: list[str] = field(default_factory=list)


def erase_leftovers(db: Database, req: Erasure) -> Leftovers:
    """Rewrite, wait, retire the WAL and check, on the server and each Citus worker; see the module docstring."""
    unreached: list[str] = [FREE_BLOCKS, COPIES]
    deadline = time.monotonic() + req.wait
    waited = 0.0
    missed: list[str] = []
    with (
        db.connection() as conn,
        _workers(conn, db.dsn, missed) as workers,
    ):  # autocommit: VACUUM cannot run in a transaction
        info = conn.execute(
            "SELECT r.rolsuper, current_user, current_setting('archive_mode'), current_setting('wal_recycle'), "
            "(SELECT count(*) FROM pg_stat_replication), (SELECT count(*) FROM pg_replication_slots) "
            "FROM pg_roles AS r WHERE r.rolname = current_user"
        ).fetchone()
        superuser, role, archive, recycle, standbys, slots = info if info else (False, "?", "off", "on", 0, 0)
        here = _Node("this server", conn, req.before)
        nodes = [here, *workers]
        # The rows the purge deleted: no snapshot may still see them when their tables are rewritten.
        waited += _wait(nodes, deadline, req.nudges, catalog=False)
        rewritten: list[str] = []
        # A worker it could not reach may hold the rows in its shards, statistics and WAL: not finished.
        remaining: list[str] = list(missed)
        #: Tables (``name``, or ``name on worker …``) whose rewrite did not get its lock: said once, not checked.
        skip: set[str] = set()
        for name in [*req.tables, *req.distributed]:
            schema, _, table = name.partition(".")
            ident = sql.Identifier(schema, table)
            # VACUUM skips a table this role may not maintain with a warning, not an error: asked first.
            if not _may_maintain(conn, ident):
                unreached.append(
                    f"{name}: role {role!r} may not rewrite it (it is not its owner); its owner can "
                    f"(`VACUUM (FULL, ANALYZE) {name}`)"
                )
                continue
            failed = _rewrite(here, sql.SQL("VACUUM (FULL, ANALYZE) {}").format(ident), name, deadline)
            if failed is not None:
                remaining.append(failed)
                skip.add(name)
                continue
            rewritten.append(name)
            # A Citus table's rows are in its shards: the coordinator's own table is empty, and its statistics
            # are what ANALYZE saw before the rows were distributed (the text included), kept since.
            shell = name in req.distributed
            if not _clear_stale_statistics(conn, ident, schema, table, superuser=bool(superuser), shell=shell):
                unreached.append(
                    f"the statistics of {name}: the purge emptied it, ANALYZE leaves an empty table's statistics as "
                    "they were, and this server (before PostgreSQL 18) lets only a superuser delete them"
                )
        if superuser:
            # The ANALYZEs above deleted the statistics rows that quoted the text: the same wait, for them.
            for node in nodes:
                node.before = next_xid(node.conn)
            waited += _wait(nodes, deadline, req.nudges, catalog=True)
            for node in nodes:
                failed = _rewrite(
                    node, sql.SQL("VACUUM FULL pg_catalog.pg_statistic"), "pg_catalog.pg_statistic", deadline
                )
                if failed is not None:
                    remaining.append(failed)
                    skip.add("pg_catalog.pg_statistic" + ("" if not node.worker else f" on {node.label}"))
                else:
                    rewritten.append("pg_catalog.pg_statistic" + ("" if not node.worker else f" on {node.label}"))
        else:
            unreached.append(
                f"pg_statistic's old row versions: role {role!r} is not a superuser, so it cannot rewrite the "
                "catalog; a superuser can (`VACUUM FULL pg_catalog.pg_statistic`)"
            )
        removed = 0
        if superuser:
            for node in nodes:
                got, why = _retire(node, owned=req.owned, deadline=deadline)
                removed += got
                if why is not None:
                    unreached.append(why)
        else:
            unreached.append(
                f"the server's WAL: role {role!r} may not switch WAL segments and checkpoint; a superuser can "
                "(`SELECT pg_switch_wal(); CHECKPOINT;`)"
            )
        left, checked = _check(nodes, req, superuser=bool(superuser), role=str(role), unreached=unreached, skip=skip)
        remaining += left
    if archive != "off":
        unreached.append(
            f"the WAL archive (archive_mode = {archive}): the archived segments logged the rows; they last as "
            "long as the archive keeps them"
        )
    if standbys or slots:
        unreached.append(
            f"replicas' own files ({standbys} standby(s) streaming, {slots} replication slot(s)): a standby "
            "replays the rewrite, but its WAL and its disk's free blocks keep the old bytes until its next "
            "restartpoint recycles them; rebuild a standby from a new base backup to be sure"
        )
    if not req.owned and recycle != "off":
        unreached.append(
            "WAL segments this server recycled (wal_recycle = on): renamed for reuse, they keep old bytes until "
            "overwritten; `ALTER SYSTEM SET wal_recycle = off` before a purge makes its checkpoint delete them"
        )
    return Leftovers(tuple(rewritten), removed, tuple(unreached), tuple(remaining), checked, round(waited, 3))


def _rewrite(node: _Node, statement: sql.SQL | sql.Composed, name: str, deadline: float) -> str | None:
    """Run a ``VACUUM FULL`` on ``node``, waiting for its table's lock at most until ``deadline`` (and 2 s at least);
    None when done, else a sentence naming the sessions that held the table.

    Bounded because a rewrite waiting for its lock queues every later reader and writer of the table
    behind it (a search's log write, for one), and a ``pg_dump`` holds its tables until it ends.
    """
    conn = node.conn
    wait_ms = int(max(_MIN_LOCK_WAIT_S, deadline - time.monotonic()) * 1000)
    conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(wait_ms)))
    try:
        conn.execute(statement)
        return None
    except psycopg.errors.LockNotAvailable:
        rows = conn.execute(
            "SELECT a.pid, a.usename, a.application_name, a.state, to_char(a.xact_start, 'YYYY-MM-DD HH24:MI:SS TZ') "
            "FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid WHERE l.relation = to_regclass(%s) "
            "AND l.granted AND l.pid <> pg_backend_pid() ORDER BY a.pid",
            [name],
        ).fetchall()
        held = "; ".join(
            f"session pid {pid} (user {user!r}, application {app!r}, {state}, transaction open since {since})"
            for pid, user, app, state, since in rows
        )
        where = "" if not node.worker else f" on {node.label}"
        return (
            f"{name}{where} was not rewritten: it stayed locked for {wait_ms / 1000:.1f} s by "
            f"{held or 'sessions that ended since'}, so its files keep the rows' bytes"
        )
    except psycopg.Error as exc:  # a distributed table whose worker is down, a server that refuses the step
        where = "" if not node.worker else f" on {node.label}"
        return f"{name}{where} was not rewritten: {str(exc).strip().splitlines()[0][:200]}"
    finally:
        conn.execute("RESET lock_timeout")


def _wait(nodes: list[_Node], deadline: float, nudges: Mapping[str, Callable[[], None]], *, catalog: bool) -> float:
    """Wait on every node, within one deadline, for what holds rows deleted before its ``before``; seconds waited."""
    waited = 0.0
    for node in nodes:
        got: Horizon = wait_for_horizon(
            node.conn,
            node.before,
            timeout=max(0.0, deadline - time.monotonic()),
            catalog=catalog,
            # A local standby streams from the home's embedded server, never from a worker.
            nudges=None if node.worker else nudges,
        )
        waited += got.waited_s
        node.holders += [h for h in got.holders if h not in node.holders]
    return waited


def _check(
    nodes: list[_Node], req: Erasure, *, superuser: bool, role: str, unreached: list[str], skip: set[str]
) -> tuple[list[str], bool]:
    """Read the rewritten tables' files on every node for the needles: the sentences of what is left, and whether
    the check ran.  ``skip``: tables said not rewritten already (``name`` or ``name on worker …``)."""
    scan = list(req.tables if req.scan is None else req.scan)
    if not req.needles:
        return [], False
    if not superuser or not may_read_files(nodes[0].conn):
        unreached.append(
            f"the check of the rewritten files: role {role!r} may not read the server's files (a superuser or a "
            "member of pg_read_server_files can), so nothing said the bytes are gone but the rewrite itself"
        )
        return [], False
    remaining: list[str] = []
    unsure: list[str] = []
    for node in nodes:
        tables = (shard_tables(node.conn, req.distributed) if node.worker else scan) + ["pg_catalog.pg_statistic"]
        residue = find_residue(node.conn, tables, req.needles)
        where = "" if not node.worker else f" on {node.label}"
        found = {t: f for t, f in residue.found.items() if f"{t}{where}" not in skip}
        for table, words in found.items():
            remaining.append(
                f"{table}{where} still holds {len(words)} of the purged ids and words in its files: row versions "
                "the rewrite had to keep"
            )
        if found:
            remaining.append(
                f"what held them{where}: "
                + ("; ".join(node.holders) if node.holders else "nothing the server's views showed (run it again)")
            )
        unsure += [f"{table}{where}" for table in residue.unsure]
    if unsure:
        unreached.append(
            "where live rows hold some of the purged ids or words too (another collection's document with the same "
            "id, a field name, a longer word), the files could not tell their bytes from those rows': "
            + ", ".join(unsure)
        )
    return remaining, True


@contextlib.contextmanager
def _workers(conn: psycopg.Connection[Any], dsn: str, missed: list[str]) -> Iterator[list[_Node]]:
    """A connection to each Citus worker of this coordinator (none on a server without Citus), closed after.

    A worker is reached with the coordinator's own connection parameters (``dsn``: user, password, TLS) at
    the host and port the coordinator's metadata gives; one that cannot be reached is named in ``missed``.
    """
    rows: list[tuple[Any, ...]] = []
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
        rows = conn.execute(
            "SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0 ORDER BY groupid"
        ).fetchall()
    params = {k: v for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items() if k not in ("host", "hostaddr", "port")}
    out: list[_Node] = []
    try:
        for host, port in rows:
            label = f"worker {host}:{port}"
            try:
                wconn = psycopg.connect(
                    psycopg.conninfo.make_conninfo(
                        "", **{**params, "host": str(host), "port": str(port), "connect_timeout": _WORKER_CONNECT_S}
                    ),
                    autocommit=True,
                )
            except psycopg.Error as exc:
                missed.append(
                    f"{label}: ranklock could not connect to it ({str(exc).strip().splitlines()[-1][:200]}), so its "
                    "shards, its statistics and its WAL were not rewritten or checked; run the same purge again "
                    "once it answers"
                )
                continue
            out.append(_Node(label, wconn, next_xid(wconn), worker=True))
        yield out
    finally:
        for node in out:
            node.conn.close()


def _retire(node: _Node, *, owned: bool, deadline: float) -> tuple[int, str | None]:
    """Turn ``wal_recycle`` off on a server of ranklock's own, then retire its WAL; what was removed and what stayed."""
    conn = node.conn
    where = "" if not node.worker else f" of {node.label}"
    try:
        if owned:
            row = conn.execute("SHOW wal_recycle").fetchone()
            if row is not None and row[0] != "off":
                conn.execute("ALTER SYSTEM SET wal_recycle = off")
                conn.execute("SELECT pg_reload_conf()")
                time.sleep(_RELOAD_S)
        removed, why = _retire_wal(conn, deadline)
    except psycopg.Error as exc:  # a server that refuses a step (a setting, an extension's hook)
        return 0, f"the WAL{where}: it refused to switch segments and checkpoint ({str(exc).strip()[:200]})"
    if why is not None:
        why = f"{why} ({node.label})" if node.worker else why
    recycle = conn.execute("SHOW wal_recycle").fetchone()
    if node.worker and not owned and recycle is not None and recycle[0] != "off":
        extra = (
            f"WAL segments {node.label} recycled (wal_recycle = on): renamed for reuse, they keep old bytes until "
            "overwritten; `ALTER SYSTEM SET wal_recycle = off` on it before a purge makes its checkpoint delete them"
        )
        why = extra if why is None else f"{why}; {extra}"
    return removed, why


def _clear_stale_statistics(
    conn: psycopg.Connection[Any], ident: sql.Identifier, schema: str, table: str, *, superuser: bool, shell: bool
) -> bool:
    """ANALYZE of a table with no row keeps its old statistics (its most common values quote the rows just
    deleted): delete them.  ``shell``: the coordinator's empty table of a Citus table, whatever its shards hold.
    Returns False when this server does not let the role."""
    if not shell and conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(ident)).fetchone() != (False,):
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


def _slots_pass(conn: psycopg.Connection[Any], until: float) -> bool:
    """Wait until every active replication slot has confirmed the WAL up to now (or ``until``); whether they did."""
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    lsn = str(row[0]) if row else "0/0"
    while True:
        behind = conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE active AND restart_lsn < %s::pg_lsn", [lsn]
        ).fetchone()
        if not behind or not behind[0]:
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.05)


def _wal_segments(conn: psycopg.Connection[Any]) -> list[str]:
    return sorted(str(r[0]) for r in conn.execute("SELECT name FROM pg_ls_waldir()") if _SEGMENT.match(str(r[0])))


def _retire_wal(conn: psycopg.Connection[Any], deadline: float) -> tuple[int, str | None]:
    """Switch past every WAL segment that exists, then checkpoint; return how many were removed, and what stayed.

    A standby's slot keeps the segments its standby has not confirmed: a streaming one confirms the
    switch within moments, so the checkpoint runs once more after its slot has passed it (waiting
    until ``deadline``, and a few seconds at least).
    """
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
    if kept and _slots_pass(conn, max(deadline, time.monotonic() + _MIN_LOCK_WAIT_S)):
        conn.execute("CHECKPOINT")
        after = _wal_segments(conn)
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
