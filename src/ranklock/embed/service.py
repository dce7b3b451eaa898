"""The local embedding service: one process per data directory that keeps a model loaded.

Importing sentence-transformers and torch and loading all-MiniLM-L6-v2 takes seconds and ~550 MB
(bench/cli_startup.py, bench/warm.py measure it), while a search takes milliseconds.  So no
ranklock process of a data directory loads the model itself: a CLI command, a script's
:class:`~ranklock.Engine`, ``ranklock serve`` and ``ranklock mcp`` all ask this service, over a Unix
socket in the data directory (``<home>/embed/service.sock``), to run
:meth:`SentenceTransformerEmbedder.embed` for them (ranklock.embed.served).  The service runs that
very method on the very same weights, in the same environment, so the vectors are the same bits
as in-process ones (tests/test_embed_service.py compares them byte for byte, and a search's JSON).
One model in memory per data directory, however many processes search it.

Lifecycle:

* the first process that needs a vector starts the service (``python -m
  ranklock.embed.service``) and waits for it.  The service listens only once the model is
  loaded and has embedded one text, so a connection is a ready service;
* one service per data directory: it holds an exclusive ``flock`` on
  ``<home>/embed/service.lock`` for as long as it lives.  A second one started at the same
  moment (two commands at once) finds the lock taken and exits 0, and both commands use the
  first;
* a killed service (``kill -9``) releases the lock with its death.  Its socket file stays
  behind and refuses connections; the next request starts a new service, which removes the
  stale file before it binds (only the lock holder ever binds).  A client whose service died
  under it says so and starts a new one, once (ranklock.embed.served);
* a long-lived client (``ranklock serve``, ``ranklock mcp``: :meth:`Engine.warm`) *holds* the
  service with an open ``hold`` connection: while one is open the idle clock does not run, and
  the kernel closes it when the holder dies;
* it exits after ``RANKLOCK_EMBED_IDLE`` without a request and without a holder, on ``ranklock db
  stop`` (the ``stop`` request), or on SIGTERM.

Wire format (ranklock.framing): a message is a 4-byte big-endian length and that many bytes of
JSON.  An embed reply is followed by the vectors' raw little-endian float32 bytes (n x dim x 4):
no float goes through text.  An embed request names the model (directory and weights' sha256)
and the client's :func:`runtime`; the service refuses another model ("model mismatch": the
client replaces it) or another runtime ("runtime mismatch": the client embeds itself), never
answering with vectors another process would not compute.  The socket is created mode 0600 in
a 0700 directory and both ends check the other's user id (ranklock.local_socket), so only the
owner of the data directory can connect; requests are served one at a time (the model is one
CPU-bound object, and order must not change a result).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import os
import platform
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import framing, local_socket, service_lock

__all__ = [
    "MAX_MESSAGE_BYTES",
    "ServiceError",
    "ServicePaths",
    "Unresponsive",
    "await_reply",
    "connect",
    "hold",
    "read_message",
    "request",
    "running",
    "runtime",
    "serve",
    "start",
    "status",
    "stop",
    "write_message",
]

#: The largest message either side accepts (a batch of ingest texts is well under 1 MiB).
MAX_MESSAGE_BYTES = 256 * 2**20
#: How long a command waits for a service it started to load its model (seconds).  Generous:
#: under load the import alone has taken 20 s; a service that died is noticed at once.
START_TIMEOUT_S = 300.0
#: How long one request may take before the client gives up on the service (seconds).
REQUEST_TIMEOUT_S = 600.0
#: How often a client waiting for a reply checks that the service is at work (and signals get through).
POLL_S = 0.5
#: A service that spends no CPU time for this long while a request waits hangs (seconds).
HUNG_S = 15.0
#: The service's log is cut back to empty at start once it is larger than this.
LOG_MAX_BYTES = 2**20


class ServiceError(Exception):
    """The service could not be reached or broke off; the caller embeds in its own process instead."""


@dataclass(frozen=True)
class ServicePaths:
    """Where the service of one data directory keeps its socket, lock, log and state."""

    home: Path

    @property
    def dir(self) -> Path:
        return self.home.expanduser().resolve() / "embed"

    @property
    def socket(self) -> Path:
        return self.dir / "service.sock"

    @property
    def lock(self) -> Path:
        return self.dir / "service.lock"

    @property
    def log(self) -> Path:
        return self.dir / "service.log"

    def make_dir(self) -> None:
        """Create the folder mode 0700; OSError when it is not this user's private folder."""
        if not local_socket.make_private_dir(self.dir):
            raise OSError(f"{self.dir} is not a folder of this user with mode 0700")


