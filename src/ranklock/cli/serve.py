"""``ranklock serve``: the HTTP API and the search page."""

from __future__ import annotations

import logging
import threading
from typing import Annotated, Any

import typer

from ..errors import RanklockError
from ._common import DsnOpt, HomeOpt, ReadDsnOpt, engine, fail

#: This module's commands; cli/__init__.py merges them into the root app.
app = typer.Typer()

__all__ = ["serve"]


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one).")] = 8000,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    read_dsn: ReadDsnOpt = None,
) -> None:
    """Serve the HTTP API (/api/search, /api/collections, /healthz, /readyz) and the search page (/)."""
    from .._extras import require

    try:
        uvicorn = require("server", "uvicorn", "`ranklock serve`")
        require("server", "fastapi", "`ranklock serve`")
    except RanklockError as exc:
        raise fail(exc) from None
    from ..http import create_app

    with engine(dsn, home, read_dsn, long_lived=True) as eng:
        # Load every collection's model before listening, so the first search does not pay for it.
        for line in eng.warm():
            logging.getLogger("ranklock.serve").warning("%s", line)
        # Bring the query log within its retention policy without delaying start-up.
        threading.Thread(target=_prune_log, args=(eng,), name="ranklock-log-prune", daemon=True).start()
        uvicorn.run(create_app(eng), host=host, port=port, log_level="info")


def _prune_log(eng: Any) -> None:
    try:
        report = eng.prune_log()
    except RanklockError as exc:
        logging.getLogger("ranklock.querylog").warning("query log: retention at start-up failed: %s", exc)
        return
    if report["deleted"]:
        logging.getLogger("ranklock.querylog").warning(
            "query log: pruned %d entries (%d bytes) at start-up; policy keeps %s",
            report["deleted"],
            report["deleted_bytes"],
            report["policy"]["describe"],
        )
