"""The command service (ranklock.cli.service): `ranklock search` from a shell, run by a warm process,
prints what it prints in its own process, byte for byte, and never fails because of the service.

Real processes against the session's real PostgreSQL: the `ranklock` console script of this
environment, as a shell runs it, with RANKLOCK_CLI_SERVICE=1 (served) or 0 (its own process).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from ranklock import Document, Engine
from ranklock.cli import app, client
from ranklock.embed import service as embed_service
from ranklock.settings import ENV, Settings

COLL = "t_cli_service"
DOCS = [
    ("seal-1", "Pump seals leak when the shaft runs dry; replace the seal and check the bearing."),
    ("seal-2", "Mechanical seals of centrifugal pumps: faces, springs and the flush plan."),
    ("kiln-1", "Glaze tests in the kiln at cone six, with shelves washed against drips."),
    ("kiln-2", "Firing schedules for stoneware: candling, bisque and the glaze firing."),
    ("memo-1", "A draft memo on pump maintenance budgets for the XJ-900 line."),
]
SCRIPT = str(Path(sys.executable).parent / "ranklock")
TIMEOUT_S = 300


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    engine.ingest(COLL, [Document(i, "", text) for i, text in DOCS], replace=True)
    return COLL


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # A long path on purpose: AF_UNIX addresses hold 107 bytes, and test folders are deep.
    h = tmp_path_factory.mktemp("cli-service") / ("a-long-data-directory-name-" * 3) / "home"
    h.mkdir(parents=True)
    yield h
    client.stop(h)
    embed_service.stop(h)


@pytest.fixture(scope="module")
def env(engine: Engine) -> dict[str, str]:
    """A user's shell: no RANKLOCK_* of the test run but the database, the embedding service on."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOCK_") and k not in ("COLUMNS", "LINES")}
    base.pop("FORCE_COLOR", None)
    return {**base, "RANKLOCK_DSN": engine.db.dsn, "RANKLOCK_EMBED_SERVICE": "1", "TERM": "xterm-256color"}


def run(
    env: dict[str, str], *args: str, served: bool = True, cwd: Path | None = None, **more: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [SCRIPT, *args],
        env={**env, "RANKLOCK_CLI_SERVICE": "1" if served else "0", **more},
        cwd=cwd,
        capture_output=True,
        timeout=TIMEOUT_S,
    )


def served_count(home: Path) -> int:
    return sum(int(s["served"]) for s in client.status(home))


def wait_for_service(home: Path, count: int = 1) -> None:
    deadline = time.monotonic() + 120
    while len(client.status(home)) < count:
        assert time.monotonic() < deadline, (home / "cli" / "service.log").read_text()
        time.sleep(0.05)


@pytest.fixture(scope="module")
def up(coll: str, home: Path, env: dict[str, str]) -> str:
    """The service of ``env`` listening, started as a user's first search starts it."""
    first = run(env, "search", coll, "pump seals", "--home", str(home), "--mode", "lexical")
    assert first.returncode == 0, first.stderr
    wait_for_service(home)
    return coll


def same(got: subprocess.CompletedProcess[bytes], want: subprocess.CompletedProcess[bytes]) -> None:
    assert (got.returncode, got.stderr.decode(), got.stdout.decode()) == (
        want.returncode,
        want.stderr.decode(),
        want.stdout.decode(),
    )


FOOTER = re.compile(rb"(?m)^(\x1b\[[0-9;]*m)*\d+ of k=")


def untimed(out: bytes) -> bytes:
    """A table with its footer's numbers blanked: two runs never share the timings and the query-log id,
    and the footer wraps where its numbers' widths put it."""
    m = FOOTER.search(out)
    assert m is not None, out
    return out[: m.start()] + b" ".join(re.sub(rb"\d+", b"#", out[m.start() :]).split())


