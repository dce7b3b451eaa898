"""The client side of the command service: hand a quick command to a warm process, standard library only.

A ``ranklock`` command is a new Python process, and importing typer, rich, psycopg and the engine
(~0.8 s of CPU) and building the CLI's command tree (~0.2 s) cost many times what a search, a
``snapshot list`` or an unchanged ingest itself does (~0.05-0.2 s; bench/cli_startup.py).  So the entry point
(:func:`ranklock.cli.main`) first calls :func:`run_served`, which imports nothing beyond the
standard library: when the data directory has a command service (ranklock.cli.service) for this
very interpreter and environment, the command runs there, in a process that has the CLI imported
already, and this process only waits for its exit status.

What makes the output the in-process output, byte for byte:

* the service receives this process's standard input, output and error as file descriptors
  (SCM_RIGHTS) and puts them in place of its own for the command, so whatever the command writes
  goes straight to the same terminal, pipe or file, ``isatty()`` and the terminal's width answer as
  they would here, and stdout and stderr interleave as they would here;
* it runs the command with this process's argv, program name, environment and working directory
  (relative paths resolve as here), and text streams built as Python built ours (encoding, errors,
  line buffering);
* a service serves one *fingerprint* only (its socket is named for it): this interpreter, its
  flags and ``sys.path``, every environment variable (less the few a shell changes per command,
  ``_``, ``PWD``, ``OLDPWD``, ``SHLVL``, and those naming a terminal tab or an SSH login:
  :data:`VOLATILE_ENV`), and the size and mtime of every file of the ranklock
  package and of every ``sys.path`` folder.  Another environment, an edited checkout or an upgraded
  package gets a service of its own, never a stale one (and the stale one exits).

When no service answers, the command runs in this process as before (nothing is lost but the
time) and a service is started in the background for the next command.  Once the service has
begun a command, this process is committed to it: if the service dies before it reports the exit
status (``kill -9``), the command fails with exit status 2 and says so, because rerunning it here
could print part of its output twice.  Every wait has a timeout; a running command sends a
heartbeat every second, so a stopped service is noticed within :data:`SILENCE_TIMEOUT_S`.  Ctrl-C
reaches the command in the service as it would in this process (:func:`_interrupted`).

    >>> run_served(["ranklock", "search", "docs", "pump seals"])   # doctest: +SKIP
    0
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import sys
import time
from typing import Any

from .. import framing, local_socket, service_lock
from ..home import find_home, home_exists

__all__ = [
    "OWN_PROCESS_OPTIONS",
    "SERVED_COMMANDS",
    "ServiceBroke",
    "ServicePaths",
    "code_stamp",
    "connect",
    "fingerprint",
    "read_message",
    "run_served",
    "running",
    "served",
    "status",
    "stop",
    "wants_json",
    "write_message",
]

#: The command service is used unless this is ``0`` (settings.ENV declares it).
SERVICE_ENV = "RANKLOCK_CLI_SERVICE"
#: The commands the service runs, by their words: the reads, which take milliseconds, and ``ingest``,
#: a write that takes as long when nothing changed (issue 45: each spent 2-5 s importing in its own
#: process).  What runs for long (serve, mcp, eval, replica create), stops the services (db stop), or
#: loads a model or a domain pack into the process (ask, plan) runs in its own process.
SERVED_COMMANDS = frozenset(
    {
        ("search",),
        ("collections",),
        ("ingest",),
        ("collection", "list"),
        ("collection", "show"),
        ("document", "get"),
        ("snapshot", "list"),
        ("snapshot", "show"),
        ("snapshot", "diff"),
        ("snapshot", "manifest"),
        ("db", "status"),
        ("token", "list"),
    }
)
#: Options that make a served command run until stopped: it runs in its own process.
OWN_PROCESS_OPTIONS = frozenset({"--watch"})
#: Environment variables a shell sets per command or per folder, and those a terminal or an SSH login sets
#: to name itself (two tabs of one terminal differ in them only: issue 45 saw two services of one user).
#: Nothing reads them at import, which is all a service's environment decides (each command runs with its
#: client's whole environment); the command still gets their values.
VOLATILE_ENV = frozenset(
    {
        "_",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "WINDOWID",
        "GNOME_TERMINAL_SCREEN",
        "TERM_SESSION_ID",
        "ITERM_SESSION_ID",
        "KONSOLE_DBUS_SESSION",
        "KONSOLE_DBUS_WINDOW",
        "WT_SESSION",
        "TMUX_PANE",
        "SSH_CLIENT",
        "SSH_CONNECTION",
        "SSH_TTY",
        "XDG_SESSION_ID",
    }
)
#: Seconds to connect, and to hear whether the service takes the command (it waits up to 1 s for
#: a command that runs before it).
CONNECT_TIMEOUT_S = 1.0
READY_TIMEOUT_S = 5.0
#: Longest silence from a service that runs our command (it sends a heartbeat every second).
SILENCE_TIMEOUT_S = 15.0
#: After Ctrl-C, how long the client waits for the interrupted command to end its own way (what it prints
#: then reaches the terminal before the shell's prompt); a second Ctrl-C, or a command stuck where an
#: interrupt cannot reach it (a C call), ends the wait.
INTERRUPT_GRACE_S = 3.0
#: The largest message either side accepts (a request carries the environment).
MAX_MESSAGE_BYTES = 16 * 2**20
#: The first byte of a connection: a command with its three descriptors, or a control request.
RUN, CONTROL = b"R", b"C"


class ServiceBroke(Exception):
    """The command service closed the connection or sent something that is not a message."""


class ServicePaths:
    """Where the command services of one data directory keep their sockets, locks and log."""

    def __init__(self, home: str | os.PathLike[str], fingerprint: str = "") -> None:
        #: ``<home>/cli``: mode 0700, so only the owner of the data directory can reach a socket in it.
        self.dir = os.path.join(os.path.realpath(os.path.expanduser(os.fspath(home))), "cli")
        self.name = fingerprint[:16]

    @property
    def home(self) -> str:
        return os.path.dirname(self.dir)

    @property
    def socket(self) -> str:
        return os.path.join(self.dir, f"{self.name}.sock")

    @property
    def lock(self) -> str:
        return os.path.join(self.dir, f"{self.name}.lock")

    @property
    def log(self) -> str:
        return os.path.join(self.dir, "service.log")

    def sockets(self) -> list[str]:
        """Every service socket in the folder (each fingerprint has its own)."""
        try:
            names = sorted(os.listdir(self.dir))
        except OSError:
            return []
        return [os.path.join(self.dir, n) for n in names if n.endswith(".sock")]


# -- the fingerprint --------------------------------------------------------------------------


def _package_stamp() -> list[Any]:
    """(path, size, mtime) of every file of the ranklock package: a changed checkout changes it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out: list[Any] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(folder, name))
                out.append([os.path.relpath(os.path.join(folder, name), root), st.st_size, st.st_mtime_ns])
    return [root, out]