#: The packages whose versions decide a vector's last bits besides the weights (kernels, tokenization).
RUNTIME_PACKAGES = ("numpy", "sentence-transformers", "tokenizers", "torch", "transformers")


@functools.cache
def runtime() -> dict[str, str]:
    """This environment's Python and :data:`RUNTIME_PACKAGES` versions, read without importing them (~10 ms).

    A service started from another environment (another virtualenv with the same data directory)
    may run other kernels on the same weights; a client compares this with the service's and embeds
    in its own process when they differ, so a vector is always the one this process would compute.
    """
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in RUNTIME_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "-"
    return out


# -- messages ---------------------------------------------------------------------------------


def write_message(sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
    framing.write_message(sock, header, payload)


def read_message(sock: socket.socket) -> dict[str, Any]:
    return framing.read_message(sock, limit=MAX_MESSAGE_BYTES, error=ServiceError, peer="the embedding service")


def read_payload(sock: socket.socket, size: int) -> bytes:
    if not 0 <= size <= MAX_MESSAGE_BYTES:
        raise ServiceError(f"payload of {size:,} bytes is out of bounds")
    return framing.read_exact(sock, size, error=ServiceError, peer="the embedding service")


# -- client -----------------------------------------------------------------------------------


def connect(home: Path, timeout: float = REQUEST_TIMEOUT_S) -> socket.socket | None:
    """A connection to the running service of ``home``, or None when none listens (or not this user's)."""
    # This user's socket in this user's 0700 folder, served by this user (ranklock.local_socket).
    return local_socket.connect(ServicePaths(home).socket, timeout)


def request(home: Path, header: dict[str, Any], *, timeout: float = REQUEST_TIMEOUT_S) -> tuple[dict[str, Any], bytes]:
    """Send one request to the running service; its reply and payload.  ServiceError when none answers."""
    sock = connect(home, timeout)
    if sock is None:
        raise ServiceError("no embedding service is running")
    with sock:
        try:
            write_message(sock, header)
            await_reply(sock, home, limit_s=timeout)
            reply = read_message(sock)
            payload = read_payload(sock, int(reply.get("payload_bytes", 0)))
        except (OSError, struct.error, ValueError) as exc:
            raise ServiceError(f"the embedding service broke off ({exc})") from None
    return reply, payload


def hold(home: Path) -> socket.socket | None:
    """Hold the running service of ``home`` loaded while the returned connection is open; None when none runs.

    The caller keeps the connection and closes it when it no longer needs the model (or dies: the
    kernel closes it then).  A holder sends nothing more; the service sends nothing after its reply,
    so the connection turning readable means the service has gone.
    """
    sock = connect(home, timeout=5.0)
    if sock is None:
        return None
    try:
        write_message(sock, {"op": "hold"})
        reply = read_message(sock)
    except (OSError, ServiceError, struct.error):
        sock.close()
        return None
    if not reply.get("ok"):
        sock.close()
        return None
    return sock


class Unresponsive(ServiceError):
    """The service runs but does not answer (stopped, or hung): asking it again would wait again."""


def unresponsive(pid: int | None) -> str | None:
    """Why the service ``pid`` cannot answer now (stopped by a signal), or None when it can or is gone."""
    import psutil

    if pid is None:
        return None
    try:
        state = psutil.Process(pid).status()
    except psutil.Error:
        return None
    if state in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
        return f"it is stopped (process state {state}: SIGSTOP, or a debugger); `kill -CONT {pid}` resumes it"
    return None


def await_reply(sock: socket.socket, home: Path, *, limit_s: float = REQUEST_TIMEOUT_S) -> None:
    """Wait until the service has a reply to read, checking every :data:`POLL_S` that it is working.

    Waiting in short slices is also what lets SIGINT, SIGTERM or the command service's interrupt stop
    the caller at once.  Raises :class:`Unresponsive` when the service is stopped, or has spent no CPU
    time for :data:`HUNG_S` (a model at work always does), and ServiceError after ``limit_s``.
    """
    import psutil

    pid = local_socket.peer_pid(sock)
    where = f"the embedding service of {ServicePaths(home).dir} (pid {pid})"
    t0 = last = time.monotonic()
    try:
        cpu = sum(psutil.Process(pid).cpu_times()[:2]) if pid else 0.0
    except psutil.Error:
        cpu = 0.0
    while not select.select([sock], [], [], POLL_S)[0]:
        now = time.monotonic()
        why = unresponsive(pid)
        if why is not None:
            raise Unresponsive(f"{where} does not answer: {why}")
        try:
            spent = sum(psutil.Process(pid).cpu_times()[:2]) if pid else cpu
        except psutil.Error:
            raise ServiceError(f"{where} exited before it answered") from None
        if spent != cpu:
            cpu, last = spent, now
        elif now - last > HUNG_S:
            raise Unresponsive(
                f"{where} has not answered for {now - t0:.0f} s and spent no CPU time for {HUNG_S:g} s: it hangs; "
                "`ranklock db stop` stops it (the next command starts a new one)"
            )
        if now - t0 > limit_s:
            raise ServiceError(f"{where} did not answer within {limit_s:g} s")


def running(home: Path) -> bool:
    """Whether a service holds the lock of ``home`` (running, or loading its model)."""
    paths = ServicePaths(home)
    return paths.lock.exists() and service_lock.held(paths.lock)


def start(home: Path, model_dir: str, model_id: str, expected_sha256: str | None, idle_s: float) -> socket.socket:
    """Start a service for ``home`` unless one is starting already, and wait until it listens.

    Raises ServiceError when it does not come up (its log says why); the caller then embeds
    in its own process, which raises the real error if there is one (a missing extra, bad weights).
    """
    paths = ServicePaths(home)
    cmd = [sys.executable, "-m", "ranklock.embed.service", "--home", str(paths.dir.parent), "--model-dir", model_dir]
    cmd += ["--id", model_id, "--idle", str(idle_s)]
    if expected_sha256:
        cmd += ["--sha256", expected_sha256]
    try:
        paths.make_dir()
        with contextlib.suppress(OSError):
            if paths.log.stat().st_size > LOG_MAX_BYTES:
                paths.log.write_text("")
        # Through a launcher that starts the service in a session of its own and exits: the service is
        # nobody's child, so it outlives this command, never gets its terminal's Ctrl-C, and leaves no
        # zombie in a long-lived caller.  The launcher prints the service's pid.
        launched = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(paths.log), *cmd],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        pid = int(launched.stdout)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:  # a data directory that cannot hold it
        raise ServiceError(f"cannot start the embedding service in {paths.dir}: {exc}") from None
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        sock = connect(home)
        if sock is not None:
            return sock
        # Gone without a socket: it failed (its log says why), or another service held the lock; then
        # wait for that one, unless it is gone too.
        if not _alive(pid) and not running(home):
            raise ServiceError(f"the embedding service exited before it was ready; see {paths.log}")
        time.sleep(0.02)
    raise ServiceError(f"the embedding service did not start within {START_TIMEOUT_S:.0f} s; see {paths.log}")


