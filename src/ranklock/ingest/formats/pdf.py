"""PDF with a text layer, through pypdf (pure Python; chosen over pdfminer.six in docs/integrations.md).

pypdf runs in a process of its own (``_pdf_worker.py``), handed each opened PDF's descriptor: a
hostile PDF can take any time and memory to read (finding 10 of issue 48: 200 pages sharing one 61 MB
content stream, minutes a page; a page tree of 100,000 pages), and pure Python cannot be stopped from
within.  So each file has a page bound (RANKLOCK_PDF_MAX_PAGES, checked on the page tree before a page is
read), a time bound (RANKLOCK_PDF_TIMEOUT: the process is killed, and the next PDF starts another) and
a memory bound (the process's address space); past any of them the file is :class:`Unreadable`, named,
and the files beside it are read.  One process serves every PDF of an ingest, and exits when idle.
"""

from __future__ import annotations

import atexit
import json
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ...phrasing import plural
from ._pdf_worker import MEMORY_BYTES
from .base import Extracted, OpenedFile, Unreadable, require, too_large

__all__ = ["read_pdf"]

_WORKER = Path(__file__).with_name("_pdf_worker.py")
#: The longest reply read: the text of a document at the size limit, escaped as JSON, with room to spare.
_REPLY_FACTOR = 7


class _Gone(Exception):
    """The reading process ended without answering (it exited idle just as a request came, or crashed)."""


class _OutOfTime(Exception):
    """The file's time (RANKLOCK_PDF_TIMEOUT) ran out before the reading process answered."""


class _Worker:
    """The one reading process of this process, started on first use, replaced when killed or gone."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair()
        try:
            # -I: no user site, no PYTHON* variables; the script imports the standard library and pypdf only.
            self.proc = subprocess.Popen(
                [sys.executable, "-I", str(_WORKER), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        self.sock = ours
        return ours

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def ask(self, src: OpenedFile) -> dict[str, Any]:
        limits = src.limits
        request = json.dumps({"max_pages": limits.pdf_max_pages, "max_bytes": limits.max_document_bytes}) + "\n"
        with self.lock:
            for attempt in range(2):
                sock = self.sock if self.proc is not None and self.proc.poll() is None else None
                if sock is None:
                    self.stop()
                    sock = self._start()
                deadline = time.monotonic() + limits.pdf_timeout
                try:
                    socket.send_fds(sock, [request.encode()], [src.file.fileno()])
                    return self._reply(sock, deadline, limits.max_document_bytes * _REPLY_FACTOR + 65536)
                except (_Gone, OSError):
                    # Exited idle just as the request came: once more with a new process.  Exited with an
                    # error, or a second time: the file broke it.
                    code = self.proc.wait() if self.proc is not None else None
                    self.stop()
                    if attempt or code != 0:
                        raise Unreadable(
                            f"the PDF reader stopped while reading it (exit status {code}); re-export it from its "
                            "source"
                        ) from None
                except _OutOfTime:
                    self.stop()  # killed mid-read: the next PDF starts another
                    raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    @staticmethod
    def _reply(sock: socket.socket, deadline: float, most: int) -> dict[str, Any]:
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([sock], [], [], max(0.0, left))
            if not ready:
                raise _OutOfTime
            data = sock.recv(1 << 20)
            if not data:
                raise _Gone
            chunks.append(data)
            size += len(data)
            if data.endswith(b"\n"):
                return dict(json.loads(b"".join(chunks)))
            if size > most:
                raise _Gone


_worker = _Worker()
atexit.register(_worker.stop)


def read_pdf(src: OpenedFile) -> Extracted:
    """The text of every page; an encrypted PDF, one without a text layer, or one past the page, time or memory
    bound is :class:`Unreadable`."""
    require("pypdf", "pdf")  # here, so a missing package is named as the extra to install
    limits = src.limits
    try:
        got = _worker.ask(src)
    except _OutOfTime:
        raise Unreadable(
            f"reading its text took longer than {limits.pdf_timeout:g} s (RANKLOCK_PDF_TIMEOUT), so it was stopped: "
            "a page that costs minutes to read (a huge or repeated content stream); re-export it from its source "
            "(e.g. print it to PDF), or raise the limit"
        ) from None
    error = got.get("error")
    if error == "encrypted":
        raise Unreadable("encrypted PDF (password protected); decrypt it (e.g. qpdf --decrypt) and ingest again")
    if error == "pages":
        said = f"its page tree says {got['detail']:,} pages" if got.get("declared") else "it has more pages"
        raise Unreadable(
            f"{said}; a PDF may have at most {limits.pdf_max_pages:,} (RANKLOCK_PDF_MAX_PAGES): split it, or raise "
            "the limit"
        )
    if error == "text":
        raise too_large(int(got["detail"]), limits.max_document_bytes, f"the text of its first {got['pages']:,} pages")
    if error == "memory":
        raise Unreadable(
            f"reading it needs more than {MEMORY_BYTES >> 20:,} MiB of memory (a huge content stream or image); "
            "re-export it from its source (e.g. print it to PDF)"
        )
    if error is not None:
        raise Unreadable(f"not a readable PDF ({got.get('detail')}); re-export it from its source")
    pages = [str(p) for p in got["pages"]]
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise Unreadable(
            f"no text layer in {plural(len(pages), 'page')} (a scanned or image-only PDF); run OCR on it "
            "(e.g. ocrmypdf) and ingest the result"
        )
    meta: dict[str, object] = {"pages": len(pages)}
    if got.get("author"):
        meta["author"] = str(got["author"])
    return Extracted(title=str(got.get("title") or "") or src.path.stem, body=text, metadata=meta)
