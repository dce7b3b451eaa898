"""An embedder whose model runs in the local embedding service (ranklock.embed.service).

``ranklock search`` is a new process each time; with :class:`ServedEmbedder` it never imports
torch: the vector comes from the service that the first such command started, which runs
:meth:`SentenceTransformerEmbedder.embed` itself, so the vector is the one this process would
have computed, bit for bit.  Whatever goes wrong with the service (it cannot start, it is
killed mid-request) the embedder falls back to loading the model here: slower, same vectors,
and the real error if there is one (a missing extra, damaged weights).

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
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

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
            except service.Unresponsive as exc:
                # Said, not silent: the command goes on with the model loaded here (seconds).
                log.warning("%s; this command loads the model itself instead.", exc)
            except service.ServiceError:
                pass  # below: the same vectors, computed here
        self.last_path = "in-process"
        return self.inner.embed(texts)

    def _served(self, texts: list[str]) -> Matrix:
        header = {"op": "embed", "model_dir": str(self.inner.model_dir), "sha256": self.sha256, "texts": texts}
        for attempt in (1, 2):
            sock = service.connect(self.home) or self._start()
            try:
                with sock:
                    service.write_message(sock, header)
                    service.await_reply(sock, self.home)
                    reply = service.read_message(sock)
                    payload = service.read_payload(sock, int(reply.get("payload_bytes", 0)))
            except service.Unresponsive:
                raise  # asking it again would wait again
            except (OSError, service.ServiceError) as exc:
                if attempt == 2:
                    raise service.ServiceError(f"the embedding service broke off twice ({exc})") from None
                continue  # killed mid-request: the next attempt starts a new service
            if reply.get("ok"):
                return self._matrix(reply, payload, len(texts))
            if reply.get("error") == "model mismatch" and attempt == 1:
                # The service loaded other weights (the model package changed under it): replace it.
                service.stop(self.home)
                continue
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


def serve_through(emb: Embedder, home: Path, *, idle_s: float) -> Embedder:
    """``emb`` served by the local embedding service when it is a local sentence-transformers model, else ``emb``."""
    if isinstance(emb, SentenceTransformerEmbedder):
        return ServedEmbedder(emb, home, idle_s=idle_s)
    return emb
