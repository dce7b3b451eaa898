"""An embedder whose model runs in the local embedding service (ranklock.embed.service).

Every process of a data directory embeds through it: a ``ranklock`` command (a new process each
time, which never imports torch), a script's :class:`~ranklock.Engine`, ``ranklock serve`` and
``ranklock mcp`` (ranklock.embed.home_embedder).  The vector comes from the service the first of
them started, which runs :meth:`SentenceTransformerEmbedder.embed` itself in the same environment, so
the vector is the one this process would have computed, bit for bit; a reply for other weights, of
another shape or from another environment is refused, never used.  When the service goes wrong it is
said, never silent: one that exited since it last answered (killed, idle) is started again; one that
breaks off mid-request is replaced and asked once more; one that fails again, cannot start or does not
answer leaves this process to load the model itself (slower, the same vectors, and the real error if
there is one: a missing extra, damaged weights).  A long-lived process *holds* the service
(:meth:`ServedEmbedder.hold`), so its idle limit never unloads the model under a server.

The weights' sha256 is what the collection check compares (``Engine._collection_embedder``),
on every search, also when the query's vector is already cached.  Hashing 90 MB costs ~0.2 s,
most of a warm search; so the digest is kept in ``<home>/embed/weights.json`` with the file's
size, mtime, ctime, inode and device, and hashed again whenever any of them changes (a
replaced or rewritten file always changes its ctime, which no user-space call can set back).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .. import local_socket
from . import service
from .base import Embedder, Matrix
from .sentence import HFTokenizer, SentenceTransformerEmbedder

__all__ = ["ServedEmbedder", "serve_through"]

log = logging.getLogger("ranklock.embed")


class ServedEmbedder:
    """``inner``'s identity and tokenizer; its vectors from the embedding service of ``home``."""

    def __init__(self, inner: SentenceTransformerEmbedder, home: Path, *, idle_s: float) -> None:
        self.inner = inner
        self.home = Path(home)
        self.idle_s = idle_s
        self.id = inner.id
        self.dim = inner.dim
        #: How the last call got its vectors: "service", "in-process" or None before any call.
        self.last_path: str | None = None
        #: The pid of the service that answered last: if it is gone at the next call, that is said.
        self._last_pid: int | None = None
        #: The open ``hold`` connection (:meth:`hold`), and whether holding was asked for.
        self._hold: socket.socket | None = None
        self._holding = False
        self._lock = threading.Lock()

    @property
    def tokenizer(self) -> HFTokenizer:
        return self.inner.tokenizer

    @cached_property
    def sha256(self) -> str:
        path = self.inner.weights_file()
        cache = service.ServicePaths(self.home).dir / "weights.json"
        st = path.stat()
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        try:
            known = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        entry = known.get(str(path)) if isinstance(known, dict) else None
        expected = self.inner.expected_sha256
        if isinstance(entry, dict) and entry.get("stat") == stamp:
            digest = str(entry.get("sha256"))
            if expected is None or digest == expected:
                return digest
        digest = self.inner.sha256  # hashes the file, and refuses weights that are not the expected ones
        known = known if isinstance(known, dict) else {}
        known[str(path)] = {"stat": stamp, "sha256": digest}
        with contextlib.suppress(OSError):  # a read-only data directory: hash every time, as before
            service.ServicePaths(self.home).make_dir()
            tmp = cache.with_name(f"weights.json.{os.getpid()}")
            tmp.write_text(json.dumps(known, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, cache)
        return digest

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not self.inner.loaded:
            try:
                out = self._served(list(texts))
                self.last_path = "service"
                return out
            except service.ServiceError as exc:
                # Said, never silent: this process goes on with the model loaded here (seconds, ~550 MB).
                log.warning("%s; this process loads the model itself instead (the same vectors).", exc)
        self.last_path = "in-process"
        return self.inner.embed(texts)

    def hold(self) -> bool:
        """Keep the service loaded for as long as this embedder is open: what a long-lived process does.

        ``ranklock serve`` and ``ranklock mcp`` hold it (:meth:`ranklock.Engine.warm`): its idle limit
        then never unloads the model under a server, and a service that dies is replaced and held
        again at the next vector.  False when no service runs (the next :meth:`embed` starts one and
        holds it).  :meth:`release` lets go.
        """
        if self.inner.loaded:
            return False  # the model is in this process already (the service failed it): nothing to hold
        with self._lock:
            self._holding = True
            return self._hold_now()

    def release(self) -> None:
        """Close the hold connection: the service's idle clock runs again."""
        with self._lock:
            self._holding = False
            if self._hold is not None:
                self._hold.close()
                self._hold = None

    def _hold_now(self) -> bool:
        """(Under the lock.)  A live hold connection, opened again if its service has gone."""
        if self._hold is not None and not _closed(self._hold):
            return True
        if self._hold is not None:
            self._hold.close()
        self._hold = service.hold(self.home)
        return self._hold is not None

    def _served(self, texts: list[str]) -> Matrix:
        where = service.ServicePaths(self.home).dir
        header = {
            "op": "embed",
            "model_dir": str(self.inner.model_dir),
            "sha256": self.sha256,
            "runtime": service.runtime(),
            "texts": texts,
        }
        for attempt in (1, 2):
            sock = service.connect(self.home)
            if sock is None:
                if self._last_pid is not None:
                    log.warning(
                        "the embedding service of %s (pid %s), which answered this process before, has exited; "
                        "starting a new one (it loads the model: seconds).",
                        where,
                        self._last_pid,
                    )
                    self._last_pid = None
                sock = self._start()
            pid = local_socket.peer_pid(sock)
            try:
                with sock:
                    service.write_message(sock, header)
                    service.await_reply(sock, self.home)
                    reply = service.read_message(sock)
                    payload = service.read_payload(sock, int(reply.get("payload_bytes", 0)))
            except service.Unresponsive:
                raise  # asking it again would wait again
            except (OSError, service.ServiceError) as exc:
                self._last_pid = None
                if attempt == 2:
                    raise service.ServiceError(
                        f"the embedding service of {where} broke off twice, the second time a new one ({exc})"
                    ) from None
                # Killed mid-request (or it crashed): said, and asked once more of a new service.
                log.warning(
                    "the embedding service of %s (pid %s) broke off (%s); starting a new one and asking it again.",
                    where,
                    pid,
                    exc,
                )
                continue
            if reply.get("ok"):
                matrix = self._matrix(reply, payload, len(texts))
                self._last_pid = pid
                if self._holding:
                    with self._lock:
                        self._hold_now()
                return matrix
            if reply.get("error") == "model mismatch" and attempt == 1:
                # The service loaded other weights (the model package changed under it): replace it.
                service.stop(self.home)
                self._last_pid = None
                continue
            if reply.get("error") == "runtime mismatch":
                theirs = reply.get("runtime") or {}
                ours = service.runtime()
                differ = ", ".join(
                    f"{k} {theirs.get(k, '?')} there, {v} here" for k, v in sorted(ours.items()) if theirs.get(k) != v
                )
                raise service.ServiceError(
                    f"the embedding service of {where} (pid {pid}) runs in another environment ({differ}), whose "
                    "vectors may differ from this process's in their last bits"
                )
            raise service.ServiceError(f"the embedding service refused: {reply.get('error')}")
        raise service.ServiceError("the embedding service serves another model")

    def _start(self) -> Any:
        return service.start(
            self.home, str(self.inner.model_dir), self.inner.id, self.inner.expected_sha256, self.idle_s
        )

    def _matrix(self, reply: dict[str, Any], payload: bytes, n: int) -> Matrix:
        if reply.get("n") != n or reply.get("dim") != self.dim or len(payload) != n * self.dim * 4:
            raise service.ServiceError(
                f"the embedding service answered {reply.get('n')} x {reply.get('dim')} ({len(payload)} bytes) "
                f"for {n} x {self.dim}"
            )
        if reply.get("sha256") != self.sha256:
            raise service.ServiceError("the embedding service answered with other weights")
        # A copy: frombuffer is read-only, and callers own their arrays.
        return np.frombuffer(payload, dtype="<f4").reshape(n, self.dim).astype(np.float32)


def _closed(sock: socket.socket) -> bool:
    """Whether the service at the other end of a hold connection has gone (it never sends after its reply)."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def serve_through(emb: Embedder, home: Path, *, idle_s: float) -> Embedder:
    """``emb`` served by the local embedding service when it is a local sentence-transformers model, else ``emb``."""
    if isinstance(emb, SentenceTransformerEmbedder):
        return ServedEmbedder(emb, home, idle_s=idle_s)
    return emb