def _path_stamp(entry: str, cwd: str) -> int | None:
    """A ``sys.path`` folder's mtime, which moves when pip adds or removes a package in it.

    Not the working folder's (``python -m`` puts it first): every file a command writes there
    would move it.
    """
    try:
        if not entry or os.path.realpath(entry) == cwd:
            return None
        return os.stat(entry).st_mtime_ns
    except OSError:
        return None


def code_stamp(cwd: str) -> list[Any]:
    """The part of the fingerprint that the installed code makes: ranklock's files and the mtimes of the
    ``sys.path`` folders (``cwd`` is the working folder the fingerprint was taken in).  A service whose
    stamp has moved serves no client any more (they have another fingerprint): it exits."""
    return [[_path_stamp(p, cwd) for p in sys.path], _package_stamp()]


def fingerprint() -> str:
    """What a command's output may depend on besides its arguments, its streams and its folder (sha256 hex)."""
    xoptions = sorted((str(k), str(v)) for k, v in sys._xoptions.items())
    cwd = os.path.realpath(os.getcwd())
    facts = {
        "executable": sys.executable,
        "version": sys.version,
        "flags": repr(sys.flags),
        "xoptions": xoptions,
        "warnoptions": list(sys.warnoptions),
        "path": list(sys.path),
        "code": code_stamp(cwd),
        "env": sorted((k, v) for k, v in os.environ.items() if k not in VOLATILE_ENV),
        "uid": os.geteuid(),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()


# -- messages ---------------------------------------------------------------------------------


def write_message(sock: socket.socket, msg: dict[str, Any]) -> None:
    framing.write_message(sock, msg)


def read_message(sock: socket.socket) -> dict[str, Any]:
    return framing.read_message(sock, limit=MAX_MESSAGE_BYTES, error=ServiceBroke, peer="the command service")


# -- connecting -------------------------------------------------------------------------------


def connect(path: str, timeout: float = CONNECT_TIMEOUT_S) -> socket.socket | None:
    """A connection to the service listening on ``path``, or None (ranklock.local_socket: this user's only)."""
    return local_socket.connect(path, timeout)


# -- control ----------------------------------------------------------------------------------


def _control(path: str, op: str, timeout: float = 5.0) -> dict[str, Any] | None:
    sock = connect(path, timeout)
    if sock is None:
        return None
    with sock:
        try:
            socket.send_fds(sock, [CONTROL], [])
            write_message(sock, {"op": op})
            return read_message(sock)
        except (OSError, ServiceBroke, struct.error):
            return None


def running(home: str | os.PathLike[str]) -> bool:
    """Whether a command service of ``home`` is alive (serving, or starting)."""
    paths = ServicePaths(home)
    try:
        locks = [os.path.join(paths.dir, n) for n in os.listdir(paths.dir) if n.endswith(".lock")]
    except OSError:
        return False
    return any(service_lock.held(lock) for lock in locks)


def status(home: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """What each running command service of ``home`` says of itself (pid, commands served), by fingerprint."""
    replies = (_control(path, "status") for path in ServicePaths(home).sockets())
    return [r for r in replies if r is not None and r.get("ok")]


def stop(home: str | os.PathLike[str], timeout: float = 30.0) -> int:
    """Stop every command service of ``home`` and wait until each has exited; how many there were.

    By their locks, so a service still starting (it binds its socket once it has imported the CLI)
    is waited for and stopped too.  A socket whose lock nobody holds (its service was killed) is
    removed on the way.
    """
    paths = ServicePaths(home)
    try:
        locks = sorted(os.path.join(paths.dir, n) for n in os.listdir(paths.dir) if n.endswith(".lock"))
    except OSError:
        return 0
    stopped = 0
    for lock in locks:
        sock = lock.removesuffix(".lock") + ".sock"
        if not service_lock.held(lock):
            with contextlib.suppress(OSError):
                os.unlink(sock)
            continue
        deadline = time.monotonic() + timeout
        asked = False
        while service_lock.held(lock) and time.monotonic() < deadline:
            asked = asked or _control(sock, "stop") is not None
            time.sleep(0.02)
        stopped += 1
    return stopped


# -- running a command ------------------------------------------------------------------------


def _home(args: list[str]) -> str:
    """The data directory the command names: its last ``--home``, else the one ranklock.home finds.

    Only where the service is looked for: a misread (a ``--home`` that is the value of another
    option) finds another folder's service or none, and the command, which the service parses with
    the real parser, reads its own ``--home`` either way.
    """
    home = None
    i = 0
    while i < len(args) and args[i] != "--":
        if args[i] == "--home" and i + 1 < len(args):
            home = args[i + 1]
            i += 1
        elif args[i].startswith("--home="):
            home = args[i].removeprefix("--home=")
        i += 1
    return str(find_home(home).path)


def _program_name() -> str:
    """The program name click would give this process in usage lines (typer's ``_detect_program_name``)."""
    main = sys.modules.get("__main__")
    path = sys.argv[0]
    package = getattr(main, "__package__", None)
    if package in (None, ""):
        return os.path.basename(path)
    module = str(package)
    name = os.path.splitext(os.path.basename(path))[0]
    if name != "__main__":
        module = f"{module}.{name}"
    return f"python -m {module.lstrip('.')}"


def _streams() -> list[dict[str, Any]]:
    """How Python built this process's text streams, for the service to build the same over our descriptors."""
    out = []
    for fd, stream in enumerate((sys.stdin, sys.stdout, sys.stderr)):
        if stream is None or stream.fileno() != fd:
            raise ValueError(f"standard stream {fd} is not descriptor {fd}")
        out.append(
            {
                "encoding": stream.encoding,
                "errors": stream.errors,
                "line_buffering": stream.line_buffering,
                "write_through": getattr(stream, "write_through", False),
            }
        )
    return out


def wants_json(args: list[str]) -> bool:
    """Whether a command's ``args`` (before ``--``) ask for JSON: ``--json``, ``--format json|jsonl``; then its
    errors are JSON too (ranklock.cli._common.fail)."""
    args = args[: args.index("--")] if "--" in args else args
    for i, arg in enumerate(args):
        if arg == "--json" or arg in ("--format=json", "--format=jsonl"):
            return True
        if arg == "--format" and i + 1 < len(args) and args[i + 1] in ("json", "jsonl"):
            return True
    return False


def served(argv: list[str]) -> bool:
    """Whether the command service runs ``argv`` (``ranklock WORDS ...``): one of :data:`SERVED_COMMANDS`,
    without an option of :data:`OWN_PROCESS_OPTIONS` before ``--``."""
    words = tuple(argv[1:3])
    if words[:1] not in SERVED_COMMANDS and words[:2] not in SERVED_COMMANDS:
        return False
    args = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    return not any(a.split("=", 1)[0] in OWN_PROCESS_OPTIONS for a in args)


def run_served(argv: list[str]) -> int | None:
    """Run ``argv`` in the command service; its exit status, or None: run it in this process."""
    if not served(argv):
        return None
    if (os.environ.get(SERVICE_ENV) or "1") in ("0", "false", "no"):
        return None
    # Nothing before the service has begun the command may fail it: whatever goes wrong (a deleted
    # working folder, a closed or replaced stream, a platform without SCM_RIGHTS or SO_PEERCRED), the
    # command runs in this process, as it would without the service.
    try:
        fp = fingerprint()
        paths = ServicePaths(_home(argv[2:]), fp)
        umask = os.umask(0o022)
        os.umask(umask)
        request = {
            "op": "run",
            "argv": list(argv),
            "prog_name": _program_name(),
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "umask": umask,
            "fingerprint": fp,
            "streams": _streams(),
        }
        sock = connect(paths.socket)
    except Exception:
        return None
    if sock is None:
        with contextlib.suppress(Exception):
            # With an external server (RANKLOCK_DSN, --dsn) the home only holds the sockets: a folder will do.
            external = bool(os.environ.get("RANKLOCK_DSN")) or any(a.split("=")[0] == "--dsn" for a in argv[2:])
            _start(paths, fp, external=external)
        return None
    with sock:
        return _run(sock, request, paths)


def _run(sock: socket.socket, request: dict[str, Any], paths: ServicePaths) -> int | None:
    try:
        sock.settimeout(READY_TIMEOUT_S)
        socket.send_fds(sock, [RUN], [0, 1, 2])
        write_message(sock, request)
        reply = read_message(sock)
        if reply.get("status") != "ready":
            return None  # busy, stopping, or not this fingerprint's: run here
        write_message(sock, {"go": True})
    except Exception:
        return None  # it had not begun: run here
    # From here the service runs the command and writes to our terminal: we wait for its status.
    sock.settimeout(SILENCE_TIMEOUT_S)
    try:
        while True:
            msg = read_message(sock)
            if msg.get("status") == "exit":
                return int(msg["code"])
    except KeyboardInterrupt:
        return _interrupted(sock)
    except Exception as exc:
        message = (
            f"the ranklock command service stopped while it ran this command ({exc}); its output may be "
            f"incomplete. Run it again; RANKLOCK_CLI_SERVICE=0 runs commands in their own process. The service's "
            f"log: {paths.log}"
        )
        if wants_json(list(request["argv"][2:])):
            sys.stdout.write(json.dumps({"error": {"type": "ServiceError", "message": message}}) + "\n")
        else:
            sys.stderr.write(f"error: {message}\n")
        return 2


def _interrupted(sock: socket.socket) -> int:
    """Ctrl-C while the service runs our command: tell it, and wait a moment for the command's own end.

    The service, in a session of its own, does not get the signal.  Closing our sending side is the
    message: it sees the end close and interrupts the command as Ctrl-C would (KeyboardInterrupt), and
    the command ends its own way (an ingest says what it kept) before we return its status.  130 (typer's
    status for Ctrl-C) after :data:`INTERRUPT_GRACE_S` without one, or at a second Ctrl-C.
    """
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            msg = read_message(sock)
            if msg.get("status") == "exit":
                return int(msg["code"])
    except (KeyboardInterrupt, Exception):  # a second Ctrl-C, a timeout, a service gone: stop now
        pass
    return 130


def _start(paths: ServicePaths, fp: str, *, external: bool = False) -> None:
    """Start this fingerprint's service in the background, for the next command; never fails the command.

    Only in a data directory that holds a database (a first write makes it; a read never does), or,
    for a command on an ``external`` server, one that exists; and only in one of this user's.  The
    service is spawned in a session of its own: no terminal's Ctrl-C reaches it, and it outlives us.
    """
    if not (home_exists(paths.home) or (external and os.path.isdir(paths.home))):
        return
    with contextlib.suppress(FileExistsError, OSError):
        os.mkdir(paths.dir, 0o700)
    if not local_socket.private_dir(paths.dir):
        return
    import subprocess  # only here: a served command never needs it

    flags: list[str] = getattr(subprocess, "_args_from_interpreter_flags", list)()
    code = (
        "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
        "from ranklock.cli.service import main; sys.exit(main(sys.argv[2:]))"
    )
    args = [sys.executable, *flags, "-c", code, json.dumps(sys.path), "--home", paths.home, "--fingerprint", fp]
    try:
        with contextlib.suppress(OSError):
            if os.path.getsize(paths.log) > 2**20:
                os.truncate(paths.log, 0)
        log = os.open(paths.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.posix_spawn(
                sys.executable,
                args,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0),
                    (os.POSIX_SPAWN_DUP2, log, 1),
                    (os.POSIX_SPAWN_DUP2, log, 2),
                ],
                setsid=True,
            )
        finally:
            os.close(log)
            os.close(null)
    except OSError:
        pass  # a full disk, a read-only folder: the next command tries again