_LAUNCHER = """
import subprocess, sys
with open(sys.argv[1], "ab") as log:
    p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
print(p.pid)
"""


def _alive(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def status(home: Path) -> dict[str, Any] | None:
    """What the running service says of itself (pid, model, requests served), or None when none runs.

    A service that runs but does not answer is reported as such: ``{"pid", "unresponsive": why}``.
    """
    try:
        reply, _ = request(home, {"op": "status"}, timeout=5.0)
    except ServiceError as exc:
        if not running(home):
            return None
        sock = connect(home, 1.0)
        pid = local_socket.peer_pid(sock) if sock is not None else None
        if sock is not None:
            sock.close()
        return {"pid": pid, "unresponsive": str(exc)}
    return reply


def stop(home: Path, timeout: float = 30.0) -> bool:
    """Stop the service of ``home`` and wait until it has exited; False when none was running."""
    if not running(home):
        return False
    with contextlib.suppress(ServiceError):
        request(home, {"op": "stop"}, timeout=5.0)
    deadline = time.monotonic() + timeout
    while running(home) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


# -- the service ------------------------------------------------------------------------------


class _Service:
    def __init__(self, embedder: Any, idle_s: float) -> None:
        self.embedder = embedder
        self.idle_s = idle_s
        self.embed_lock = threading.Lock()
        self.stopping = threading.Event()
        self.last_request = time.monotonic()
        self.active = 0
        self.requests = 0
        self.started_at = time.time()
        self.state_lock = threading.Lock()
        #: The pids of the processes holding the service now (:meth:`hold`).
        self.holders: list[int | None] = []

    def handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(REQUEST_TIMEOUT_S)
            with self.state_lock:
                self.active += 1
            try:
                if local_socket.peer_uid(conn) != os.geteuid():
                    return  # another user's process: the 0600 socket should have kept it out
                msg = read_message(conn)
                if msg.get("op") == "hold":
                    self.hold(conn)
                    return
                header, payload = self.answer(msg)
                write_message(conn, {**header, "payload_bytes": len(payload)}, payload)
            except (ServiceError, OSError, struct.error):
                pass  # a client that went away or sent garbage: nothing to answer
            finally:
                with self.state_lock:
                    self.active -= 1
                    self.last_request = time.monotonic()

    def hold(self, conn: socket.socket) -> None:
        """Stay loaded while ``conn`` is open: a long-lived client (``ranklock serve``) holds the service.

        The connection counts as active, so the idle clock does not run; it ends when the client
        closes it or dies (the kernel closes it then), and the clock starts from there.
        """
        pid = local_socket.peer_pid(conn)
        with self.state_lock:
            self.holders.append(pid)
        try:
            write_message(conn, {"ok": True, "pid": os.getpid(), "payload_bytes": 0})
            conn.settimeout(None)
            while conn.recv(4096):
                pass  # a holder sends nothing; EOF (b"") is its going away
        finally:
            with self.state_lock:
                self.holders.remove(pid)

    def answer(self, msg: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        emb = self.embedder
        op = msg.get("op")
        if op == "status":
            return {
                "ok": True,
                "pid": os.getpid(),
                "id": emb.id,
                "model_dir": str(emb.model_dir),
                "sha256": emb.sha256,
                "dim": emb.dim,
                "requests": self.requests,
                "started_at": self.started_at,
                "idle_s": self.idle_s,
                "idle_for_s": round(time.monotonic() - self.last_request, 1),
                "held_by": sorted(p for p in self.holders if p is not None),
                "runtime": runtime(),
            }, b""
        if op == "stop":
            self.stopping.set()
            return {"ok": True}, b""
        if op != "embed":
            return {"ok": False, "error": f"unknown op {op!r}; use embed, hold, status or stop"}, b""
        if msg.get("runtime") != runtime():
            # Another environment's client: its in-process vectors could differ from ours in their last bits.
            return {"ok": False, "error": "runtime mismatch", "runtime": runtime()}, b""
        if msg.get("model_dir") != str(emb.model_dir) or msg.get("sha256") != emb.sha256:
            # Another model, or these files changed since the service loaded them: the client restarts it.
            return {"ok": False, "error": "model mismatch", "sha256": emb.sha256}, b""
        texts = msg.get("texts")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return {"ok": False, "error": "texts must be a list of strings"}, b""
        with self.embed_lock:
            mat = emb.embed(texts)
            self.requests += 1
        import numpy as np

        data = np.ascontiguousarray(mat, dtype="<f4").tobytes()
        return {"ok": True, "n": len(texts), "dim": int(mat.shape[1]), "sha256": emb.sha256}, data

    def idle(self) -> bool:
        with self.state_lock:
            quiet = time.monotonic() - self.last_request
            return self.idle_s > 0 and self.active == 0 and quiet > self.idle_s


def serve(home: Path, model_dir: str, model_id: str, expected_sha256: str | None, idle_s: float) -> int:
    """Run the service of ``home`` until it is stopped or idle; 0 also when another one holds the lock."""
    paths = ServicePaths(home)
    paths.make_dir()
    lock = open(paths.lock, "a+")  # noqa: SIM115 - held, and its flock with it, for the life of the process
    if not service_lock.take(lock.fileno()):
        return 0  # another service runs or is loading: the command that started this one uses it
    from .sentence import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(model_dir, id=model_id, expected_sha256=expected_sha256)
    emb.embed(["ranklock"])  # load and warm before listening: a connection means ready
    service = _Service(emb, idle_s)
    signal.signal(signal.SIGTERM, lambda *_: service.stopping.set())
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()  # a killed predecessor's; we hold the lock, so nobody else binds here
    listener = local_socket.listen(paths.socket)  # born 0600 in a 0700 folder: nobody else may connect
    listener.settimeout(0.1)  # how often the loop looks at the stop flag and the idle clock
    print(f"ranklock embedding service {os.getpid()}: {model_id} ({emb.sha256[:12]}) ready", flush=True)
    try:
        while not service.stopping.is_set() and not service.idle():
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
            paths.socket.unlink()
        listener.close()
    print(f"ranklock embedding service {os.getpid()}: stopped after {service.requests} requests", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ranklock.embed.service", description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--id", required=True)
    ap.add_argument("--sha256", default=None)
    ap.add_argument("--idle", type=float, default=0.0, help="exit after this many seconds without a request (0: never)")
    args = ap.parse_args(argv)
    return serve(args.home, args.model_dir, args.id, args.sha256, args.idle)


if __name__ == "__main__":
    sys.exit(main())
