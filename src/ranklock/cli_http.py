"""``ranklock serve``: the HTTP API and the search page."""

from __future__ import annotations

from typing import Annotated

import typer

from .cli import DsnOpt, HomeOpt, app, engine

__all__ = ["serve"]


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one).")] = 8000,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
) -> None:
    """Serve the HTTP API (/api/search, /api/collections) and the search page (/)."""
    import uvicorn

    from .http import create_app

    with engine(dsn, home) as eng:
        uvicorn.run(create_app(eng), host=host, port=port, log_level="info")
