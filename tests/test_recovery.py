"""Recovery: `ranklock serve` outlives its database (kill -9), health and readiness, the statement timeout.

The server tests run `ranklock serve` for real in a subprocess, on its own
embedded PostgreSQL (its own RANKLOCK_HOME), and kill that PostgreSQL with
SIGKILL, as a crash or the OOM killer would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes import HashEmbedder
from ranklock import Document, Engine, QueryTimeout
from ranklock.snapshot.build import chunk_table
from ranklock.store.server import EmbeddedServer
from ranklock.store.steps import Fetch

STATEMENT_TIMEOUT_S = 5.0  # the serving process's RANKLOCK_STATEMENT_TIMEOUT in these tests
POOL_TIMEOUT_S = 2.0

DOCS = [
    Document("lava", "Lava", "Magma rises through the crust and erupts as lava from a volcano."),
    Document("bread", "Bread", "Yeast ferments the sugars in dough and the gas makes the bread rise."),
    Document("tides", "Tides", "The gravity of the moon raises tides in the oceans twice a day."),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 30.0) -> tuple[int, dict[str, Any], float]:
    """(status, JSON body, seconds); an HTTP error status is a result, not an exception."""
    t = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read()), time.monotonic() - t
    except urllib.error.HTTPError as exc:
        body = exc.read()
        # Every error must be JSON: json.loads fails the test on a plain-text 500.
        return exc.code, json.loads(body), time.monotonic() - t


def _postmaster_pid(home: Path) -> int:
    return int((home / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


@pytest.fixture
def own_home() -> Iterator[Path]:
    """A home outside pytest's base temp dir: another pytest session on the machine resets that
    dir to mode 0700, and the embedded server (another OS user when run as root) must reach it."""
    home = Path(tempfile.mkdtemp(prefix="ranklock-recovery-"))
    try:
        yield home
    finally:
        EmbeddedServer(home).stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def served(own_home: Path) -> Iterator[tuple[str, Path]]:
    """A `ranklock serve` process on its own embedded PostgreSQL with a tiny lexical collection."""
    home = own_home
    with Engine(home=home, embedder=HashEmbedder()) as eng:
        eng.ingest("tiny", DOCS)
    port = _free_port()
    env = {
        **os.environ,
        "RANKLOCK_STATEMENT_TIMEOUT": f"{STATEMENT_TIMEOUT_S:g}s",
        "RANKLOCK_POOL_TIMEOUT": f"{POOL_TIMEOUT_S:g}s",
    }
    env.pop("RANKLOCK_DSN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ranklock", "serve", "--port", str(port), "--home", str(home)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _get(f"{base}/healthz", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError("ranklock serve did not come up")
            time.sleep(0.2)
        yield base, home
    finally:
        proc.terminate()
        proc.wait(timeout=30)


SEARCH = "/api/search?collection=tiny&q=lava+volcano&k=2&mode=lexical"


def _survive_one_kill(base: str, home: Path) -> dict[str, Any]:
    """Kill the postmaster, then search until it works again; every answer must be 200 or a JSON 503."""
    old = _postmaster_pid(home)
    os.kill(old, signal.SIGKILL)
    killed = time.monotonic()
    answers: list[tuple[int, str, float]] = []
    first_ok: float | None = None
    while time.monotonic() - killed < 20:
        status, body, seconds = _get(base + SEARCH)
        answers.append((status, body.get("error", {}).get("type", ""), seconds))
        if status == 200:
            assert body["hits"][0]["doc_id"] == "lava"
            first_ok = first_ok or time.monotonic() - killed
            if time.monotonic() - killed > first_ok + 2:
                break  # two more seconds of answers after the first success
        else:
            assert status == 503 and body["error"]["type"] == "DatabaseUnavailable", body
            assert first_ok is None, f"a failure after the server had recovered: {answers}"
        time.sleep(0.1)
    assert first_ok is not None and first_ok <= 10, answers
    assert max(s for _, _, s in answers) < STATEMENT_TIMEOUT_S, answers
    assert sum(1 for status, _, _ in answers if status != 200) <= 1, answers
    assert _postmaster_pid(home) != old  # a new server, not the killed one
    return {"first_ok_s": first_ok, "answers": answers}


def test_serve_recovers_after_its_postgres_is_killed(served: tuple[str, Path]) -> None:
    base, home = served
    assert _get(base + "/healthz")[:2] == (200, {"status": "ok"})
    status, ready, _ = _get(base + "/readyz")
    assert status == 200 and ready["status"] == "ready"
    assert ready["collections"] == [{"name": "tiny", "snapshot_id": ready["collections"][0]["snapshot_id"], "ok": True}]
    assert _get(base + SEARCH)[0] == 200
    for _ in range(2):  # twice: recovery is not a one-off
        _survive_one_kill(base, home)
    assert _get(base + "/healthz")[:2] == (200, {"status": "ok"})
    status, ready, _ = _get(base + "/readyz")
    assert status == 200 and ready["status"] == "ready" and ready["database"]["recoveries"] >= 2
    status, body, _ = _get(base + SEARCH)
    assert status == 200 and body["params"]["statement_timeout_s"] == STATEMENT_TIMEOUT_S


def test_external_server_is_reached_again_after_a_restart(own_home: Path) -> None:
    """With RANKLOCK_DSN ranklock cannot restart the server: it fails fast while it is down, then reconnects."""
    from ranklock import DatabaseUnavailable
    from ranklock.store.database import Database

    server = EmbeddedServer(own_home)
    db = Database(server.uri(), pool_timeout=1.0)  # no restart hook: an external server
    try:
        assert db.fetchone("SELECT 1 AS ok") == {"ok": 1}
        server.stop()
        t = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as exc:
            db.fetchone("SELECT 1 AS ok")
        assert time.monotonic() - t < 10
        msg = str(exc.value)
        assert msg.startswith("lost the database connection (") and "could not reach PostgreSQL at postgresql://" in msg
        assert msg.endswith(
            "ranklock tries again on every request; start the server or fix the DSN "
            "(`ranklock db status` says whether the embedded server runs, and why not)."
        )
        server.uri()  # the operator starts it again
        # Served at once: by a replaced pool, or by the old pool's own reconnection if it came first.
        t = time.monotonic()
        assert db.fetchone("SELECT 1 AS ok") == {"ok": 1}
        assert time.monotonic() - t < 10
    finally:
        db.close()


def test_a_server_that_cannot_come_back_is_reported_with_its_own_diagnosis(own_home: Path) -> None:
    """A recovery that fails leads with what the server says is wrong (a full disk names the disk).

    The embedded server's diagnosis reads its log (ranklock.store.server); here the hooks stand in
    for a restart that leaves the server down and a log that names the cause.
    """
    import asyncio

    from ranklock import DatabaseUnavailable
    from ranklock.store.async_database import AsyncDatabase
    from ranklock.store.database import Database

    server = EmbeddedServer(own_home)
    dsn = server.uri()
    cause = "no space left on device: The disk holding /somewhere is full."
    db = Database(dsn, pool_timeout=1.0, restart=lambda _wait: dsn, diagnose=lambda: cause)
    adb = AsyncDatabase(dsn, pool_timeout=1.0, restart=lambda _wait: dsn, diagnose=lambda: cause)
    try:
        assert db.fetchone("SELECT 1 AS ok") == {"ok": 1}
        server.stop()  # and the "restart" leaves it stopped
        with pytest.raises(DatabaseUnavailable) as exc:
            db.fetchone("SELECT 1 AS ok")
        assert str(exc.value).startswith(cause + " (lost the database connection (")

        async def query() -> Any:
            try:
                return await adb.run(_select_one())
            finally:
                await adb.close()

        with pytest.raises(DatabaseUnavailable) as aexc:
            asyncio.run(query())
        assert str(aexc.value).startswith(cause + " (lost the database connection (")
    finally:
        db.close()
        server.uri()


def test_terminated_connections_are_replaced_without_an_error(engine: Engine) -> None:
    """An administrator (or an idle timeout) ends every pooled connection: the next search still works."""
    from ranklock.store.database import Database

    db = Database(engine.db.dsn, pool_timeout=2.0, max_size=3)
    try:
        with db.connection() as a, db.connection() as b:
            pids = [a.info.backend_pid, b.info.backend_pid]
        engine.db.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
        deadline = time.monotonic() + 10  # termination is asynchronous: wait until both are gone
        while engine.db.fetchone("SELECT 1 AS x FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert db.fetchone("SELECT 2 AS two") == {"two": 2}
        assert db.recoveries == 1
    finally:
        db.close()


@pytest.fixture
def short_timeout(engine: Engine) -> Iterator[float]:
    old = engine.settings.statement_timeout
    engine.settings.statement_timeout = 0.5
    try:
        yield 0.5
    finally:
        engine.settings.statement_timeout = old


def test_statement_timeout_cancels_a_search_and_releases_its_connection(
    engine: Engine, cname: str, short_timeout: float
) -> None:
    import psycopg
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    engine.embedders.register(HashEmbedder())
    engine.ingest(cname, DOCS, create={"embedder": "test:hash-8"})
    ok = engine.search(cname, "lava volcano", k=2, mode="lexical")
    assert ok.params["statement_timeout_s"] == short_timeout
    sid = engine.collection(cname).active_snapshot_id
    assert sid is not None
    # A real slow statement: another session holds the chunk table locked, so the
    # search waits on the lock until PostgreSQL cancels it at the timeout.
    with psycopg.connect(engine.db.dsn) as locker:
        locker.execute(psycopg.sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(chunk_table(sid)))
        for _ in range(engine.db.max_size + 2):  # more than the pool holds: a leaked connection would show
            t = time.monotonic()
            with pytest.raises(QueryTimeout) as exc:
                engine.search(cname, "lava volcano", k=2, mode="lexical")
            assert time.monotonic() - t < short_timeout + 3
        assert str(exc.value) == (
            "the search ran longer than the statement timeout of 0.5 s and PostgreSQL cancelled it; its connection "
            "is released. Narrow the query or filter, lower depth or k, or raise the limit "
            "(RANKLOCK_STATEMENT_TIMEOUT, e.g. 60s)."
        )
        r = TestClient(create_app(engine)).get(
            "/api/search", params={"collection": cname, "q": "lava volcano", "k": 2, "mode": "lexical"}
        )
        assert r.status_code == 504 and r.json()["error"]["type"] == "QueryTimeout"
        stats = engine.db.pool.get_stats()
        assert stats["pool_size"] - stats["pool_available"] == 0  # nothing checked out
        locker.rollback()
    # Nothing of ours still runs, and the pool serves the next search at once.
    busy = engine.db.fetchone(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%%rl_%%' "
        "AND pid <> pg_backend_pid()"
    )
    assert busy == {"n": 0}
    again = engine.search(cname, "lava volcano", k=2, mode="lexical")
    assert [h.doc_id for h in again.hits] == [h.doc_id for h in ok.hits]
    # SET LOCAL: the limit ended with each search's transaction; no pooled connection keeps it.
    with engine.db.connection() as a, engine.db.connection() as b:
        assert [c.execute("SHOW statement_timeout").fetchone() for c in (a, b)] == [("0",), ("0",)]


def test_readyz_names_a_collection_whose_snapshot_cannot_be_read(engine: Engine, cname: str) -> None:
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    engine.embedders.register(HashEmbedder())
    engine.ingest(cname, DOCS, create={"embedder": "test:hash-8"})
    client = TestClient(create_app(engine))
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code in (200, 503)  # other tests' collections may be mid-build
    mine = [c for c in ready.json()["collections"] if c["name"] == cname]
    sid = engine.collection(cname).active_snapshot_id
    assert mine == [{"name": cname, "snapshot_id": sid, "ok": True}]
    # Break this collection's active snapshot for real: rename its chunk table away.
    table = chunk_table(int(sid))  # type: ignore[arg-type]
    from psycopg import sql

    moved = sql.Identifier("ranklock_data", f"moved_{sid}")
    engine.db.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(table, sql.Identifier(f"moved_{sid}")))
    try:
        r = client.get("/readyz")
        assert r.status_code == 503
        body = r.json()
        assert body["status"] == "not_ready" and body["error"]["type"] == "SnapshotError"
        (entry,) = [c for c in body["collections"] if c["name"] == cname]
        assert entry["ok"] is False
        assert entry["error"].startswith(f"active snapshot {sid} cannot be read: relation ")
        assert f"{cname} (active snapshot {sid} cannot be read" in body["error"]["message"]
    finally:
        engine.db.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(moved, sql.Identifier(f"chunks_{sid}")))
    assert client.get("/api/health").json() == {"status": "ok"}


def test_a_connection_lost_mid_request_is_a_clear_503_and_the_next_request_works(engine: Engine) -> None:
    import threading

    from ranklock import DatabaseUnavailable
    from ranklock.store.database import Database

    db = Database(engine.db.dsn, pool_timeout=2.0, max_size=2)
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            db.fetchone("SELECT pg_sleep(30) AS slept")
        except BaseException as exc:
            errors.append(exc)

    try:
        worker = threading.Thread(target=slow)
        worker.start()
        deadline = time.monotonic() + 10
        pid = None
        while pid is None and time.monotonic() < deadline:
            row = engine.db.fetchone("SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30) AS slept'")
            pid = row["pid"] if row else None
            time.sleep(0.05)
        assert pid is not None
        engine.db.execute("SELECT pg_terminate_backend(%s)", [pid])
        worker.join(timeout=20)
        assert len(errors) == 1 and isinstance(errors[0], DatabaseUnavailable)
        msg = str(errors[0])
        assert msg.startswith("the connection to PostgreSQL was lost during this request (")
        assert msg.endswith("); ranklock reconnected to the server. Retry the request.")
        assert db.fetchone("SELECT 3 AS three") == {"three": 3}
    finally:
        db.close()


def _select_one() -> Generator[Fetch, Any, Any]:
    rows = yield Fetch("SELECT 1 AS ok")
    return rows


def test_a_search_whose_connection_is_killed_under_it_is_run_again_once_and_says_so(engine: Engine, cname: str) -> None:
    """No probe per checkout: a connection that dies is found when its statement fails; a search is a read, so
    that round trip is sent once more on a new connection, and the result says so."""
    import psycopg

    engine.embedders.register(HashEmbedder())
    engine.create_collection(cname, embedder="test:hash-8")
    engine.ingest(cname, DOCS)
    expected = engine.search(cname, "lava volcano", k=2, mode="lexical")
    killed: list[int] = []
    admin = psycopg.connect(engine.db.dsn, autocommit=True)

    def kill_before_the_statement(query: str, _params: Any) -> None:
        # The search's statement (its batch is being sent): end its connection first, and wait until it is gone.
        if query.startswith("WITH ") and not killed:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = 'victim'"
            ).fetchall()
            killed.append(len(rows))

    sep = "&" if "?" in engine.db.dsn else "?"
    victim = Engine(dsn=f"{engine.db.dsn}{sep}application_name=victim", tracer=kill_before_the_statement)
    try:
        victim.embedders.register(HashEmbedder())
        res = victim.search(cname, "lava volcano", k=2, mode="lexical")
    finally:
        victim.close()
        admin.close()
    assert killed and killed[0] >= 1
    assert [h.doc_id for h in res.hits] == [h.doc_id for h in expected.hits]
    assert res.to_json() != expected.to_json()  # the warning says what happened
    (said,) = [w for w in res.warnings if "reconnected" in w]
    assert said.startswith("the connection to PostgreSQL was lost during this request (")
    assert said.endswith("; ranklock reconnected and ran that part of the search again, once")
    assert res.model_copy(update={"warnings": expected.warnings}).to_json() == expected.to_json()
