"""The process that reads PDFs for ranklock.ingest.formats.pdf: run as a script, standard library and pypdf only.

A PDF can cost any time and memory to read: one 175 kB file held 200 pages that share a 61 MB content
stream, each page taking minutes; a page tree of 100,000 pages took 74 s and 600 MB to list.  Pure
Python cannot be interrupted from outside, so the reading happens here, in a process of its own, which
the ingest stops when the file's time is up (RANKLOCK_PDF_TIMEOUT) and whose address space is bounded
(:data:`MEMORY_BYTES`).

The protocol, over the socket passed as ``argv[1]`` (a file descriptor): the ingest sends one JSON line,
``{"max_pages": N, "max_bytes": M}``, with the opened PDF's descriptor attached (SCM_RIGHTS), and reads
one JSON line back: ``{"pages": [...], "count": n, "title": ..., "author": ...}`` or ``{"error": KIND,
"detail": ...}``.  The process exits at the end of its socket (its ingest is gone) or after
:data:`IDLE_S` seconds without a request.
"""

from __future__ import annotations

import json
import os
import resource
import select
import socket
import sys
from typing import Any

#: The address space this process may use.  Reading an ordinary PDF takes tens of megabytes; the
#: 61 MB content stream of finding 10 took 790 MB for one page.  A file that needs more is refused.
MEMORY_BYTES = 1 << 30
#: Seconds without a request after which the process exits (the next PDF starts another, in ~0.2 s).
IDLE_S = 30.0
#: The longest request line read (a JSON object of two numbers).
_REQUEST_BYTES = 4096


def _count_pages(reader: Any, most: int) -> int | str:
    """The pages of the document's page tree, counted without reading past ``most + 1`` of them; the count
    the tree declares, negated, when that is over ``most``; a string: why the tree cannot be walked."""
    from pypdf.generic import ArrayObject, DictionaryObject

    root = reader.trailer["/Root"].get_object()
    top = root.get("/Pages")
    top = top.get_object() if top is not None else None
    if not isinstance(top, DictionaryObject):
        return "no page tree"
    declared = top.get("/Count")
    if isinstance(declared, int) and declared > most:
        return -int(declared)  # said by the file itself (negative: declared): refused without walking the tree
    count = 0
    seen: set[int] = set()
    todo: list[Any] = [top]
    while todo:
        node = todo.pop()
        kids = node.get("/Kids")
        if kids is None or node.get("/Type") == "/Page":
            count += 1  # a page listed twice counts twice, as pypdf lists it twice
            if count > most:
                return count
            continue
        if id(node) in seen:  # pypdf hands out one object per indirect reference
            return "a page tree node reached twice (a loop in the tree)"
        seen.add(id(node))
        kids = kids.get_object()
        if not isinstance(kids, ArrayObject):
            return "a page tree node whose /Kids is not an array"
        for kid in reversed(kids):
            child = kid.get_object()
            if not isinstance(child, DictionaryObject):
                return "a page tree entry that is not a dictionary"
            todo.append(child)
    return count


def _read(fd: int, max_pages: int, max_bytes: int) -> dict[str, Any]:
    import pypdf

    with os.fdopen(fd, "rb") as fh:
        reader = pypdf.PdfReader(fh)
        if reader.is_encrypted:
            return {"error": "encrypted"}
        counted = _count_pages(reader, max_pages)
        if isinstance(counted, str):
            return {"error": "broken", "detail": counted}
        if counted < 0:
            return {"error": "pages", "detail": -counted, "declared": True}
        if counted > max_pages:
            return {"error": "pages", "detail": counted, "declared": False}
        pages: list[str] = []
        size = 0
        for page in reader.pages:
            text = (page.extract_text() or "").strip()
            size += len(text.encode("utf-8", "replace")) + 2
            if size > max_bytes:
                return {"error": "text", "detail": size, "pages": len(pages) + 1}
            pages.append(text)
        info = reader.metadata
        title = str(info.title).strip() if info is not None and info.title else ""
        author = str(info.author).strip() if info is not None and info.author else ""
        return {"pages": pages, "count": len(pages), "title": title, "author": author}


def _answer(request: bytes, fd: int) -> dict[str, Any]:
    try:
        req = json.loads(request)
        return _read(fd, int(req["max_pages"]), int(req["max_bytes"]))
    except MemoryError:
        return {"error": "memory", "detail": MEMORY_BYTES}
    except RecursionError:
        return {"error": "broken", "detail": "objects nested too deeply to read"}
    except Exception as exc:  # pypdf raises many types for damaged files; each one means the same here
        return {"error": "broken", "detail": f"{type(exc).__name__}: {exc}"[:500]}


def main(sock_fd: int) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(MEMORY_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))  # a lower bound set from outside is kept
    sock = socket.socket(fileno=sock_fd)
    while True:
        ready, _, _ = select.select([sock], [], [], IDLE_S)
        if not ready:
            return  # idle: the ingest starts another for its next PDF
        # One request is one small line sent with its descriptor in one message, so it arrives whole.
        data, fds, _flags, _addr = socket.recv_fds(sock, _REQUEST_BYTES, 1)
        if not data.endswith(b"\n") or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return  # the ingest closed its end (or broke the protocol): nothing more to do
        reply = _answer(data, fds[0])
        sock.sendall(json.dumps(reply, ensure_ascii=False).encode("utf-8", "replace") + b"\n")


if __name__ == "__main__":
    main(int(sys.argv[1]))
