"""A real full disk (issue 27): a small tmpfs mounted for the test, never a mock of the database.

* The data disk: a database whose tablespace lies on an 40 MB tmpfs, filled to its last
  kilobytes.  An ingest used to end in a ``psycopg.errors.DiskFull`` traceback (exit 1):
  now it is an :class:`InsufficientResources` naming the full disk and the fix, exit 2,
  and nothing stored changes; a search still answers (its log entry is lost, and says so).
* The WAL disk: an embedded server whose ``pg_wal`` is a full tmpfs (a replication slot
  keeps the old segments, the usual way a WAL disk fills).  PostgreSQL stops; every
  request used to wait 20-22 s for a 503 that never said why, and ``db status`` advised
  deleting the data directory.  Now each 503 comes within RANKLOCK_POOL_TIMEOUT and
  says "no space left on device", and ``db status`` says which disk to free.

Mounting needs root (CAP_SYS_ADMIN), as the tests' machine gives; without it these tests
fail with that reason, never skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from adversary import stored_digest
from fakes import HashEmbedder
from ranklock import Document, Engine, InsufficientResources
from ranklock.cli import app
from ranklock.http import create_app
from ranklock.store.server import EmbeddedServer

DOCS = [Document(f"d{i:03d}", f"Doc {i}", f"lava volcano magma crust number {i} " * 8) for i in range(40)]


@pytest.fixture
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its own Engine: let it resolve the test's hash embedder by id."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )


@contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "40m"), mounted until the block ends."""
    mnt = Path(tempfile.mkdtemp(prefix="ranklock-small-disk-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.fail(f"these tests mount a small tmpfs to fill a real disk and need root: {done.stderr.strip()}")
    os.chmod(mnt, 0o755)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        shutil.rmtree(mnt, ignore_errors=True)


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 40 MB disk, mounted for this test only."""
    with tmpfs("40m") as mnt:
        yield mnt


def fill(disk: Path, leave: int = 32 * 1024) -> Path:
    """Fill ``disk`` with one file up to its last ``leave`` bytes."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with open(filler, "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))
    return filler


def _server_owner(data_directory: str) -> int:
    # The embedded server runs as its own OS user when ranklock runs as root.
    return Path(data_directory).stat().st_uid


@pytest.fixture
def full_database(engine: Engine, small_disk: Path) -> Iterator[tuple[Engine, Path]]:
    """A database of the session's server whose tablespace is on the small disk, with a collection in it."""
    assert engine.db.data_directory is not None
    location = small_disk / "ts"
    location.mkdir()
    os.chown(location, _server_owner(engine.db.data_directory), -1)
    name = f"adv_full_{uuid.uuid4().hex[:8]}"
    engine.db.execute(
        sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(sql.Identifier(name), sql.Literal(str(location)))
    )
    engine.db.execute(sql.SQL("CREATE DATABASE {} TABLESPACE {}").format(sql.Identifier(name), sql.Identifier(name)))
    eng = Engine(dsn=make_conninfo(engine.db.dsn, dbname=name), embedder=HashEmbedder(), log_queries=True)
    try:
        eng.ingest("notes", DOCS)
        yield eng, location
    finally:
        eng.close()
        engine.db.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        engine.db.execute(sql.SQL("DROP TABLESPACE {}").format(sql.Identifier(name)))


def _more(n: int, tag: str) -> list[Document]:
    return [Document(f"{tag}{i:04d}", "More", f"basalt obsidian pumice tuff {tag} {i} " * 40) for i in range(n)]


def test_an_ingest_into_a_full_disk_is_a_clear_error_and_changes_nothing(full_database: tuple[Engine, Path]) -> None:
    eng, location = full_database
    disk = location.parent
    before = stored_digest(eng)
    active = eng.collection("notes").active_snapshot_id
    filler = fill(disk)
    with pytest.raises(InsufficientResources) as exc:
        eng.ingest("notes", _more(400, "a"))
    message = str(exc.value)
    assert message.startswith(f"the database server's disk is full: no space left on device writing {location}/")
    assert "(PostgreSQL 53100: could not " in message and "No space left on device" in message
    assert message.endswith(
        "Nothing of this operation was stored. Free space on the file system that holds "
        f"{message.split('Free space on the file system that holds ')[1].split(' (`df')[0]} "
        f"(`df -h {message.split('(`df -h ')[1].split('`)')[0]}`), or move the data to a larger disk, then run "
        "the command again; do not delete the data directory: it holds every collection."
    )
    assert message.split("(`df -h ")[1].split("`)")[0].startswith(str(location))  # the full disk, not the data dir
    assert eng.collection("notes").active_snapshot_id == active
    assert stored_digest(eng) == before
    # The disk freed, the same ingest goes through.
    filler.unlink()
    assert eng.ingest("notes", _more(400, "a")).activated


