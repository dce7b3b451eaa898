"""The home a command works in (ranklock.home): found upward as git finds its repository, else per user.

And a command that only reads never makes one: ``search --home /typo/path`` says there is no home
there and leaves nothing behind (no folder, no PostgreSQL, no command service).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import use_hash_embedder
from ranklock import Document, Engine
from ranklock.cli import app, client
from ranklock.home import find_home, home_exists, user_home

SCRIPT = str(Path(sys.executable).parent / "ranklock")


def test_the_home_given_then_the_environment_then_upward_then_per_user(tmp_path: Path) -> None:
    project = tmp_path / "project"
    deep = project / "notes" / "2026"
    deep.mkdir(parents=True)
    env = {"HOME": str(tmp_path / "ana")}
    # Nothing upward: the per-user home, under ~/.local/share (XDG's default).
    found = find_home(start=deep, environ=env)
    assert found.path == tmp_path / "ana" / ".local" / "share" / "ranklock"
    assert found.how == f"per-user default: no .ranklock folder in {deep} or above it"
    assert user_home({**env, "XDG_DATA_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "ranklock"
    assert user_home({**env, "XDG_DATA_HOME": "relative/xdg"}) == found.path  # XDG: a relative value is ignored
    # A project's .ranklock, from any folder below it.
    (project / ".ranklock").mkdir()
    assert find_home(start=deep, environ=env).path == project / ".ranklock"
    assert find_home(start=deep, environ=env).how == f"found upward from {deep}"
    # RANKLOCK_HOME and a given home win, relative to the working folder.
    assert find_home(start=deep, environ={**env, "RANKLOCK_HOME": "../h"}).path == project / "notes" / "h"
    assert find_home("x", start=deep, environ={**env, "RANKLOCK_HOME": "/elsewhere"}).path == deep / "x"
    assert not home_exists(project / ".ranklock")  # a folder is not yet a database


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    emb = use_hash_embedder(engine)
    engine.create_collection("t_home_found", embedder=emb, if_missing=True)
    engine.ingest("t_home_found", [Document("h1", "", "the harbour ledger of 1887")], replace=True)
    return "t_home_found"


def test_a_command_in_a_subfolder_finds_the_project_home(
    coll: str, rl_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".ranklock").symlink_to(rl_home, target_is_directory=True)
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    monkeypatch.delenv("RANKLOCK_HOME", raising=False)
    r = CliRunner().invoke(app, ["collections", "--json"])
    assert r.exit_code == 0, r.output
    assert coll in [c["name"] for c in json.loads(r.stdout)["collections"]]
    r = CliRunner().invoke(app, ["db", "status", "--json"])
    status = json.loads(r.stdout)
    assert (status["home"], status["home_from"], status["home_exists"]) == (
        str(tmp_path / ".ranklock"),
        f"found upward from {sub}",
        True,
    )
    assert status["server"] == "running"
    r = CliRunner().invoke(app, ["db", "status"], env={"COLUMNS": "200"})
    assert f"home: {tmp_path / '.ranklock'} (found upward from {sub})" in r.stdout


def test_a_read_on_a_home_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo" / "path"
    for args in (
        ["search", "docs", "pump seals"],
        ["collections"],
        ["snapshot", "list", "docs"],
        ["ask", "docs", "who?"],
        ["replay", "1"],
        ["token", "list"],
    ):
        r = CliRunner().invoke(app, [*args, "--home", str(typo)])
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.replace("\n", " ").startswith(
            f"error: no ranklock home at {typo} (given); nothing was created. Check the path (--home, "
            "RANKLOCK_HOME), or make the home with a first write: `ranklock ingest NAME FILE` (or `ranklock demo`)."
        ), r.stderr
    assert not (tmp_path / "typo").exists()
    r = CliRunner().invoke(app, ["db", "status", "--home", str(typo), "--json"])
    assert r.exit_code == 0
    status = json.loads(r.stdout)
    assert (status["server"], status["home_exists"]) == ("not running", False)
    assert status["problem"].startswith(f"no ranklock home at {typo} (given); nothing was created.")
    assert not (tmp_path / "typo").exists()


def test_a_served_search_on_a_typo_home_starts_no_service_and_no_server(tmp_path: Path) -> None:
    # The real entry point with the command service on, as a user runs it: nothing may start.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOCK_")}
    env.update(RANKLOCK_CLI_SERVICE="1", XDG_DATA_HOME=str(tmp_path / "user-data"))
    for _ in range(2):  # a second search would find a service the first one started
        proc = subprocess.run(
            [SCRIPT, "search", "docs", "pump seals", "--home", "typo/path"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert f"no ranklock home at {tmp_path / 'typo' / 'path'} (given)" in proc.stderr.replace("\n", " ")
        # And with no home given, the per-user one, which does not exist yet either.
        proc = subprocess.run(
            [SCRIPT, "search", "docs", "pump seals"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 2, proc.stderr
        assert f"no ranklock home at {tmp_path / 'user-data' / 'ranklock'} (per-user default: no .ranklock " in (
            proc.stderr.replace("\n", " ")
        )
    assert sorted(os.listdir(tmp_path)) == []
    assert not client.running(tmp_path / "typo" / "path")
