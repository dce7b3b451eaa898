"""Read routing to PostgreSQL streaming replicas (hot standbys).

A physical standby holds a byte copy of every table and every index page,
HNSW graphs included, so a search it serves returns exactly what the primary
would for the same snapshot.  What it may lack is *recent* WAL: this module
decides, per search, which node may serve it.

* At request start the primary is asked for its WAL position and the
  collection's active snapshot (one round trip).
* A replica serves only once it has replayed that position, or already shows
  the same active snapshot (an immutable snapshot, once visible, is
  byte-identical everywhere).  It is polled for up to ``wait`` seconds
  (``RANKLOCK_REPLICA_WAIT``); then the next replica is tried, the primary last.
  So a response is never from a snapshot older than the primary's active one
  when the request started.
* Choice: **round robin** over the replicas that are up.  Every replica that
  has replayed the request's position gives the same bytes, so there is
  nothing to gain from "least lag" once the position check passed; least lag
  would send all traffic to one node whenever lags differ by microseconds,
  which on a local network is always.
* A replica that fails (connection refused, killed mid-query) is marked down
  and skipped; it is probed again after a backoff that doubles up to
  ``_MAX_BACKOFF_S``; a local replica (``ranklock replica create``) is
  restarted in the background meanwhile.  The failed request is retried once
  on another node.  Only when every node failed does the caller see a
  :class:`DatabaseUnavailable` that names each node tried.

The search binds its reads to the chosen node through :func:`current_route`
(a context variable, so concurrent searches on threads never see each
other's node); writes (the query log, the embedding cache) always use the
primary's :class:`Database`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import psycopg

from ..errors import DatabaseUnavailable, RanklockError
from .database import Database

__all__ = [
    "ReadRouter",
    "ReplicaNode",
    "ReplicaStatus",
    "Route",
    "Target",
    "current_route",
    "node_label",
    "open_router",
]


@dataclass(frozen=True)
class ReplicaStatus:
    """One node searches may use, as ``ranklock replica list`` shows it (the primary first)."""

    name: str
    #: ``host:port`` of a replica; "primary" for the primary.
    node: str
    #: "up", "lagging" or "down" (``error`` says why it is down).
    state: str
    error: str | None
    #: Replay position and lag; None while the node is down.
    replay_lsn: str | None
    lag_bytes: int | None
    lag_seconds: float | None
    paused: bool | None
    #: How often the node was marked down since this process started.
    downs: int

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


log = logging.getLogger("ranklock.replicas")

T = TypeVar("T")
_POLL_S = 0.005  # how often a lagging replica's replay position is read again while waiting
_FIRST_BACKOFF_S = 0.5
_MAX_BACKOFF_S = 30.0


def node_label(dsn: str) -> str:
    """``host:port`` of a DSN (URI or key=value), as ``served_by`` names a replica."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    host = str(info.get("host") or info.get("hostaddr") or "localhost")
    port = str(info.get("port") or "5432")
    return f"{host}:{port}"


@dataclass(frozen=True)
class Target:
    """What a replica must have replayed: the primary's WAL position and active snapshot at request start."""

    lsn: str
    active_snapshot_id: int | None


@dataclass(frozen=True)
class Route:
    """The node one search runs on, and the replay position it had when chosen."""

    served_by: str
    db: Database
    replay_lsn: str | None
    primary_lsn: str | None
    waited_ms: float = 0.0
    warning: str | None = None

    def as_log(self) -> dict[str, Any]:
        return {
            "served_by": self.served_by,
            "replay_lsn": self.replay_lsn,
            "primary_lsn": self.primary_lsn,
            "waited_ms": round(self.waited_ms, 3),
        }


_ROUTE: ContextVar[Route | None] = ContextVar("ranklock_route", default=None)


def current_route() -> Route | None:
    """The node this thread's search is bound to, or None outside a routed search."""
    return _ROUTE.get()


@contextmanager
def _bound(route: Route) -> Iterator[None]:
    token = _ROUTE.set(route)
    try:
        yield
    finally:
        _ROUTE.reset(token)