@pytest.mark.usefixtures("cli_hash_embedder")
def test_the_cli_exits_2_with_the_message_not_a_traceback(full_database: tuple[Engine, Path], tmp_path: Path) -> None:
    eng, location = full_database
    corpus = tmp_path / "more.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.doc_id, "text": d.body}) + "\n" for d in _more(400, "c")))
    fill(location.parent)
    res = CliRunner().invoke(app, ["ingest", "notes", str(corpus), "--dsn", eng.db.dsn])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "error: the database server's disk is full: no space left on device writing " in text  # after the bars
    assert text.endswith("then run the command again; do not delete the data directory: it holds every collection.")
    assert "Traceback" not in res.output and "psycopg" not in res.output


def test_a_search_on_a_full_disk_answers_and_says_it_was_not_logged(full_database: tuple[Engine, Path]) -> None:
    eng, location = full_database
    logged = eng.search("notes", "lava volcano", k=3, mode="lexical")
    fill(location.parent, leave=0)
    # Log entries fill the table's last pages first; then every entry needs a page the disk lacks.
    for _ in range(200):
        res = eng.search("notes", "lava volcano", k=3, mode="lexical")
        if res.query_id is None:
            break
    assert res.query_id is None, "200 searches were all logged on a full disk"
    assert [h.doc_id for h in res.hits] == [h.doc_id for h in logged.hits]
    assert res.warnings[-1].startswith(
        "query log: this search was not logged (InsufficientResources: the database server's disk is full: "
        "no space left on device writing "
    )


@pytest.fixture
def wal_on_small_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """An embedded server of its own whose pg_wal is on an 80 MB disk; yields (home, disk).

    80 MB: room for a few 16 MB WAL segments once the filler is gone, so the server can start again.
    """
    monkeypatch.setenv("RANKLOCK_POOL_TIMEOUT", "2s")
    home = Path(tempfile.mkdtemp(prefix="ranklock-wal-full-"))
    os.chmod(home, 0o755)
    with tmpfs("80m") as small_disk:
        yield from _wal_server(home, small_disk)


def _wal_server(home: Path, small_disk: Path) -> Iterator[tuple[Path, Path]]:
    try:
        with Engine(home=home, embedder=HashEmbedder()) as eng:
            eng.ingest("notes", DOCS)
        EmbeddedServer(home).stop()
        pgdata = home / "pgdata"
        wal = small_disk / "pg_wal"
        shutil.copytree(pgdata / "pg_wal", wal, symlinks=True)
        owner = (pgdata / "PG_VERSION").stat().st_uid
        for p in [wal, *wal.rglob("*")]:
            os.chown(p, owner, -1)
        shutil.rmtree(pgdata / "pg_wal")
        os.symlink(wal, pgdata / "pg_wal")
        yield home, small_disk
    finally:
        EmbeddedServer(home).stop()
        shutil.rmtree(home, ignore_errors=True)


def test_a_full_wal_disk_answers_503_within_the_pool_timeout_and_names_the_disk(
    wal_on_small_disk: tuple[Path, Path],
) -> None:
    home, disk = wal_on_small_disk
    eng = Engine(home=home, embedder=HashEmbedder())
    try:
        assert eng.settings.pool_timeout == 2.0
        eng.db.execute("SELECT pg_create_physical_replication_slot('adv_keep_wal', true)")
        filler = fill(disk, leave=64 * 1024)
        with pytest.raises(InsufficientResources) as exc:  # the write that needs a new WAL segment
            eng.db.execute(
                "CREATE TABLE public.wal_filler AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 40000) g"
            )
        assert f"no space left on device writing {disk}/pg_wal/xlogtemp." in str(exc.value)
        client = TestClient(create_app(eng), raise_server_exceptions=False)
        seconds = []
        for _ in range(5):
            t = time.monotonic()
            r = client.get("/api/search", params={"collection": "notes", "q": "lava", "mode": "lexical"})
            seconds.append(time.monotonic() - t)
            assert r.status_code == 503, r.text
            message = r.json()["error"]["message"]
            assert r.json()["error"]["type"] == "DatabaseUnavailable"
            assert "no space left on device" in message and f"The disk holding {disk}/pg_wal is full." in message
            assert "Do not delete the data directory" in message and "remove the data directory" not in message
        assert max(seconds) < eng.settings.pool_timeout + 1.0, seconds
        status = CliRunner().invoke(app, ["db", "status", "--home", str(home), "--json"])
        report = json.loads(status.output)
        assert report["server"] == "not running"
        assert report["problem"].startswith(f"no space left on device: the embedded PostgreSQL in {home / 'pgdata'}")
        assert f"Free space on it (`df -h {disk}/pg_wal`)" in report["problem"]
        assert "Do not delete the data directory: it holds every collection." in report["problem"]
        # Space freed: the next requests bring the server back by themselves.
        filler.unlink()
        deadline = time.monotonic() + 30
        while True:
            r = client.get("/api/search", params={"collection": "notes", "q": "lava", "mode": "lexical"})
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert r.status_code == 200 and r.json()["hits"], r.text
        with psycopg.connect(eng.db.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot('adv_keep_wal')")
    finally:
        eng.close()
