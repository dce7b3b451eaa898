"""Read replicas on real PostgreSQL streaming replication: one embedded primary, two local hot standbys.

The standbys are made by ranklock itself (``LocalReplica.create``: ``pg_basebackup -R``), so these
tests also cover the set-up a user runs with ``ranklock replica create``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder
from intruder import as_nobody, refused_as_nobody
from ranklock import Engine
from ranklock.cli import app
from ranklock.errors import DatabaseUnavailable
from ranklock.ingest.loaders import Document
from ranklock.store import access
from ranklock.store.local_node import pg_bin
from ranklock.store.server import EmbeddedServer
from ranklock.store.standby import LocalReplica, load_registry

COLLECTION = "sci"
_WORDS = [
    "protein",
    "cell",
    "gene",
    "mutation",
    "tumor",
    "immune",
    "vaccine",
    "receptor",
    "enzyme",
    "pathway",
    "neuron",
    "insulin",
    "virus",
    "antibody",
    "dose",
    "trial",
    "cohort",
    "mortality",
    "risk",
    "plasma",
    "kinase",
    "signal",
    "membrane",
    "stem",
    "therapy",
    "lesion",
    "cortex",
    "hormone",
    "bacteria",
    "infection",
    "inflammation",
    "lipid",
    "glucose",
    "oxygen",
    "calcium",
    "sodium",
    "dna",
    "rna",
    "transcription",
    "expression",
]


def _corpus(n: int, seed: int, prefix: str = "d") -> list[Document]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        title = " ".join(rng.choices(_WORDS, k=4))
        body = ". ".join(" ".join(rng.choices(_WORDS, k=rng.randint(8, 16))) for _ in range(rng.randint(2, 5)))
        docs.append(Document(f"{prefix}{i:04d}", title, body, {}, {}))
    return docs


def _queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=rng.randint(1, 5))) for _ in range(n)]


@dataclass
class Cluster:
    home: Path
    primary_dsn: str
    replicas: list[LocalReplica]
    emb: HashEmbedder

    def engine(self, read: list[LocalReplica] | None, *, wait: float = 0.5, log: bool = True) -> Engine:
        """An engine on the primary (external DSN: no local registry) reading from ``read``."""
        prev = os.environ.get("RANKLOCK_REPLICA_WAIT")
        os.environ["RANKLOCK_REPLICA_WAIT"] = str(wait)
        try:
            return Engine(
                dsn=self.primary_dsn,
                embedder=self.emb,
                log_queries=log,
                read_dsns=[r.dsn for r in read] if read is not None else None,
            )
        finally:
            if prev is None:
                os.environ.pop("RANKLOCK_REPLICA_WAIT")
            else:
                os.environ["RANKLOCK_REPLICA_WAIT"] = prev


def _label(r: LocalReplica) -> str:
    return f"127.0.0.1:{r.port}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if os.environ.get("RANKLOCK_TEST_DSN"):
        pytest.skip("local replicas are made of the embedded server; RANKLOCK_TEST_DSN points elsewhere")
    # A directory of its own, not under pytest's shared basetemp: three servers live in it.
    home = Path(tempfile.mkdtemp(prefix="ranklock-replicas-"))
    emb = HashEmbedder()
    with Engine(home=home, embedder=emb, log_queries=True) as eng:
        eng.ingest(
            COLLECTION,
            _corpus(800, seed=13),
            # exact_threshold 0: every search walks the HNSW graph, the part a rebuilt index would change.
            create={"embedder": emb.id, "index": "hnsw", "search_defaults": {"exact_threshold": 0}},
        )
    replicas = [LocalReplica(home, "r1"), LocalReplica(home, "r2")]
    with ThreadPoolExecutor(2) as pool:  # two base backups at once, each through its own slot
        list(pool.map(LocalReplica.create, replicas))
    yield Cluster(home, EmbeddedServer(home).uri(), replicas, emb)
    for r in replicas:
        r.drop()
    EmbeddedServer(home).stop()
    shutil.rmtree(home, ignore_errors=True)


def _primary_lsn(c: Cluster) -> str:
    with psycopg.connect(c.primary_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _wait_replayed(c: Cluster, r: LocalReplica, timeout: float = 30.0) -> None:
    target = _primary_lsn(c)
    deadline = time.monotonic() + timeout
    with psycopg.connect(r.dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()
            if row is not None and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError(f"replica {r.name} did not replay {target} within {timeout} s")


def test_create_registers_and_plain_engine_reads_from_replicas(cluster: Cluster) -> None:
    assert load_registry(cluster.home) == {r.name: {"port": r.port} for r in cluster.replicas}
    with Engine(home=cluster.home, embedder=cluster.emb) as eng:
        served = {eng.search(COLLECTION, "protein kinase", k=5).served_by for _ in range(4)}
    # Round robin over both registered replicas.
    assert served == {_label(r) for r in cluster.replicas}


def test_300_queries_byte_identical_hits_on_primary_and_each_replica(cluster: Cluster) -> None:
    # Unlogged: the query log is tested below; here every search costs only the search.
    engines = [cluster.engine([], log=False)] + [cluster.engine([r], log=False) for r in cluster.replicas]
    labels = ["primary"] + [_label(r) for r in cluster.replicas]
    for r in cluster.replicas:
        _wait_replayed(cluster, r)
    try:
        for q in _queries(300, seed=7):
            results = [e.search(COLLECTION, q, k=10) for e in engines]
            assert [r.served_by for r in results] == labels
            assert results[0].params["vector_strategy"] == "hnsw"
            hits = [json.dumps([h.model_dump() for h in r.hits]) for r in results]
            assert hits[1] == hits[0] and hits[2] == hits[0], q
            # The whole canonical result too (served_by and timings are left out of it).
            assert results[1].to_json() == results[0].to_json() == results[2].to_json()
    finally:
        for e in engines:
            e.close()


def _resume(r: LocalReplica) -> None:
    with psycopg.connect(r.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()")


def test_activation_is_served_by_a_replica_only_after_replay(cluster: Cluster) -> None:
    r1, r2 = cluster.replicas
    with psycopg.connect(r1.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            with cluster.engine(None) as writer:
                report = writer.ingest(COLLECTION, [Document("new0001", "zeppelin", "zeppelin protein", {}, {})])
            # r1 has not replayed the activation; r2 may not have yet either: never the old snapshot.
            with cluster.engine([r1, r2], wait=0.3) as eng:
                for _ in range(4):
                    res = eng.search(COLLECTION, "zeppelin", k=3, mode="lexical")
                    assert res.snapshot.id == report.snapshot_id
                    assert res.hits[0].doc_id == "new0001"
                    assert res.served_by != _label(r1)
                status = {n.name: n for n in eng.replica_status()}
                assert status[_label(r1)].paused is True
                assert (status[_label(r1)].lag_bytes or 0) > 0
            # Only r1 to read from: after waiting the bound it falls back to the primary.
            with cluster.engine([r1], wait=0.3) as eng:
                res = eng.search(COLLECTION, "zeppelin", k=3, mode="lexical")
                assert (res.served_by, res.snapshot.id) == ("primary", report.snapshot_id)
                assert res.timings["replica_wait_ms"] >= 300
            # A replica that catches up within the bound serves after waiting for it.
            with cluster.engine([r1], wait=20) as eng:
                threading.Timer(0.4, _resume, [r1]).start()
                t0 = time.monotonic()
                res = eng.search(COLLECTION, "zeppelin", k=3, mode="lexical")
                assert time.monotonic() - t0 >= 0.4
                assert (res.served_by, res.snapshot.id) == (_label(r1), report.snapshot_id)
                # The query log (on the primary) names the replica and its replay position.
                row = eng.db.fetchone(
                    "SELECT result -> 'node' AS node FROM ranklock.query_log WHERE id = %s", [res.query_id]
                )
                assert row is not None and row["node"]["served_by"] == _label(r1)
                assert row["node"]["replay_lsn"] and row["node"]["waited_ms"] >= 300
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")


def test_kill_9_of_a_replica_under_4_clients_loses_no_request_and_it_rejoins(cluster: Cluster) -> None:
    r2 = cluster.replicas[1]
    queries = _queries(40, seed=99)
    with cluster.engine([]) as primary:
        expected = {q: primary.search(COLLECTION, q, k=10).to_json() for q in queries}
    for r in cluster.replicas:
        _wait_replayed(cluster, r)
    # The registered replicas, with their restart hook, as plain `ranklock search` would use them.
    with Engine(home=cluster.home, embedder=cluster.emb) as eng:
        stop = threading.Event()
        served: list[str] = []
        errors: list[BaseException] = []

        def client(seed: int) -> int:
            rng, done = random.Random(seed), 0
            while not stop.is_set() or done < 20:
                q = rng.choice(queries)
                try:
                    res = eng.search(COLLECTION, q, k=10)
                except BaseException as exc:  # every failure is a lost request
                    errors.append(exc)
                    raise
                assert res.to_json() == expected[q]
                served.append(res.served_by)
                done += 1
            return done

        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(client, s) for s in range(4)]
            time.sleep(1.0)
            pid = r2.pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            time.sleep(2.0)
            stop.set()
            counts = [f.result() for f in futures]
        assert not errors and sum(counts) == len(served)
        # The kill was noticed (r2 marked down), and both the survivor and r2 served before it.
        assert {n.label: n.downs for n in eng.router.nodes}[_label(r2)] >= 1
        assert {_label(r) for r in cluster.replicas} <= set(served)
        # The router restarts the killed local replica in the background; it rejoins the rotation.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if eng.search(COLLECTION, queries[0], k=10).served_by == _label(r2):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"replica r2 did not rejoin: {eng.replica_status()}")
        assert r2.running()
        assert {n.node: n.state for n in eng.replica_status()}[_label(r2)] == "up"


def test_dead_read_dsn_is_skipped_and_listed_down(cluster: Cluster) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = f"postgresql://postgres@127.0.0.1:{port}/ranklock"
    with Engine(dsn=cluster.primary_dsn, embedder=cluster.emb, read_dsns=[dead]) as eng:
        assert eng.search(COLLECTION, "protein", k=3).served_by == "primary"
        node = {n.node: n for n in eng.replica_status()}[f"127.0.0.1:{port}"]
        assert node.state == "down" and "cannot connect" in (node.error or "")


def test_cli_replica_list_json_and_drop_unknown(cluster: Cluster) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["replica", "list", "--home", str(cluster.home), "--json"])
    assert res.exit_code == 0, res.output
    nodes = {n["name"]: n for n in json.loads(res.stdout)["nodes"]}
    assert set(nodes) == {"primary", "r1", "r2"}
    assert all(n["state"] in ("up", "lagging") and n["lag_bytes"] is not None for n in nodes.values())
    res = runner.invoke(app, ["replica", "drop", "nope", "--home", str(cluster.home)])
    assert res.exit_code == 2
    assert "no local replica named 'nope'; registered: r1, r2." in res.stderr


def test_cli_search_json_names_the_replica(cluster: Cluster) -> None:
    r1 = cluster.replicas[0]
    _wait_replayed(cluster, r1)
    # Lexical mode: the CLI loads no embedder (the collection's is the tests' hash embedder).
    args = ["search", COLLECTION, "protein", "--mode", "lexical", "--json", "--dsn", cluster.primary_dsn]
    res = CliRunner().invoke(app, [*args, "--read-dsn", r1.dsn])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["served_by"] == _label(r1)
    res = CliRunner().invoke(app, args)
    assert json.loads(res.stdout)["served_by"] == "primary"


# -- who may connect (issue 48): the home's owner, and no other user of the machine ------------------


def _labels(c: Cluster) -> set[str]:
    return {_label(r) for r in c.replicas}


def _without_secret(port: int) -> psycopg.Connection[Any]:
    """Root itself, as role postgres, but with no password to offer (not even a ~/.pgpass)."""
    return psycopg.connect(
        host="127.0.0.1",
        port=port,
        user="postgres",
        dbname="ranklock",
        passfile="/nonexistent/pgpass",
        connect_timeout=5,
    )


def test_another_user_is_refused_by_the_primary_and_every_replica_and_the_owner_reads(cluster: Cluster) -> None:
    socket_folder = str(psycopg.conninfo.conninfo_to_dict(cluster.primary_dsn)["host"])
    assert "Permission denied" in refused_as_nobody(socket_folder)
    for r in cluster.replicas:
        assert "fe_sendauth: no password supplied" in refused_as_nobody("127.0.0.1", r.port)
        with pytest.raises(psycopg.OperationalError, match="no password supplied"):
            _without_secret(r.port)
        assert "passfile=" in r.dsn and (access.read_secret(cluster.home) or "?") not in r.dsn
        with psycopg.connect(r.dsn, autocommit=True) as conn:
            rules = conn.execute("SELECT DISTINCT auth_method FROM pg_hba_file_rules WHERE type = 'host'").fetchall()
            assert rules == [("scram-sha-256",)]
            assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    with Engine(home=cluster.home, embedder=cluster.emb) as eng:
        assert {eng.search(COLLECTION, "protein kinase", k=5).served_by for _ in range(4)} == _labels(cluster)


def _downgrade(c: Cluster) -> None:
    """What an older ranklock left: no secret, role postgres without a password, trust on every replica's TCP lines."""
    (c.home / "secrets" / "pgpass").unlink()
    for r in c.replicas:
        hba = r.datadir / "pg_hba.conf"
        hba.write_text(hba.read_text().replace("scram-sha-256", "trust"))
        r.run([pg_bin("pg_ctl"), "-D", str(r.datadir), "reload"], timeout=30)
    with psycopg.connect(c.primary_dsn, autocommit=True) as conn:
        conn.execute("ALTER ROLE postgres PASSWORD NULL")
    # The finding, reproduced: any user of the machine is the superuser, and runs programs as the server.
    for r in c.replicas:
        deadline = time.monotonic() + 10
        while not as_nobody("127.0.0.1", r.port).program_ran:
            assert time.monotonic() < deadline, f"the downgraded replica {r.name} never let nobody in"
            time.sleep(0.1)


