"""`ranklock serve` beyond loopback (issue 27): it refuses to start without a token, warns with
--insecure-no-auth, and asks every request for its token; a real process each time.

This module revokes every live token of the session's database first (a server must
find none to refuse to start), so it runs after the modules that create tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adversary import free_port
from ranklock import Engine


@pytest.fixture
def no_live_tokens(engine: Engine) -> None:
    engine.db.execute("UPDATE ranklock.api_tokens SET revoked_at = now() WHERE revoked_at IS NULL")


def _serve(rl_home: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    """A `ranklock serve` process; its stderr goes to a file (a pipe nobody reads would fill and block it)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RANKLOCK_DSN"}
    err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by _stderr once the process has ended
    proc = subprocess.Popen(
        [sys.executable, "-m", "ranklock", "serve", "--port", str(port), "--home", str(rl_home), *args],
        stdout=subprocess.DEVNULL,
        stderr=err,
        text=True,
        env=env,
    )
    _ERR[proc.pid] = err
    return proc, port


_ERR: dict[int, Any] = {}


def _stderr(proc: subprocess.Popen[str]) -> str:
    """What the process wrote on stderr (after it ended)."""
    err = _ERR.pop(proc.pid)
    err.seek(0)
    text = str(err.read())
    err.close()
    return text


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def stop() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.terminate()
        p.wait(timeout=30)
        if p.pid in _ERR:
            _stderr(p)


def _up(port: int, proc: subprocess.Popen[str], headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if _get(f"http://127.0.0.1:{port}/healthz", headers)[0] == 200:
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.terminate()
            proc.wait(timeout=30)
            raise AssertionError(f"ranklock serve did not come up: {_stderr(proc)}")
        time.sleep(0.2)


@pytest.mark.usefixtures("no_live_tokens")
def test_serve_beyond_loopback_refuses_to_start_without_a_token(rl_home: Path) -> None:
    proc, _ = _serve(rl_home, "--host", "0.0.0.0")
    proc.wait(timeout=60)
    err = _stderr(proc)
    assert proc.returncode == 2
    assert " ".join(err.split()) == (
        "error: `ranklock serve --host 0.0.0.0` listens beyond this machine and needs API tokens, but no live token "
        "with the scope read exists. Create one with `ranklock token create NAME` and send it as `Authorization: "
        "Bearer <token>`, bind 127.0.0.1, or pass --insecure-no-auth (not advised)."
    )


@pytest.mark.usefixtures("no_live_tokens")
def test_insecure_no_auth_warns_and_serves(rl_home: Path, stop: list[subprocess.Popen[str]]) -> None:
    proc, port = _serve(rl_home, "--host", "0.0.0.0", "--insecure-no-auth")
    stop.append(proc)
    _up(port, proc)
    assert _get(f"http://127.0.0.1:{port}/api/collections")[0] == 200
    proc.terminate()
    proc.wait(timeout=30)
    err = _stderr(proc)
    assert " ".join(err.split()).startswith(
        f"warning: serving 0.0.0.0:{port} with --insecure-no-auth: no token is asked for; anyone who reaches this "
        "port reads every collection and writes the answer log (a paid generator still needs a token with that "
        "scope; Host names other than IP addresses and --allow-host ones are refused)."
    )


@pytest.mark.usefixtures("no_live_tokens")
def test_insecure_no_auth_still_checks_the_host_and_refuses_an_anonymous_paid_generator(
    rl_home: Path, stop: list[subprocess.Popen[str]]
) -> None:
    """The issue: with --insecure-no-auth there was no Host check (DNS rebinding reached it) and an anonymous
    caller could choose the billed `openai` generator that a read-only token is refused."""
    proc, port = _serve(rl_home, "--host", "0.0.0.0", "--insecure-no-auth", "--allow-host", "notes.lan")
    stop.append(proc)
    _up(port, proc)
    url = f"http://127.0.0.1:{port}/api/collections"
    status, body = _get(url, {"Host": "rebound.attacker.example"})
    assert status == 421 and body["error"]["message"].startswith(
        "this server answers to Host 127.0.0.1, ::1, localhost, notes.lan or an IP address, not "
        "'rebound.attacker.example'"
    )
    assert _get(url, {"Host": f"192.0.2.7:{port}"})[0] == 200 and _get(url, {"Host": "notes.lan"})[0] == 200
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/ask",
        data=json.dumps({"collection": "any", "question": "what?", "generator": "openai"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(request, timeout=30)
        raise AssertionError("an anonymous caller chose the paid generator")
    except urllib.error.HTTPError as exc:
        assert exc.code == 403
        assert json.loads(exc.read())["error"]["type"] == "Forbidden"


def test_serve_beyond_loopback_asks_every_request_for_its_token(
    engine: Engine, rl_home: Path, stop: list[subprocess.Popen[str]]
) -> None:
    _, secret = engine.create_token(f"adv-serve-{uuid.uuid4().hex[:8]}", ["read"])
    proc, port = _serve(rl_home, "--host", "0.0.0.0")
    stop.append(proc)
    _up(port, proc)
    status, body = _get(f"http://127.0.0.1:{port}/api/collections")
    assert status == 401 and body["error"]["type"] == "Unauthorized"
    status, body = _get(f"http://127.0.0.1:{port}/api/collections", {"Authorization": f"Bearer {secret}"})
    assert status == 200 and "collections" in body


@pytest.mark.usefixtures("no_live_tokens")
def test_the_readme_serving_example_runs_as_written(
    engine: Engine, rl_home: Path, stop: list[subprocess.Popen[str]]
) -> None:
    import shlex

    from typer.testing import CliRunner

    from ranklock.cli import app

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Serving beyond this machine")[1].split("\n## ")[0]
    lines = [ln.split("  #")[0].strip() for ln in section.split("```sh")[1].split("```")[0].strip().splitlines()]
    assert [ln.split()[1] for ln in lines] == ["token", "token", "token", "serve", "token"]
    runner = CliRunner()
    secret = None
    for line in lines:
        argv = shlex.split(line)[1:]
        if argv[0] == "serve":
            proc, port = _serve(rl_home, *argv[1:])
            stop.append(proc)
            host = {"Host": "search.example.org"}  # the one name --allow-host gave
            _up(port, proc, host)
            url = f"http://127.0.0.1:{port}/api/collections"
            assert _get(url)[0] == 421  # Host 127.0.0.1: not a name this server was told it is
            assert _get(url, host)[0] == 401
            assert _get(url, {**host, "Authorization": f"Bearer {secret}"})[0] == 200
            continue
        res = runner.invoke(app, [*argv, "--home", str(rl_home), *(["--json"] if argv[1] == "create" else [])])
        assert res.exit_code == 0, (line, res.output)
        if argv[1] == "create" and secret is None:
            secret = json.loads(res.output)["token"]
    assert {t.name for t in engine.list_tokens() if t.revoked_at is None} == {"billing"}
    engine.revoke_token("billing")