@pytest.mark.parametrize(
    "args",
    [
        ["--json"],
        ["--format", "jsonl", "-k", "3"],
        ["--format", "trec", "--qid", "q7"],
        ["--mode", "lexical", "--json", "--set", "depth=3"],
        ["--mode", "semantic", "--json", "--filter", "doc_id != 'kiln-1'"],
        ["--format", "yaml"],  # a RanklockError: exit 2, one message
        ["--set", "ef_serach=4"],  # a bad --set: exit 2, the valid keys
        ["-k", "many"],  # click's own usage error: exit 2
        ["--no-such-option"],  # the QueryCommand hint
        ["--help"],
    ],
    ids=["json", "jsonl", "trec", "set", "filter", "bad-format", "bad-set", "usage", "no-such-option", "help"],
)
def test_served_output_is_the_in_process_output_byte_for_byte(
    up: str, home: Path, env: dict[str, str], args: list[str]
) -> None:
    query = "why do pump seals leak"
    before = served_count(home)
    got = run(env, "search", up, query, *args, "--home", str(home))
    assert served_count(home) == before + 1  # it was the service that ran it
    same(got, run(env, "search", up, query, *args, "--home", str(home), served=False))


def test_the_served_commands_are_the_reads_and_ingest_but_never_a_watch() -> None:
    assert client.served(["ranklock", "search", "docs", "q"])
    assert client.served(["ranklock", "snapshot", "list", "docs"])
    assert client.served(["ranklock", "ingest", "docs", "notes/"])
    assert not client.served(["ranklock", "ingest", "docs", "notes/", "--watch"])  # runs until stopped
    assert client.served(["ranklock", "search", "docs", "--", "--watch"])  # a query, not the option
    assert not client.served(["ranklock", "snapshot", "drop", "docs", "3"])
    assert not client.served(["ranklock", "db", "stop"]) and not client.served(["ranklock", "serve"])
    assert not client.served(["ranklock"]) and not client.served(["ranklock", "--help"])


def _read_commands(coll: str, home: Path, snapshot: int) -> list[list[str]]:
    h = ["--home", str(home)]
    return [
        ["snapshot", "list", coll, *h],
        ["snapshot", "list", coll, "--json", *h],
        ["snapshot", "show", coll, *h],
        ["snapshot", "diff", coll, str(snapshot), str(snapshot), *h],
        ["snapshot", "manifest", coll, *h],
        ["document", "get", coll, "seal-1", *h],
        ["document", "get", coll, "seal-1", "--json", *h],
        ["document", "get", coll, "no-such-doc", *h],  # an error: exit 2, its message
        ["collection", "show", coll, *h],
        ["token", "list", *h],
    ]


def test_read_commands_through_the_service_print_what_they_print_alone(
    up: str, home: Path, env: dict[str, str], engine: Engine
) -> None:
    for args in _read_commands(up, home, engine.collection(up).active_snapshot_id or 0):
        before = served_count(home)
        got = run(env, *args)
        assert served_count(home) == before + 1, args  # the service ran it
        same(got, run(env, *args, served=False))


@pytest.mark.usefixtures("up")
def test_an_unchanged_ingest_and_db_status_through_the_service(home: Path, env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "pump.md").write_text("# Pumps\n\nSeals leak when the shaft runs dry.\n")
    (folder / "kiln.txt").write_text("Glaze tests at cone six.\n")
    name = "t_cli_service_ingest"
    first = CliRunner().invoke(
        app, ["ingest", name, str(folder), "--home", str(home)], env={"RANKLOCK_DSN": env["RANKLOCK_DSN"]}
    )
    assert first.exit_code == 0, first.output
    args = ["ingest", name, str(folder), "--home", str(home)]
    before = served_count(home)
    again = run(env, *args)
    assert served_count(home) == before + 1
    alone = run(env, *args, served=False)
    assert again.returncode == alone.returncode == 0, again.stderr
    timing = re.compile(rb"\(\d+\.\ds\)")  # "nothing was built (0.1s)": the one figure two runs differ in
    assert timing.sub(b"", again.stdout) == timing.sub(b"", alone.stdout) and b"unchanged" in again.stdout
    assert again.stderr == alone.stderr
    # db status: served too, and it reports the service that runs it.
    before = served_count(home)
    status = run(env, "db", "status", "--home", str(home), "--json")
    assert status.returncode == 0 and served_count(home) == before + 1
    services = json.loads(status.stdout)["command_services"]
    assert services and all(s["idle_s"] == Settings().cli_idle and s["rss_bytes"] > 10_000_000 for s in services)