class _ReplicaDatabase(Database):
    """A pool on a hot standby: no version checks or migrations (it is read-only and a copy of the primary)."""

    @staticmethod
    def _check_server(conn: psycopg.Connection[Any]) -> None:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        if row is None or not row[0]:
            # Routing reads to a second primary would serve a different database.
            raise DatabaseUnavailable(
                "the read DSN points at a server that is not a standby (pg_is_in_recovery() is false); "
                "give --read-dsn / RANKLOCK_READ_DSNS the DSNs of streaming replicas of the primary."
            )

    def _migrate(self, _conn: psycopg.Connection[Any]) -> None:
        return None


class ReplicaNode:
    """One replica: its pool, health, backoff and (local replicas) how to restart it."""

    def __init__(
        self, dsn: str, *, name: str | None = None, restart: Callable[[], None] | None = None, pool_timeout: float = 2.0
    ) -> None:
        self.dsn = dsn
        self.label = node_label(dsn)
        self.name = name or self.label
        self.restart = restart
        self.pool_timeout = pool_timeout
        self.db: Database | None = None
        self.state = "down"
        self.error: str | None = None
        self.failures = 0  # consecutive: sets the backoff, cleared by a successful probe
        self.downs = 0  # times marked down since this process opened it
        self.next_probe = 0.0
        self._lock = threading.Lock()
        self._restarting = False
        self._probing = False
        self.probe()

    def probe(self) -> bool:
        """Open a pool on the replica; on failure mark it down with a doubled backoff."""
        try:
            db = _ReplicaDatabase(self.dsn, min_size=1, max_size=8, pool_timeout=self.pool_timeout)
        except RanklockError as exc:
            self.mark_down(str(exc))
            return False
        with self._lock:
            old, self.db = self.db, db
            self.state, self.error, self.failures = "up", None, 0
        if old is not None:
            threading.Thread(target=old.pool.close, kwargs={"timeout": 1.0}, daemon=True).start()
        return True

    def mark_down(self, reason: str) -> None:
        with self._lock:
            self.state, self.error = "down", reason.splitlines()[0] if reason else reason
            self.failures += 1
            self.downs += 1
            self.next_probe = time.monotonic() + min(_MAX_BACKOFF_S, _FIRST_BACKOFF_S * 2 ** (self.failures - 1))
            start = self.restart is not None and not self._restarting
            if start:
                self._restarting = True
        log.warning(
            "replica %s is down (%s); next check in %.1f s", self.label, self.error, self.next_probe - time.monotonic()
        )
        if start:
            threading.Thread(
                target=self._restart_in_background, name=f"ranklock-restart-{self.name}", daemon=True
            ).start()

    def _restart_in_background(self) -> None:
        assert self.restart is not None
        try:
            self.restart()
        except Exception as exc:  # a restart that fails is retried at the next failure
            log.warning("replica %s did not restart: %s", self.label, exc)
        finally:
            with self._lock:
                self._restarting = False
                self.next_probe = min(self.next_probe, time.monotonic())

    def available(self) -> bool:
        """Whether searches may use it now; a down node whose backoff elapsed is probed in the background.

        The probe never runs on a search's path: an unreachable host can take
        the whole connect timeout to fail, and the search has other nodes.
        """
        if self.state in ("up", "lagging") and self.db is not None:
            return True
        with self._lock:
            due = time.monotonic() >= self.next_probe and not self._probing
            if due:
                self._probing = True
                # Until this probe ends, the next search does not start another.
                self.next_probe = time.monotonic() + _MAX_BACKOFF_S
        if due:
            threading.Thread(target=self._probe_in_background, name=f"ranklock-probe-{self.name}", daemon=True).start()
        return False

    def _probe_in_background(self) -> None:
        try:
            self.probe()
        finally:
            with self._lock:
                self._probing = False

    def position(self, target: Target | None, collection: str, snapshot: int | None) -> tuple[bool, str | None]:
        """Whether this replica may serve the request now, and its replay position."""
        assert self.db is not None
        row = self.db.fetchone(
            "SELECT pg_last_wal_replay_lsn()::text AS lsn, "
            "coalesce(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0, false) AS replayed, "
            "(SELECT active_snapshot_id FROM ranklock.collections WHERE name = %s) AS active, "
            "(SELECT status FROM ranklock.snapshots WHERE id = %s) AS status",
            [target.lsn if target else "0/0", collection, snapshot],
        )
        assert row is not None
        if target is None:
            return True, row["lsn"]  # the primary is unreachable: serve what the replica has (the result says so)
        if row["replayed"]:
            return True, row["lsn"]
        if snapshot is not None:
            # A named snapshot is immutable: once it is ready here it is the primary's bytes.
            return row["status"] == "ready", row["lsn"]
        same = target.active_snapshot_id is not None and row["active"] == target.active_snapshot_id
        return same, row["lsn"]

    def status(self) -> ReplicaStatus:
        """State for ``ranklock replica list``; replay position and lag unknown (:meth:`ReadRouter.status` reads them)."""
        return ReplicaStatus(self.name, self.label, self.state, self.error, None, None, None, None, self.downs)


