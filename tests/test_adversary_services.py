"""A frozen embedding service (issue 42): SIGSTOP hung `ingest` and `search` with no message (the request timeout
was 600 s), a search sent SIGTERM at 70 s returned at 131 s, and `db status` called the service "not running".

The service here is a stand-in that holds the service's lock and socket as the real one does and then answers
nothing: the client code under test (ranklock.embed.service) is the real one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ranklock.cli import app
from ranklock.cli.service import _interrupt
from ranklock.embed import service

SILENT = """
import os, sys, time
sys.path.insert(0, sys.argv[2])
from ranklock import local_socket, service_lock
from ranklock.embed.service import ServicePaths
paths = ServicePaths(__import__("pathlib").Path(sys.argv[1]))
paths.make_dir()
lock = open(paths.lock, "a+")
assert service_lock.take(lock.fileno())
listener = local_socket.listen(paths.socket)  # as the real service binds it (a long temporary path too)
print("listening", flush=True)
while True:
    time.sleep(60)  # accepts nothing, answers nothing, spends no CPU time
"""


@pytest.fixture
def silent_service(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    proc = subprocess.Popen([sys.executable, "-c", SILENT, str(tmp_path), src], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    yield proc
    os.kill(proc.pid, signal.SIGCONT)
    proc.kill()
    proc.wait()
    proc.stdout.close()


def test_a_stopped_service_is_named_in_about_a_second_and_db_status_says_it_runs_but_does_not_answer(
    tmp_path: Path, silent_service: subprocess.Popen[str]
) -> None:
    os.kill(silent_service.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    with pytest.raises(service.Unresponsive) as exc:
        service.request(tmp_path, {"op": "embed", "texts": ["lava"]})
    assert time.monotonic() - t0 < 5
    assert str(exc.value) == (
        f"the embedding service of {tmp_path.resolve() / 'embed'} (pid {silent_service.pid}) does not answer: it is "
        f"stopped (process state stopped: SIGSTOP, or a debugger); `kill -CONT {silent_service.pid}` resumes it"
    )
    got = CliRunner().invoke(app, ["db", "status", "--home", str(tmp_path)])
    assert got.exit_code == 0, got.output
    assert f"embedding service: pid {silent_service.pid}, running but not answering: the embedding service of " in (
        " ".join(got.output.split())
    )


@pytest.mark.usefixtures("silent_service")
def test_a_hung_service_is_named_once_it_spends_no_cpu_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "HUNG_S", 1.0)
    t0 = time.monotonic()
    with pytest.raises(service.Unresponsive) as exc:
        service.request(tmp_path, {"op": "embed", "texts": ["lava"]})
    assert 1.0 <= time.monotonic() - t0 < 6
    assert "spent no CPU time for 1 s: it hangs; `ranklock db stop` stops it" in str(exc.value)


def test_a_command_waiting_on_the_service_is_interrupted_at_once(
    tmp_path: Path, silent_service: subprocess.Popen[str]
) -> None:
    """The command service interrupts a command whose client hung up (SIGTERM, Ctrl-C): the wait must give way."""
    os.kill(silent_service.pid, signal.SIGCONT)
    ended: list[float] = []

    def waiting() -> None:
        try:
            service.request(tmp_path, {"op": "embed", "texts": ["lava"]})
        except KeyboardInterrupt:
            ended.append(time.monotonic())

    thread = threading.Thread(target=waiting)
    thread.start()
    time.sleep(0.5)
    sent = time.monotonic()
    _interrupt(thread)
    thread.join(10)
    assert ended and ended[0] - sent < 2.0, "the wait did not give way to the interrupt"