def test_a_table_through_a_pipe_and_in_a_terminal_is_the_same_bytes(up: str, home: Path, env: dict[str, str]) -> None:
    args = ["search", up, "glaze firing in the kiln", "--home", str(home)]
    piped = run(env, *args)
    alone = run(env, *args, served=False)
    assert (piped.returncode, piped.stderr) == (alone.returncode, alone.stderr)
    assert untimed(piped.stdout) == untimed(alone.stdout) and b"kiln-" in piped.stdout
    # In a terminal of 72 x 20 with colour: rich asks the descriptors the service was handed.
    before = served_count(home)
    tty_served = in_terminal({**env, "RANKLOCK_CLI_SERVICE": "1"}, args)
    tty_alone = in_terminal({**env, "RANKLOCK_CLI_SERVICE": "0"}, args)
    assert served_count(home) == before + 1
    assert b"\x1b[" in tty_served and b"\r\n" in tty_served  # colour, and a terminal's line ends
    assert untimed(tty_served) == untimed(tty_alone)


def in_terminal(env: dict[str, str], args: list[str]) -> bytes:
    """What ``ranklock ARGS`` writes to a 72-column pseudo-terminal (stdin and stdout; stderr a pipe)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 20, 72, 0, 0))
    proc = subprocess.Popen([SCRIPT, *args], env=env, stdin=follower, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    out = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    _, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err
    return bytes(out)


def test_settings_of_one_command_do_not_reach_the_next(up: str, home: Path, env: dict[str, str]) -> None:
    base = ["search", up, "pump seals", "--home", str(home), "--json"]
    assert run(env, *base, "--set", "depth=1", "--set", "rrf_k=7", "-k", "2").returncode == 0
    same(run(env, *base), run(env, *base, served=False))
    # Another environment is another service's: the first service's never runs it.
    before = served_count(home)
    quiet = run(env, *base, RANKLOCK_LOG_QUERIES="0")
    wait_for_service(home, 2)
    again = run(env, *base, RANKLOCK_LOG_QUERIES="0")
    assert served_count(home) == before + 1
    same(quiet, again)
    same(again, run(env, *base, served=False, RANKLOCK_LOG_QUERIES="0"))


def test_relative_paths_and_the_home_from_the_environment(up: str, home: Path, env: dict[str, str]) -> None:
    parent = home.parent
    rel = ["search", up, "pump seals", "--json", "--home", "home"]
    before = served_count(home)
    same(run(env, *rel, cwd=parent), run(env, *rel, cwd=parent, served=False))
    by_env = ["search", up, "pump seals", "--json"]
    same(
        run(env, *by_env, cwd=parent, RANKLOCK_HOME="home"),
        run(env, *by_env, cwd=parent, served=False, RANKLOCK_HOME="home"),
    )
    assert served_count(home) >= before + 1


def test_two_commands_at_once(up: str, home: Path, env: dict[str, str]) -> None:
    args = [["search", up, q, "--home", str(home), "--json"] for q in ("pump seals", "glaze kiln", "draft memo")]
    results: dict[int, subprocess.CompletedProcess[bytes]] = {}

    def client_(i: int) -> None:
        results[i] = run(env, *args[i % 3])

    threads = [threading.Thread(target=client_, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, got in results.items():
        same(got, run(env, *args[i % 3], served=False))


def test_a_killed_service_costs_one_command_its_speed_not_its_answer(up: str, home: Path, env: dict[str, str]) -> None:
    args = ["search", up, "pump seals", "--home", str(home), "--json"]
    pids = {int(s["pid"]) for s in client.status(home)}
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while client.running(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not client.running(home) and any((home / "cli").glob("*.sock"))  # stale sockets stay behind
    same(run(env, *args), run(env, *args, served=False))  # in its own process, and a new service started
    wait_for_service(home)
    assert not pids & {int(s["pid"]) for s in client.status(home)}
    before = served_count(home)
    same(run(env, *args), run(env, *args, served=False))
    assert served_count(home) == before + 1


def test_a_service_killed_while_it_runs_a_command_says_so_and_does_not_hang(
    up: str, home: Path, env: dict[str, str]
) -> None:
    # A service that loads the model itself (RANKLOCK_EMBED_SERVICE=0): a new query's search takes seconds.
    slow = {**env, "RANKLOCK_EMBED_SERVICE": "0"}
    lexical = ["search", up, "pump seals", "--home", str(home), "--mode", "lexical", "--json"]
    others = {int(s["pid"]) for s in client.status(home)}
    assert run(slow, *lexical).returncode == 0  # starts this environment's service
    wait_for_service(home, len(others) + 1)
    pid = next(int(s["pid"]) for s in client.status(home) if int(s["pid"]) not in others)
    proc = subprocess.Popen(
        [SCRIPT, "search", up, f"pump seals {time.time_ns()}", "--home", str(home), "--json"],
        env={**slow, "RANKLOCK_CLI_SERVICE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not [s for s in client.status(home) if int(s["pid"]) == pid and s["active"] > 0]:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    # Asked for JSON (--json): the error is JSON too, on stdout (tests/test_cli_json_errors.py).
    assert proc.returncode == 2 and err == b""
    error = json.loads(out)["error"]
    assert error["type"] == "ServiceError"
    assert error["message"].startswith("the ranklock command service stopped while it ran this command")
    assert "RANKLOCK_CLI_SERVICE=0" in error["message"]


def test_ctrl_c_stops_the_command_in_the_service_too(up: str, home: Path, env: dict[str, str]) -> None:
    slow = {**env, "RANKLOCK_EMBED_SERVICE": "0", "RANKLOCK_CLI_SERVICE": "1"}
    lexical = ["search", up, "pump seals", "--home", str(home), "--mode", "lexical", "--json"]
    others = {int(s["pid"]) for s in client.status(home)}
    assert run(slow, *lexical).returncode == 0
    wait_for_service(home, len(others) + 1)
    pid = next(int(s["pid"]) for s in client.status(home) if int(s["pid"]) not in others)
    # Idle first: a service still finishing the command above is busy, and a busy service's client
    # runs the command in its own process (importing torch there, where Ctrl-C waits for the import).
    deadline = time.monotonic() + 60
    while [s for s in client.status(home) if int(s["pid"]) == pid and s["active"] > 0]:
        assert time.monotonic() < deadline
        time.sleep(0.02)

    # The command must be running in the service when Ctrl-C comes: it is held on a lock of the
    # collections table (its first read), so it cannot finish first, however fast the machine.
    # A shell gives its foreground command Ctrl-C's default handling.  Not inherited as is: a suite
    # started in the background by a non-interactive shell (`make check &`, nohup) has SIGINT ignored,
    # and a client that ignores it never stops (the failures this test had in such runs).
    def as_a_terminal_would() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    with psycopg.connect(env["RANKLOCK_DSN"]) as blocker:
        blocker.execute("LOCK TABLE ranklock.collections IN ACCESS EXCLUSIVE MODE")
        proc = subprocess.Popen(
            [SCRIPT, *lexical], env=slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_a_terminal_would
        )
        try:
            deadline = time.monotonic() + 60
            while not [s for s in client.status(home) if int(s["pid"]) == pid and s["active"] > 0]:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.02)
            time.sleep(0.5)  # past the hand-over: the service has begun the command, which waits on the lock
            proc.send_signal(signal.SIGINT)
            # The client exits within INTERRUPT_GRACE_S, while its command still waits on the lock in the
            # service (a C call no interrupt reaches) ...
            assert proc.wait(timeout=10) == 130
            # ... which saw it go (within WATCH_S), interrupts the command and stops listening (it serves
            # nothing more): all before the lock is released, or the command could finish first.
            deadline = time.monotonic() + 60
            while pid in {int(s["pid"]) for s in client.status(home)}:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert _alive(pid)  # still there: it waits for the interrupted command
        finally:
            if proc.poll() is None:
                proc.kill()
            blocker.rollback()  # the command's read returns, and the interrupt reaches it
            # The service holds the client's stdout until its command ends: then the pipe closes, empty.
            out, _ = proc.communicate(timeout=60)
    assert out == b""
    # The service interrupts the command and, since it may have left half-done state, exits after it.
    deadline = time.monotonic() + 120
    while pid in {int(s["pid"]) for s in client.status(home)} or _alive(pid):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    log = (home / "cli" / "service.log").read_text()
    assert f"ranklock command service {pid}: stopped after " in log


def test_after_ctrl_c_the_client_reports_the_status_the_interrupted_command_ended_with() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:

        def service_side() -> None:
            assert theirs.recv(1) == b""  # the client's Ctrl-C: its sending side closed
            client.write_message(theirs, {"status": "running"})  # a heartbeat, then the command's own end
            client.write_message(theirs, {"status": "exit", "code": 3})

        t = threading.Thread(target=service_side)
        t.start()
        assert client._interrupted(ours) == 3
        t.join()
    # A service that says nothing more: 130 once the grace is over.
    ours, theirs = socket.socketpair()
    with ours, theirs:
        t0 = time.monotonic()
        assert client._interrupted(ours) == 130
        assert client.INTERRUPT_GRACE_S <= time.monotonic() - t0 < client.INTERRUPT_GRACE_S + 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_db_stop_stops_every_command_service(up: str, home: Path, env: dict[str, str]) -> None:
    assert run(env, "search", up, "pump seals", "--home", str(home)).returncode == 0
    wait_for_service(home)
    r = CliRunner().invoke(app, ["db", "stop", "--home", str(home)])
    assert r.exit_code == 0, r.output
    assert "command service" in r.stdout and "stopped" in r.stdout
    assert not client.running(home) and client.status(home) == []
    assert not list((home / "cli").glob("*.sock"))


def test_a_folder_others_may_enter_is_never_used(coll: str, tmp_path: Path, env: dict[str, str]) -> None:
    home = tmp_path / "home"
    (home / "cli").mkdir(parents=True)
    os.chmod(home / "cli", 0o755)
    args = ["search", coll, "pump seals", "--home", str(home), "--mode", "lexical", "--json"]
    same(run(env, *args), run(env, *args, served=False))
    time.sleep(1)
    assert not client.running(home) and not list((home / "cli").iterdir())
    # Nor a socket of another user in a private folder: connect() checks the owner before connecting.
    os.chmod(home / "cli", 0o700)
    assert client.connect(str(home / "cli" / "nothing.sock")) is None


def test_the_entry_point_imports_only_the_standard_library() -> None:
    code = (
        "import sys; import ranklock.cli, ranklock.cli.client; "
        "print(sorted(m for m in ('typer', 'rich', 'psycopg', 'pydantic', 'numpy', 'ranklock.engine') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_the_client_and_the_settings_declare_the_same_things() -> None:
    declared = {v.name: v.default for v in ENV}
    # One resolution of the home (ranklock.home) for the client and the settings.
    assert client._home([]) == str(Settings().home)
    assert declared[client.SERVICE_ENV] == "1" and "RANKLOCK_CLI_IDLE" in declared
    assert shutil.which("ranklock", path=str(Path(SCRIPT).parent)) == SCRIPT


def test_a_service_whose_code_changed_under_it_knows_no_client_will_come(monkeypatch: pytest.MonkeyPatch) -> None:
    from ranklock.cli import service as cli_service

    svc = cli_service._Service(None, "fingerprint", 0, cwd=os.path.realpath(os.getcwd()))
    assert not svc.stale()  # looked at a moment ago
    svc.code_checked -= cli_service.STALE_CHECK_S
    assert not svc.stale()  # the same code
    svc.code_checked -= cli_service.STALE_CHECK_S
    monkeypatch.setattr(client, "_package_stamp", lambda: ["a file of the checkout edited"])
    assert svc.stale()  # every new client has another fingerprint: the service exits (serve's loop)


def test_version() -> None:
    from ranklock import __version__

    out = subprocess.run([SCRIPT, "--version"], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert (out.returncode, out.stdout, out.stderr) == (0, f"ranklock {__version__}\n", "")
    assert "--version" in CliRunner().invoke(app, ["--help"]).stdout


def test_two_tabs_of_one_terminal_share_one_service_and_another_environment_gets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = client.fingerprint()
    monkeypatch.setenv("WINDOWID", "77")
    monkeypatch.setenv("GNOME_TERMINAL_SCREEN", "/org/gnome/Terminal/screen/2")
    monkeypatch.setenv("SSH_CONNECTION", "10.0.0.2 50122 10.0.0.1 22")
    assert client.fingerprint() == base  # a terminal's or a login's own name: no service of its own
    monkeypatch.setenv("RANKLOCK_LOG_QUERIES", "0")
    assert client.fingerprint() != base  # anything else may change an output: a service of its own
