"""The database layer: embedded server start-up, migrations, clear connection errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ranklock import DatabaseUnavailable, Engine
from ranklock.store.database import Database


def test_unreachable_database_has_a_clear_error() -> None:
    with pytest.raises(DatabaseUnavailable) as exc:
        Engine(dsn="postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=2")
    msg = str(exc.value)
    assert msg.startswith("cannot connect to PostgreSQL at postgresql://nobody@127.0.0.1:1/nothing")
    assert msg.endswith(
        "Check that the server runs and the DSN is right, or unset RANKLOCK_DSN to use the embedded server."
    )
    # libpq's own text on one line, its question not followed by a full stop (issue 41: "connections?. Check").
    assert "\n" not in msg and "?." not in msg
    assert "accepting TCP/IP connections? Check that the server runs" in msg


def test_migrations_are_recorded_once(engine: Engine) -> None:
    applied = [r["version"] for r in engine.db.fetchall("SELECT version FROM public.ranklock_migrations ORDER BY 1")]
    assert applied == [v for v, _, _ in Database.migrations()]
    # Opening again applies nothing twice.
    Database(engine.db.dsn).close()
    again = [r["version"] for r in engine.db.fetchall("SELECT version FROM public.ranklock_migrations ORDER BY 1")]
    assert again == applied


def test_pgvector_is_recent_enough(engine: Engine) -> None:
    row = engine.db.fetchone("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    assert row is not None
    assert tuple(int(x) for x in row["extversion"].split(".")[:2]) >= (0, 8)


def test_two_processes_starting_the_embedded_server_at_once(tmp_path: Path) -> None:
    """Two ranklock processes must neither double-start nor corrupt the cluster."""
    home = tmp_path / "home"
    code = (
        "import sys; from ranklock.store.server import EmbeddedServer; "
        "from ranklock.store.database import Database; "
        f"u = EmbeddedServer(__import__('pathlib').Path({str(home)!r})).uri(); Database(u).close(); print(u)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    try:
        assert [p.returncode for p in procs] == [0, 0]
        assert outs[0] == outs[1] and outs[0].endswith("/ranklock?host=" + outs[0].split("host=")[1])
        pid_lines = (home / "pgdata" / "postmaster.pid").read_text().splitlines()
        assert int(pid_lines[0]) > 0
    finally:
        from ranklock.store.server import EmbeddedServer

        EmbeddedServer(home).stop()


def test_a_new_home_sizes_its_buffers_to_the_machine_and_keeps_an_operators_choice(tmp_path: Path) -> None:
    import psycopg

    from ranklock.store.server import EmbeddedServer, shared_buffers_mb

    # An eighth of the memory, between PostgreSQL's 128 MB and 4 GB.
    assert (shared_buffers_mb(2 * 2**30), shared_buffers_mb(24 * 2**30), shared_buffers_mb(64 * 2**30)) == (
        256,
        3072,
        4096,
    )
    assert shared_buffers_mb(512 * 2**20) == 128
    server = EmbeddedServer(tmp_path / "home")
    try:
        with psycopg.connect(server.uri(), autocommit=True) as conn:  # the first session already has them
            assert conn.execute("SHOW shared_buffers").fetchone() == (f"{shared_buffers_mb()}MB",)
            conn.execute("ALTER SYSTEM SET shared_buffers = '200MB'")
        server.stop()
        with psycopg.connect(server.uri()) as conn:
            assert conn.execute("SHOW shared_buffers").fetchone() == ("200MB",)
    finally:
        server.stop()


@pytest.mark.usefixtures("engine")
def test_commands_that_need_no_vectors_never_import_the_model(rl_home: Path) -> None:
    code = (
        "import sys; from typer.testing import CliRunner; from ranklock.cli import app; "
        f"r = CliRunner().invoke(app, ['collections', '--home', {str(rl_home)!r}]); "
        "assert r.exit_code == 0, r.output; "
        "print('sentence_transformers' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False False"
