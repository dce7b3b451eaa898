"""``ranklock serve``: the HTTP API and the search page."""

from __future__ import annotations

import logging
import threading
import time
from typing import Annotated, Any

import typer

from ..errors import RanklockError
from ._common import DsnOpt, HomeOpt, ReadDsnOpt, engine, err_console, fail, warm_in_background

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["serve"]

log = logging.getLogger("ranklock.querylog")


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Interface to listen on; anything but loopback requires API tokens.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one).")] = 8000,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A Host name the server answers to besides localhost, 127.0.0.1 and [::1] (repeatable). Beyond "
            "loopback, given names are the only ones it answers to; without one, this machine's own names and "
            "addresses; '*': any Host (behind a proxy that checks it).",
        ),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="Serve a non-loopback interface without API tokens: anyone who reaches the port reads every "
            "collection (a paid generator still needs a token; only IP addresses and --allow-host names are "
            "answered as Host).",
        ),
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    read_dsn: ReadDsnOpt = None,
) -> None:
    """Serve the HTTP API (/api/search, /api/collections, /healthz, /readyz) and the search page (/).

    On loopback (the default) no token is needed and only local Host names are answered (DNS rebinding).
    On any other interface every request needs `Authorization: Bearer <token>` (`ranklock token create`).
    """
    from .._extras import require

    try:
        require("server", "uvicorn", "`ranklock serve`")
        require("server", "fastapi", "`ranklock serve`")
    except RanklockError as exc:
        raise fail(exc) from None
    from ..http import create_app
    from ..http.guard import Access, is_loopback
    from ..http.server import run

    access = Access.for_bind(host, no_auth=insecure_no_auth, extra_hosts=allow_host or ())
    with engine(dsn, home, read_dsn) as eng:
        if not is_loopback(host):
            live = [t for t in eng.list_tokens() if t.revoked_at is None and "read" in t.scopes]
            if insecure_no_auth:
                err_console.print(
                    f"[bold red]warning:[/] serving {host}:{port} with --insecure-no-auth: no token is asked for; "
                    "anyone who reaches this port reads every collection and writes the answer log (a paid "
                    "generator still needs a token with that scope; Host names other than IP addresses and "
                    "--allow-host ones are refused).",
                    highlight=False,
                )
            elif not live:
                raise fail(
                    f"`ranklock serve --host {host}` listens beyond this machine and needs API tokens, but no live "
                    "token with the scope read exists. Create one with `ranklock token create NAME` and send it as "
                    "`Authorization: Bearer <token>`, bind 127.0.0.1, or pass --insecure-no-auth (not advised)."
                )
        if not is_loopback(host):
            hosts = access.allowed_hosts
            answered = "any (--allow-host '*')" if hosts is None else ", ".join(sorted(hosts))
            if hosts is not None and access.ip_hosts:
                answered += " or an IP address"
            err_console.print(f"answering to Host: {answered}", highlight=False, soft_wrap=True)
        # Load every collection's model in the background (in the home's embedding service, which this
        # server then holds): the server answers at once (a lexical search needs no model; one that does
        # waits for this load), and /readyz says which state it is in.
        warm_in_background(eng, "ranklock.serve")
        # Bring both logs within their retention policy without delaying start-up, then keep them there.
        threading.Thread(target=_prune_logs, args=(eng,), name="ranklock-log-prune", daemon=True).start()
        run(
            create_app(eng, access=access),
            host=host,
            port=port,
            header_timeout=eng.settings.header_timeout,
            trusted_proxies=eng.settings.trusted_proxies,
        )


def _prune_logs(eng: Any) -> None:
    """Prune at start-up, then every 5 % of the age limit: an idle server's entries age out too."""
    from ..store.log_retention import RetentionPolicy, prune_interval

    interval = prune_interval(RetentionPolicy.from_settings(eng.settings))
    while True:
        try:
            report = eng.prune_log()
        except RanklockError as exc:
            log.warning("logs: retention failed (%s); it runs again in %g s.", exc, interval)
        else:
            for name, part in report.logs.items():
                if part.deleted:
                    log.warning(
                        "%s: pruned %d entries (%d bytes); policy keeps %s",
                        name,
                        part.deleted,
                        part.deleted_bytes,
                        part.status.policy["describe"],
                    )
        time.sleep(interval)
