"""With ``--json`` (or ``--format json|jsonl``), every command's error is JSON too (issue 45): one object on
stdout, ``{"error": {"type", "message"}}`` as the HTTP API answers, exit status 2, nothing on stderr."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from ranklock import Document, Engine
from ranklock.cli import app


def _commands_with_json() -> list[list[str]]:
    """The path of every command that takes --json."""
    found: list[list[str]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        if isinstance(cmd, TyperGroup):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        elif any("--json" in p.opts for p in cmd.params):
            found.append(path)

    walk(typer.main.get_command(app), [])
    return found


def error_of(args: list[str], **env: str) -> dict[str, Any]:
    r = CliRunner().invoke(app, args, env=env or None)
    assert r.exit_code == 2, (args, r.output)
    assert r.stderr == "", (args, r.stderr)
    [line] = r.stdout.splitlines()
    out = json.loads(line)
    assert set(out) == {"error"} and set(out["error"]) == {"type", "message"}, out
    return dict(out["error"])


def test_a_usage_error_of_every_json_command_is_json() -> None:
    paths = _commands_with_json()
    assert len(paths) >= 25 and ["search"] in paths and ["snapshot", "list"] in paths
    for path in paths:
        err = error_of([*path, "--json", "--no-such-option"])
        assert err["type"] == "UsageError", (path, err)
        assert "--no-such-option" in err["message"], (path, err)


def test_domain_errors_are_json_with_their_type(engine: Engine, rl_home: Path) -> None:
    home = ["--home", str(rl_home)]
    nosuch = error_of(["search", "t_no_such_collection", "pump", "--json", *home])
    assert nosuch["type"] == "NotFound" and nosuch["message"].startswith("no collection named 't_no_such_collection'")
    engine.ingest("t_json_errors", [Document("a", "", "pump seals leak")], replace=True)
    bad = error_of(["search", "t_json_errors", "pump", "--format", "jsonl", "--filter", "x has_all ('a')", *home])
    assert bad["type"] == "FilterError" and "a filter expression writes it 'has all'" in bad["message"]
    missing = error_of(["document", "get", "t_json_errors", "--json", *home])
    assert missing == {
        "type": "UsageError",
        "message": "Missing argument 'doc_id'; `ranklock document get --help` says what it takes.",
    }
    assert error_of(["search", "t_json_errors", "pump", "-k", "many", "--json", *home])["type"] == "UsageError"


@pytest.mark.parametrize("args", [["search", "t_no_such_collection", "pump"], ["snapshot", "list", "t_no_such"]])
def test_without_json_an_error_is_one_line_on_stderr(rl_home: Path, args: list[str]) -> None:
    r = CliRunner().invoke(app, [*args, "--home", str(rl_home)])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.startswith("error: no collection named ")
