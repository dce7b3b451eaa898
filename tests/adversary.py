"""Helpers of the adversarial tests (tests/test_adversary_*.py): a real server in a thread, raw sockets, digests.

A hostile client does not use a well-behaved HTTP library: these helpers speak
HTTP/1.1 over raw sockets (half-sent heads, lying Content-Length, slow bodies),
and :func:`stored_digest` proves a run changed nothing stored.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import sql

from ranklock import Engine
from ranklock.store.tables import segment_table


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def real_server(app: Any, *, header_timeout: float = 10.0, trusted_proxies: tuple[str, ...] = ()) -> Iterator[int]:
    """``app`` under uvicorn as `ranklock serve` configures it (ranklock.http.server), in a thread; yields the port."""
    import uvicorn

    from ranklock.http.server import server_config

    port = free_port()
    server = uvicorn.Server(
        server_config(
            app,
            host="127.0.0.1",
            port=port,
            header_timeout=header_timeout,
            trusted_proxies=trusted_proxies,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the HTTP server did not start within 20 s"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def read_response(sock: socket.socket, timeout: float = 10.0) -> tuple[int | None, dict[str, str], bytes, bool]:
    """Read one response: (status or None when the peer closed first, headers, body, whether the peer closed)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, {}, data, True
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    want = int(headers.get("content-length", "0"))
    while len(body) < want:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    closed = False
    try:
        sock.settimeout(1.0)
        closed = sock.recv(1) == b""
    except (TimeoutError, OSError):
        closed = False
    return status, headers, body, closed


def request(port: int, raw: bytes, timeout: float = 10.0) -> tuple[int | None, dict[str, str], Any, bool]:
    """Send ``raw`` bytes as they are; the response as (status, headers, JSON body or bytes, closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        status, headers, body, closed = read_response(sock, timeout)
    try:
        return status, headers, json.loads(body), closed
    except ValueError:
        return status, headers, body, closed


def stored_digest(eng: Engine) -> str:
    """A digest of what ranklock serves: collections, their ready snapshots, their live documents, segments.

    A build that failed leaves a ``failed`` row (bookkeeping, reaped later): not stored data.
    """
    from ranklock.snapshot.segments import live_documents

    h = hashlib.sha256()
    for q in (
        "SELECT id, name, active_snapshot_id, previous_snapshot_id FROM ranklock.collections ORDER BY id",
        "SELECT id, collection_id, manifest_hash, doc_count, chunk_count FROM ranklock.snapshots "
        "WHERE status = 'ready' ORDER BY id",
        "SELECT ss.snapshot_id, ss.segment_id FROM ranklock.snapshot_segments ss "
        "JOIN ranklock.snapshots s ON s.id = ss.snapshot_id WHERE s.status = 'ready' ORDER BY 1, 2",
        "SELECT count(*) AS n FROM ranklock.documents",
    ):
        h.update(json.dumps(eng.db.fetchall(q), default=str, sort_keys=True).encode())
    for row in eng.db.fetchall("SELECT id FROM ranklock.snapshots WHERE status = 'ready' ORDER BY id"):
        live = live_documents(eng.db, int(row["id"]))
        h.update(json.dumps(sorted((k, list(v)) for k, v in live.items())).encode())
    segments = eng.db.fetchall(
        "SELECT DISTINCT ss.segment_id FROM ranklock.snapshot_segments ss "
        "JOIN ranklock.snapshots s ON s.id = ss.snapshot_id WHERE s.status = 'ready' ORDER BY 1"
    )
    for seg in segments:
        got = eng.db.fetchone(
            sql.SQL(
                "SELECT count(*) AS n, coalesce(string_agg(vec_digest || text_sha256, '' ORDER BY row_id), '') AS d "
                "FROM {}"
            ).format(segment_table("chunks", int(seg["segment_id"])))
        )
        h.update(json.dumps(got, sort_keys=True).encode())
    return h.hexdigest()