def _lag(node: ReplicaNode, primary_lsn: str) -> dict[str, Any]:
    assert node.db is not None
    row = node.db.fetchone(
        "SELECT pg_last_wal_replay_lsn()::text AS replay_lsn, "
        "pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())::bigint AS lag_bytes, "
        "pg_is_wal_replay_paused() AS paused, "
        "CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
        "ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END AS lag_seconds",
        [primary_lsn],
    )
    assert row is not None
    lag_bytes = max(0, int(row["lag_bytes"] or 0))
    return {
        "replay_lsn": row["replay_lsn"],
        "lag_bytes": lag_bytes,
        # Replay caught up with what was received: no lag, however old the last transaction is.
        "lag_seconds": 0.0 if row["lag_seconds"] is None else max(0.0, float(row["lag_seconds"])),
        "paused": bool(row["paused"]),
    }


class ReadRouter:
    """Chooses the node for each search: a caught-up replica (round robin), else the primary."""

    def __init__(self, primary: Database, nodes: Sequence[ReplicaNode], *, wait: float) -> None:
        self.primary = primary
        self.nodes = list(nodes)
        self.wait = wait
        self._rr = itertools.count()
        self._rr_lock = threading.Lock()

    def close(self) -> None:
        for node in self.nodes:
            if node.db is not None:
                node.db.close()

    def _target(self, collection: str) -> Target:
        row = self.primary.fetchone(
            "SELECT pg_current_wal_lsn()::text AS lsn, "
            "(SELECT active_snapshot_id FROM ranklock.collections WHERE name = %s) AS active",
            [collection],
        )
        assert row is not None
        return Target(row["lsn"], row["active"])

    def _order(self) -> list[ReplicaNode]:
        with self._rr_lock:
            start = next(self._rr)
        n = len(self.nodes)
        return [self.nodes[(start + i) % n] for i in range(n)] if n else []

    def run(self, collection: str, snapshot: int | None, search: Callable[[], T]) -> T:
        """Run ``search`` on a replica that has replayed the primary's position, else on the primary.

        ``search`` reads through :func:`current_route`; a replica that fails
        under it is marked down and the search runs once more elsewhere.
        """
        started = time.monotonic()
        try:
            target: Target | None = self._target(collection)
        except DatabaseUnavailable as exc:
            target, primary_error = None, exc
        tried: list[str] = []
        retried = False
        for node in self._order():
            if not node.available():
                continue
            t0 = time.monotonic()
            try:
                ok, lsn = node.position(target, collection, snapshot)
                # Replay lags (or is paused): poll it up to the bound, then move on.
                while not ok and time.monotonic() - t0 < self.wait:
                    time.sleep(_POLL_S)
                    ok, lsn = node.position(target, collection, snapshot)
            except (DatabaseUnavailable, psycopg.OperationalError) as exc:
                node.mark_down(str(exc))
                tried.append(f"{node.label} ({node.error})")
                continue
            if not ok:
                node.state = "lagging" if node.state == "up" else node.state
                tried.append(f"{node.label} (had not replayed {target.lsn if target else '?'} after {self.wait:g} s)")
                continue
            if node.state == "lagging":
                node.state = "up"
            assert node.db is not None
            warning = None
            if target is None:
                warning = (
                    f"the primary was unreachable ({str(primary_error).splitlines()[0]}): replica {node.label} "
                    "served its latest replayed snapshot, which may be older than the primary's active one"
                )
            route = Route(
                node.label, node.db, lsn, target.lsn if target else None, (time.monotonic() - t0) * 1000, warning
            )
            try:
                with _bound(route):
                    return search()
            except (DatabaseUnavailable, psycopg.OperationalError, psycopg.errors.SerializationFailure) as exc:
                # Killed mid-query, or a query cancelled by a conflict with recovery.
                if isinstance(exc, psycopg.errors.SerializationFailure) or self._still_alive(node):
                    if not isinstance(exc, psycopg.errors.SerializationFailure):
                        raise  # the replica is fine: the failure was the primary's (e.g. a write)
                else:
                    node.mark_down(str(exc))
                tried.append(f"{node.label} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
                if retried:
                    break
                retried = True
        if target is None:
            raise DatabaseUnavailable(
                f"every node failed for this search: primary ({str(primary_error).splitlines()[0]})"
                + "".join(f", {t}" for t in tried)
                + ". Start the primary (or a replica) and retry; `ranklock replica list` shows each node."
            ) from primary_error
        try:
            # waited_ms: what trying the replicas cost before the primary took the search.
            with _bound(Route("primary", self.primary, None, target.lsn, (time.monotonic() - started) * 1000)):
                return search()
        except DatabaseUnavailable as exc:
            raise DatabaseUnavailable(
                f"every node failed for this search: {', '.join(tried) or 'no replica was up'}, then the primary "
                f"({str(exc).splitlines()[0]}). Start the servers and retry; `ranklock replica list` shows each node."
            ) from exc

    @staticmethod
    def _still_alive(node: ReplicaNode) -> bool:
        try:
            with psycopg.connect(node.dsn, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def snapshots_in_use(self, collection: str) -> dict[int, str]:
        """Snapshot id -> the replica whose catalog still names it active or previous for ``collection``.

        Snapshot retention keeps those (ranklock.snapshot.retention): a replica that has not replayed a
        switch yet still serves the old snapshot to a client that reads it directly.  A replica that
        cannot be asked is left out: it replays the switch before the drop, in WAL order.
        """
        out: dict[int, str] = {}
        for node in self.nodes:
            if node.state == "down" or node.db is None:
                continue
            try:
                row = node.db.fetchone(
                    "SELECT active_snapshot_id AS a, previous_snapshot_id AS p FROM ranklock.collections "
                    "WHERE name = %s",
                    [collection],
                )
            except (DatabaseUnavailable, psycopg.OperationalError) as exc:
                node.mark_down(str(exc))
                continue
            for sid in (row or {}).values():
                if sid is not None:
                    out.setdefault(int(sid), f"replica {node.name}")
        return out

    def status(self) -> list[ReplicaStatus]:
        """Each node: state, replay position, lag in bytes and seconds (``ranklock replica list``)."""
        row = self.primary.fetchone("SELECT pg_current_wal_lsn()::text AS lsn")
        assert row is not None
        out = [ReplicaStatus("primary", "primary", "up", None, row["lsn"], 0, 0.0, False, 0)]
        for node in self.nodes:
            node.available()
            entry = node.status()
            if node.state != "down":
                try:
                    entry = replace(entry, **_lag(node, row["lsn"]))
                except (DatabaseUnavailable, psycopg.OperationalError) as exc:
                    node.mark_down(str(exc))
                    entry = replace(entry, state="down", error=node.error)
            out.append(entry)
        return out


def open_router(
    primary: Database, read_dsns: Sequence[str], *, home: Any, embedded: bool, wait: float
) -> ReadRouter | None:
    """The router for ``read_dsns``, or (none given, embedded primary) for the local replicas of ``home``; None if none."""
    nodes: list[ReplicaNode] = []
    if read_dsns:
        nodes = [ReplicaNode(dsn) for dsn in read_dsns]
    elif embedded:
        from .standby import LocalReplica, load_registry

        for name in sorted(load_registry(home)):
            replica = LocalReplica(home, name)
            try:
                # One made by an older ranklock admits anyone on 127.0.0.1: upgraded before it is read from.
                replica.secure()
            except RanklockError as exc:
                log.warning("replica %s was not upgraded to the home's secret: %s", name, exc)
            # A registered replica found dead is started again, as the embedded primary is.
            nodes.append(ReplicaNode(replica.dsn, name=name, restart=replica.restart))
    return ReadRouter(primary, nodes, wait=wait) if nodes else None
