"""Running the app under uvicorn with a deadline on the request line and headers (slow-loris).

uvicorn's HTTP/1.1 protocol closes an idle keep-alive connection after
``timeout_keep_alive``, but a connection that has sent half a request line, or
nothing at all since it opened, stays open for ever: 300 of them held 300
sockets for as long as their clients liked.  :func:`protocol_class` returns
uvicorn's h11 protocol with one timer more: from the moment a connection opens,
or a response completes, the next request's headers must be in within
``RANKLOCK_HEADER_TIMEOUT``; otherwise the server answers 408 and closes.  The
body has its own deadline in the ASGI guard (ranklock.http.guard).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

__all__ = ["protocol_class", "run", "server_config"]


def _timeout_response(seconds: float) -> bytes:
    body = json.dumps(
        {
            "error": {
                "type": "RequestTimeout",
                "message": f"the request line and headers did not arrive within {seconds:g} s "
                "(RANKLOCK_HEADER_TIMEOUT); the connection is closed.",
            }
        }
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def protocol_class(header_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers take longer than ``header_timeout``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            if self._head_timer is None and (before is None or before.response_complete):
                # The first bytes of a request after a keep-alive pause (uvicorn's keep-alive timer
                # covered the silence before them).
                self._arm()
            super().data_received(data)
            if self.cycle is not before:
                self._disarm()  # h11 parsed a whole request head: the app has it now

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing():
                return
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being served: its head came in time
            self.transport.write(_timeout_response(header_timeout))
            self.transport.close()

    return HeaderDeadlineProtocol


def server_config(
    app: Any,
    *,
    host: str,
    port: int,
    header_timeout: float,
    trusted_proxies: Sequence[str] = (),
    log_level: str = "info",
) -> Any:
    """uvicorn's configuration for ``app``: the header deadline, and forwarded headers believed only from
    ``trusted_proxies``.

    uvicorn believes ``X-Forwarded-For`` from 127.0.0.1 by default: any local process could then
    pose as any client, escape the per-client limits (ranklock.http.guard) and write forged
    addresses into the access log.  Only a proxy the operator names (RANKLOCK_TRUSTED_PROXIES) is.
    """
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol_class(header_timeout),
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=list(trusted_proxies),
    )


def run(app: Any, *, host: str, port: int, header_timeout: float, trusted_proxies: Sequence[str] = ()) -> None:
    """Serve ``app`` on ``host``:``port`` until interrupted (see :func:`server_config`)."""
    import uvicorn

    config = server_config(app, host=host, port=port, header_timeout=header_timeout, trusted_proxies=trusted_proxies)
    uvicorn.Server(config).run()