def test_replicas_made_with_trust_are_upgraded_when_the_home_is_opened(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    _downgrade(cluster)
    with caplog.at_level(logging.WARNING, logger="ranklock.access"):
        with Engine(home=cluster.home, embedder=cluster.emb) as eng:
            for r in cluster.replicas:
                assert "no password supplied" in refused_as_nobody("127.0.0.1", r.port)
            # The owner reads through both, with the new secret.
            assert {eng.search(COLLECTION, "protein kinase", k=5).served_by for _ in range(4)} == _labels(cluster)
        passfile = cluster.home / "secrets" / "pgpass"
        assert [rec.getMessage() for rec in caplog.records if rec.name == "ranklock.access"] == [
            f"ranklock: replica {r.name!r} of {cluster.home} (127.0.0.1:{r.port}) let any user of this machine in "
            f"without a password (trust on TCP); it now admits role postgres only with the home's secret ({passfile})."
            for r in cluster.replicas
        ]
        caplog.clear()
        # Once upgraded, opening the home says nothing more.
        with Engine(home=cluster.home, embedder=cluster.emb):
            pass
        assert [rec for rec in caplog.records if rec.name == "ranklock.access"] == []


def test_db_stop_names_a_replica_it_could_not_stop(server_dir: Path) -> None:
    # A registered replica whose postmaster.pid names a live process, in a folder that is no data directory:
    # pg_ctl refuses it before it signals anything.
    datadir = server_dir / "replicas" / "r9"
    datadir.mkdir(parents=True)
    (server_dir / "replicas.json").write_text(json.dumps({"r9": {"port": 1}}), encoding="utf-8")
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        (datadir / "postmaster.pid").write_text(f"{sleeper.pid}\n", encoding="utf-8")
        res = CliRunner().invoke(app, ["db", "stop", "--home", str(server_dir)])
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
    assert res.exit_code == 2 and res.stdout == "not running\n"
    assert " ".join(res.stderr.split()) == (
        f"error: not stopped: replica r9 (127.0.0.1:1): pg_ctl failed for replica 'r9' (exit 1): pg_ctl: directory "
        f'"{datadir}" is not a database cluster directory. Stop it with `ranklock db stop` again once the cause is '
        "fixed, or `ranklock replica drop NAME`."
    )


def test_db_stop_stops_the_replicas_and_the_next_command_starts_them_again(cluster: Cluster) -> None:
    """Last of this module: it stops every server of the home, then brings them back."""
    res = CliRunner().invoke(app, ["db", "stop", "--home", str(cluster.home)])
    assert res.exit_code == 0, res.output
    assert res.stdout == "stopped\n2 local replicas stopped: r1, r2\n"
    assert not any(r.running() for r in cluster.replicas)
    # A serving process that finds a replica down does not start it behind the operator's back.
    with pytest.raises(DatabaseUnavailable, match=r"^replica 'r1' was stopped with the home's server"):
        cluster.replicas[0].restart()
    assert not cluster.replicas[0].running()
    # The next command starts the primary; its searches find the replicas down and start them again.
    served: set[str] = set()
    with Engine(home=cluster.home, embedder=cluster.emb) as eng:
        deadline = time.monotonic() + 60
        while not _labels(cluster) <= served and time.monotonic() < deadline:
            served.add(eng.search(COLLECTION, "protein kinase", k=5).served_by)
            time.sleep(0.2)
    assert _labels(cluster) <= served and all(r.running() for r in cluster.replicas)
