"""``ranklock mcp``: a Model Context Protocol server over stdio (the official ``mcp`` SDK, ``ranklock[mcp]``).

Tools, all read-only (no tool ingests, activates or drops anything):

* ``search``: the arguments of ``POST /api/search`` (:class:`ranklock.http.app.SearchRequest`); returns the
  engine's canonical result JSON, the same object the HTTP API and ``ranklock search --json`` return.
* ``ask``: the arguments of ``POST /api/ask`` (:class:`ranklock.http.app.AskRequest`); returns the answer
  with its citations and ``answer_id`` for ``ranklock replay --answer``.
* ``list_collections``: what ``GET /api/collections`` returns.
* ``get_document``: one document as a snapshot holds it (:meth:`ranklock.Engine.document`).

A domain error reaches the agent as a tool error ``<ErrorType>: <message>``: the
same type and message the HTTP API puts in its ``{"error": ...}`` body.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import Field

from .engine import Engine
from .errors import RanklockError
from .ingest.formats.base import require

__all__ = ["TOOLS", "create_server"]

#: The tools the server offers, in the order it lists them.
TOOLS = ("search", "ask", "list_collections", "get_document")


def _json(obj: Any) -> Any:
    """A JSON-safe copy (timestamps as ISO strings), as the HTTP API would send it."""
    return json.loads(json.dumps(obj, default=str))


def create_server(engine: Engine) -> Any:
    """An ``MCPServer`` whose tools call ``engine``; run it with ``.run("stdio")``."""
    require("mcp", "mcp")
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer(
        "ranklock",
        instructions=(
            "Deterministic hybrid (BM25 + vector) search over ranklock collections. Call list_collections first; "
            "search returns ranked hits with the snapshot id and manifest hash that make the result reproducible; "
            "get_document reads a hit's whole document; ask answers with numbered citations."
        ),
    )
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)

    @contextmanager
    def domain_errors() -> Iterator[None]:
        try:
            yield
        except RanklockError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
        server.add_tool(fn, annotations=read_only, structured_output=True)
        return fn

    @tool
    def search(
        collection: str,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        filter: Any = None,
        snapshot: int | None = None,
        as_of: str | None = None,
        params: dict[str, Any] = Field(
            default_factory=dict, description="Search parameter overrides (depth, ef_search…)."
        ),
    ) -> dict[str, Any]:
        """Search a collection: the top k documents fused from the keyword and vector branches (RRF),
        each with its lexical and semantic rank and score; filter holds hard constraints
        (e.g. "date >= '2024-03-01'"); snapshot and as_of pin the result."""
        with domain_errors():
            res = engine.search(
                collection, query, k=k, mode=mode, filter=filter, snapshot=snapshot, as_of=as_of, **params
            )
        return dict(json.loads(res.to_json(timings=True)))

    @tool
    def ask(
        collection: str,
        question: str,
        filter: str | dict[str, Any] | list[Any] | None = None,
        as_of: str | None = None,
        snapshot: int | None = None,
        chunks: int = Field(8, ge=1, le=40, description="Chunks handed to the generator, numbered [1]..[N]."),
        generator: str = Field("extractive", description="extractive, openai or local."),
    ) -> dict[str, Any]:
        """Answer a question from the collection's top chunks, citing them by number; logged for replay."""
        with domain_errors():
            ans = engine.ask(
                collection,
                question,
                filter=filter,
                as_of=as_of,
                snapshot=snapshot,
                chunks=chunks,
                generator=generator,
            )
        return dict(json.loads(ans.to_json()))

    @tool
    def list_collections() -> dict[str, Any]:
        """Every collection with its language, embedder, typed fields and active snapshot."""
        with domain_errors():
            return dict(_json({"collections": engine.collections()}))

    @tool
    def get_document(collection: str, doc_id: str, snapshot: int | None = None) -> dict[str, Any]:
        """One document (title, body, metadata, content hash) as the snapshot (default: the active one) holds it."""
        with domain_errors():
            return dict(_json(engine.document(collection, doc_id, snapshot=snapshot)))

    return server
