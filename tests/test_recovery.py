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
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder

from ranklock import Document, Engine, QueryTimeout
from ranklock.snapshot.build import chunk_table
from ranklock.store.server import EmbeddedServer

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
