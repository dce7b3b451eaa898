"""Who may call the server, and how much: the ASGI guard in front of every route.

In order, for each HTTP request (before FastAPI parses anything):

1. **Host** (:class:`Access.allowed_hosts`): a server bound to loopback answers
   only to ``localhost``, ``127.0.0.1`` and ``[::1]`` (and names given with
   ``--allow-host``), so a web page whose DNS name is rebound to 127.0.0.1
   cannot read it (421); one bound to another interface answers to the names
   given, else to the machine's own names and addresses (:func:`own_host_names`);
   with ``--insecure-no-auth`` to the loopback names, the names given and any IP
   address; and to any Host only with ``--allow-host '*'`` (behind a proxy).
2. **Token** (``Authorization: Bearer``, ranklock.store.tokens): required when
   :attr:`Access.require_token` (``serve`` on anything but loopback); checked
   whenever one is sent (401: none, malformed, unknown or revoked).  Without
   tokens the caller is the operator on this machine and has every scope; with
   ``--insecure-no-auth`` an anonymous caller, ``read`` only.  Refused tokens
   are limited per client (``RANKLOCK_AUTH_FAIL_LIMIT``) before any lookup.
3. **Rate** (``RANKLOCK_RATE_LIMIT``): a token bucket per token (per client
   address without tokens); empty: 429 with ``Retry-After``.
4. **Body** (``RANKLOCK_MAX_BODY_BYTES``, ``RANKLOCK_BODY_TIMEOUT``): refused on
   its ``Content-Length`` before a byte of it is read, else counted as it
   streams in (413); one that does not arrive in time is cut off (408).  Both
   close the connection.  The route then parses the body read here.
5. **Concurrency** (``RANKLOCK_TOKEN_CONCURRENCY``): searches and asks one
   token runs at once; one more is a 429 at once, never a queue.

The request line and headers have their own deadline in the server's HTTP
protocol (ranklock.http.server, ``RANKLOCK_HEADER_TIMEOUT``): nothing of the
application runs before the headers are in.  :data:`PUBLIC` routes (liveness,
the static page) need no token: they hold no data.  :data:`PROBES` (``/readyz``)
answer an orchestrator's probe without a token with their status alone.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    Forbidden,
    HostNotAllowed,
    InputError,
    RanklockError,
    RequestTimeout,
    RequestTooLarge,
    TooManyRequests,
    Unauthorized,
    public_name,
)
from ..store.tokens import SCOPES
from ..validation import repeated_key

if TYPE_CHECKING:
    from ..async_engine import AsyncEngine
    from ..settings import Settings

__all__ = [
    "ANY_HOST",
    "LOOPBACK_HOSTS",
    "PROBES",
    "PUBLIC",
    "Access",
    "Guard",
    "is_loopback",
    "own_host_names",
    "scopes_of",
    "send_error",
]

log = logging.getLogger("ranklock.http")

#: Routes that answer without a token: liveness and the static page (it calls the API with the user's token).
PUBLIC = frozenset({"/", "/healthz"})
#: Routes an orchestrator probes without a token: answered with their status alone, the details with one.
PROBES = frozenset({"/readyz"})
#: Routes that run a search or an answer: these count against a token's concurrency.
HEAVY = frozenset({"/api/search", "/api/ask"})
#: What a caller without a token may do on a server that serves anyone (--insecure-no-auth).
READ_ONLY = frozenset({"read"})
#: Host names a loopback server answers to.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: The scope-set key the guard leaves in the ASGI scope for the routes (``paid-generator`` for ask).
SCOPES_KEY = "ranklock.scopes"


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on this machine only (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """The access policy of one server: whether a token is required, the Host names it answers to, and
    what a caller without a token may do.

    ``allowed_hosts`` None answers to any Host (a server behind a proxy, with tokens); ``ip_hosts``
    answers besides to any IP address as Host (a name is what DNS rebinding needs; an address is not).
    """

    require_token: bool = False
    allowed_hosts: frozenset[str] | None = None
    ip_hosts: bool = False
    #: The scopes of a request without a token: on loopback the operator's (all of them); with
    #: --insecure-no-auth an anonymous caller's, ``read`` only: never a generator billed to the operator.
    anonymous_scopes: frozenset[str] = frozenset(SCOPES)

    @classmethod
    def for_bind(cls, host: str, *, no_auth: bool = False, extra_hosts: Iterable[str] = ()) -> Access:
        """The policy ``ranklock serve --host host`` runs with (``no_auth``: ``--insecure-no-auth``)."""
        extra = frozenset(h.lower().strip("[]") for h in extra_hosts)
        if is_loopback(host):
            return cls(require_token=False, allowed_hosts=LOOPBACK_HOSTS | extra)
        # Without a token (--insecure-no-auth) a caller is anonymous: read only, never a paid generator.
        anonymous = READ_ONLY if no_auth else frozenset(SCOPES)
        if ANY_HOST in extra:
            # Behind a proxy that checks the Host.
            return cls(require_token=not no_auth, allowed_hosts=None, anonymous_scopes=anonymous)
        if no_auth:
            # Nothing but the Host stops a rebound DNS name from reading it: the loopback names, the names
            # given and IP addresses (a name is what rebinding needs; an address is not).
            return cls(
                require_token=False, allowed_hosts=LOOPBACK_HOSTS | extra, ip_hosts=True, anonymous_scopes=anonymous
            )
        # The names given are the only ones; without any, this machine's own names and addresses, never
        # whatever a client sends.
        return cls(require_token=True, allowed_hosts=extra or own_host_names(host))


#: ``--allow-host '*'``: answer to any Host (a proxy in front checks it).
ANY_HOST = "*"


def own_host_names(bind: str) -> frozenset[str]:
    """The Host names a server bound to ``bind`` answers to without ``--allow-host``: the loopback names, the
    machine's host name and fully qualified name, the bind address, and every address of its interfaces."""
    import socket

    import psutil

    names = set(LOOPBACK_HOSTS) | {socket.gethostname().lower(), socket.getfqdn().lower()}
    if bind not in ("0.0.0.0", "::", ""):
        names.add(bind.lower().strip("[]"))
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                names.add(a.address.split("%")[0].lower())  # fe80::1%eth0: the zone is not in a Host header
    return frozenset(names)


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Limits:
    """Per-identity state: the rate buckets and the searches running now."""

    capacity: int
    period_s: float
    buckets: dict[str, _Bucket] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)

    def take(self, who: str, now: float) -> float:
        """Take one request from ``who``'s bucket; 0.0 when granted, else seconds until one is free."""
        if self.capacity <= 0:
            return 0.0
        rate = self.capacity / self.period_s
        b = self.buckets.get(who)
        if b is None:
            if len(self.buckets) > 10_000:
                self._forget_full(now, rate)
            b = self.buckets[who] = _Bucket(float(self.capacity), now)
        b.tokens = min(float(self.capacity), b.tokens + (now - b.at) * rate)
        b.at = now
        if b.tokens >= 1.0:
            b.tokens -= 1.0
            return 0.0
        return (1.0 - b.tokens) / rate

    def wait(self, who: str, now: float) -> float:
        """Seconds until ``who``'s bucket holds one request again, taking none; 0.0 when it does now."""
        b = self.buckets.get(who)
        if self.capacity <= 0 or b is None:
            return 0.0
        rate = self.capacity / self.period_s
        tokens = min(float(self.capacity), b.tokens + (now - b.at) * rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / rate

    def _forget_full(self, now: float, rate: float) -> None:
        # A full bucket is the same as none: forgetting it keeps memory bounded under many addresses.
        for who in [w for w, b in self.buckets.items() if b.tokens + (now - b.at) * rate >= self.capacity]:
            del self.buckets[who]


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _header(scope: Scope, name: bytes) -> bytes | None:
    for k, v in scope.get("headers", []):
        if k == name:
            return bytes(v)
    return None


def _host_name(raw: bytes) -> str:
    text = raw.decode("latin-1").strip().lower()
    if text.startswith("["):  # [::1]:8000
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


async def send_error(send: Send, exc: RanklockError, *, close: bool = False) -> None:
    """One JSON error response, ``{"error": {"type", "message"}}``, as every route's errors are."""
    body = json.dumps({"error": {"type": public_name(exc), "message": str(exc)}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if isinstance(exc, TooManyRequests):
        headers.append((b"retry-after", str(max(1, math.ceil(exc.retry_after))).encode()))
    if isinstance(exc, Unauthorized):
        headers.append((b"www-authenticate", b'Bearer realm="ranklock"'))
    if close:
        # The rest of the body is never read: the connection cannot carry another request.
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": exc.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class Guard:
    """The ASGI middleware that applies :class:`Access` and the limits of ``settings`` (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, aeng: AsyncEngine, access: Access, settings: Settings) -> None:
        self.app = app
        self.aeng = aeng
        self.access = access
        self.settings = settings
        self.limits = _Limits(*settings.rate_limit)
        self.failures = _Limits(*settings.auth_fail_limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        try:
            self._check_host(scope)
            tokenless_probe = path in PROBES and self.access.require_token and _header(scope, b"authorization") is None
            if path in PUBLIC or tokenless_probe:
                # No token, but the body limits: a 100 MB POST to /healthz is no cheaper to read.
                who, scopes = "", frozenset[str]()
            else:
                who, scopes = await self._identify(scope)
                if "read" not in scopes:
                    raise Forbidden(
                        f"{who} lacks the scope `read`, which every route but /healthz needs; create a token with "
                        "`ranklock token create NAME --scope read`."
                    )
                wait = self.limits.take(who, time.monotonic())
                if wait:
                    raise TooManyRequests(
                        f"over the rate limit of {self.limits.capacity} requests per {self.limits.period_s:g} s for "
                        f"{who} (RANKLOCK_RATE_LIMIT); retry in {wait:.1f} s.",
                        retry_after=wait,
                    )
            receive = await self._read_body(scope, receive)
        except (RequestTooLarge, RequestTimeout) as exc:
            await send_error(send, exc, close=True)
            return
        except RanklockError as exc:
            await send_error(send, exc)
            return
        scope[SCOPES_KEY] = scopes
        if path not in HEAVY:
            await self.app(scope, receive, send)
            return
        async with self._slot(who) as granted:
            if granted is not None:
                await send_error(send, granted)
                return
            await self.app(scope, receive, send)

    def _check_host(self, scope: Scope) -> None:
        allowed = self.access.allowed_hosts
        if allowed is None:
            return
        raw = _header(scope, b"host")
        name = _host_name(raw) if raw is not None else ""
        if name not in allowed and not (self.access.ip_hosts and _is_address(name)):
            shown = raw.decode("latin-1")[:100] if raw is not None else "(none)"
            also = " or an IP address" if self.access.ip_hosts else ""
            raise HostNotAllowed(
                f"this server answers to Host {', '.join(sorted(allowed))}{also}, not {shown!r} (a page whose DNS "
                "name points here is not this server's). Use one of those names, or start `ranklock serve` with "
                "--allow-host NAME."
            )

    async def _identify(self, scope: Scope) -> tuple[str, frozenset[str]]:
        raw = _header(scope, b"authorization")
        client = str((scope.get("client") or ("local", 0))[0])
        if raw is None:
            if self.access.require_token:
                raise Unauthorized(
                    "this server needs an API token: send `Authorization: Bearer <token>`; its operator creates "
                    "one with `ranklock token create NAME`."
                )
            return f"client {client}", self.access.anonymous_scopes
        # A client that keeps sending wrong tokens is stopped before its next one is looked up: guessing
        # costs it the wait, and the database nothing.
        wait = self.failures.wait(client, time.monotonic())
        if wait:
            raise TooManyRequests(
                f"client {client} sent {self.failures.capacity} tokens that were refused within "
                f"{self.failures.period_s:g} s (RANKLOCK_AUTH_FAIL_LIMIT); retry in {wait:.1f} s with a valid token.",
                retry_after=wait,
            )
        try:
            scheme, _, token = raw.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthorized(
                    "the Authorization header is not `Bearer <token>`; send the token from `ranklock token create` "
                    "as `Authorization: Bearer <token>`."
                )
            info = await self.aeng.verify_token(token.strip())
        except Unauthorized:
            self.failures.take(client, time.monotonic())
            raise
        return f"token {info.prefix}… ({info.name})", frozenset(info.scopes)

    async def _read_body(self, scope: Scope, receive: Receive) -> Receive:
        """The whole body, within the size and time limits; a receive that replays it to the route."""
        limit = self.settings.max_body_bytes
        length = _header(scope, b"content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise InputError(f"Content-Length {length[:40].decode('latin-1')!r} is not a number of bytes.")
            if int(length) > limit:
                raise _too_large(int(length), limit)
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.settings.body_timeout
        while True:
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise RequestTimeout(
                    f"the request body did not arrive within {self.settings.body_timeout:g} s "
                    f"({size:,} bytes came; RANKLOCK_BODY_TIMEOUT); the connection is closed. Send the whole "
                    "body at once."
                ) from None
            if message["type"] != "http.request":
                return _replay(b"", receive, message)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                raise _too_large(size, limit, streamed=True)
            if not message.get("more_body", False):
                body = b"".join(chunks)
                # Read whole here, so checked once for every route: FastAPI's parser keeps the last of a
                # repeated key, and the request would run with a value nobody may have meant.
                repeated = repeated_key(body) if body.lstrip()[:1] in (b"{", b"[") else None
                if repeated is not None:
                    raise InputError(f"the request body is not accepted: {repeated}.")
                return _replay(body, receive)

    @asynccontextmanager
    async def _slot(self, who: str) -> AsyncIterator[TooManyRequests | None]:
        cap = self.settings.token_concurrency
        running = self.limits.running.get(who, 0)
        if running >= cap:
            yield TooManyRequests(
                f"{who} runs {running} searches or asks already, the most one token may run at once "
                f"(RANKLOCK_TOKEN_CONCURRENCY={cap}); wait for one to finish.",
                retry_after=1.0,
            )
            return
        self.limits.running[who] = running + 1
        try:
            yield None
        finally:
            left = self.limits.running[who] - 1
            if left:
                self.limits.running[who] = left
            else:
                del self.limits.running[who]


def _too_large(size: int, limit: int, *, streamed: bool = False) -> RequestTooLarge:
    what = f"more than {limit:,} bytes came" if streamed else f"it declares {size:,} bytes"
    return RequestTooLarge(
        f"the request body is too large: {what}; the server reads at most {limit:,} "
        "(RANKLOCK_MAX_BODY_BYTES). Send a smaller request: a search body is a query and a filter."
    )


def _replay(body: bytes, receive: Receive, first: Message | None = None) -> Receive:
    """A receive that hands the route the body read already, then the client's later messages (disconnect)."""
    pending: list[Message] = [first] if first is not None else [{"type": "http.request", "body": body}]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


def scopes_of(scope: Any) -> frozenset[str]:
    """The scopes the guard granted this request (none when no guard ran)."""
    return frozenset(scope.get(SCOPES_KEY) or ())
