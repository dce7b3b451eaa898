"""``ranklock mcp``: serve the collections to agents over the Model Context Protocol (stdio)."""

from __future__ import annotations

import typer

from ._common import DsnOpt, HomeOpt, engine, warm_in_background

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["mcp"]


@app.command()
def mcp(dsn: DsnOpt = None, home: HomeOpt = None) -> None:
    """Run a read-only MCP server on stdin/stdout with the tools search, ask, list_collections, get_document."""
    from ..mcp_server import create_server, run_stdio

    with engine(dsn, home) as eng:
        # The model loads (in the home's embedding service, held while this server runs) as it answers.
        warm_in_background(eng, "ranklock.mcp")
        run_stdio(create_server(eng), max_frame=eng.settings.max_body_bytes, max_reply=eng.settings.mcp_max_reply)
    raise typer.Exit(0)
