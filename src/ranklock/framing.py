"""Length-prefixed JSON messages over a stream socket: the wire format of ranklock's local services.

A message is a 4-byte big-endian length and that many bytes of JSON, an object; raw bytes may
follow it, their size named in the object (the embedding service's vectors), read with
:func:`read_exact`.  The embedding service (ranklock.embed.service) and the command service and its
client (ranklock.cli.service, ranklock.cli.client) speak it.  Standard library only: the command
client is what the ``ranklock`` entry point imports, and it imports nothing else.

Each side names its own error class and peer, so a message says which service broke::

    read_message(sock, limit=16 * 2**20, error=ServiceBroke, peer="the command service")
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

__all__ = ["read_exact", "read_message", "write_message"]


def write_message(sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
    """Send ``header`` as one message, then ``payload``'s raw bytes (if any), in one write.

    ASCII JSON: every ``str`` travels, the lone surrogates that stand for undecodable bytes of an
    argument or an environment variable included (UTF-8 cannot encode them).
    """
    body = json.dumps(header, ensure_ascii=True).encode("ascii")
    sock.sendall(struct.pack(">I", len(body)) + body + payload)


def read_exact(sock: socket.socket, n: int, *, error: type[Exception], peer: str) -> bytes:
    """Exactly ``n`` bytes from ``sock``; ``error`` when the peer closes the connection first."""
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise error(f"{peer} closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_message(sock: socket.socket, *, limit: int, error: type[Exception], peer: str) -> dict[str, Any]:
    """One message from ``sock``: a JSON object of at most ``limit`` bytes, or ``error`` saying what was wrong."""
    (size,) = struct.unpack(">I", read_exact(sock, 4, error=error, peer=peer))
    if size > limit:
        raise error(f"a message of {size:,} bytes is over the {limit:,}-byte limit")
    try:
        msg = json.loads(read_exact(sock, size, error=error, peer=peer))
    except ValueError as exc:  # not UTF-8, or not JSON
        raise error(f"not a JSON message ({exc})") from None
    if not isinstance(msg, dict):
        raise error("a message must be a JSON object")
    return msg
