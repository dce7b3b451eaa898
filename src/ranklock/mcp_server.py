"""``ranklock mcp``: a Model Context Protocol server over stdio (the official ``mcp`` SDK, ``ranklock[mcp]``).

Tools, all read-only (no tool ingests, activates or drops anything):

* ``search``: the arguments of ``POST /api/search`` (:class:`ranklock.api.SearchArguments`); returns the
  engine's canonical result JSON, the same object the HTTP API and ``ranklock search --json`` return.
* ``ask``: the arguments of ``POST /api/ask`` (:class:`ranklock.api.AskArguments`); returns the answer
  with its citations and ``answer_id`` for ``ranklock replay --answer``.
* ``list_collections``: what ``GET /api/collections`` returns.
* ``get_document``: one document as a snapshot holds it (:meth:`ranklock.Engine.document`).

As strict as HTTP: each tool's input schema *is* the HTTP route's model, and
the arguments are validated by that model, not by the SDK's lax signature
parsing (which turned ``k: true`` into 1 and dropped ``snapshot_id``): an
unknown argument, a wrong type or a reserved ``params`` key is a tool error
with the HTTP API's message, and a search past ``RANKLOCK_MAX_COST`` is refused
as over HTTP.  A domain error reaches the agent as a tool error
``Error executing tool <name>: <ErrorType>: <message>``.

The stdio transport (:func:`run_stdio`) answers every frame: one that is not
JSON (bad UTF-8, nested too deeply, cut off) gets a JSON-RPC ``-32700`` error,
one that is JSON but not a JSON-RPC message ``-32600``, with the frame's id when
it has one.  The SDK's own transport logged those and replied nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from .api import AskArguments, SearchArguments, request_error
from .engine import Engine
from .errors import RanklockError, public_name
from .ingest.formats.base import require
from .validation import repeated_key

__all__ = ["TOOLS", "DocumentArguments", "create_server", "run_stdio"]

log = logging.getLogger("ranklock.mcp")

#: The tools the server offers, in the order it lists them.
TOOLS = ("search", "ask", "list_collections", "get_document")


class DocumentArguments(BaseModel):
    """``get_document`` arguments."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    collection: str
    doc_id: str
    snapshot: int | None = Field(None, validation_alias=AliasChoices("snapshot", "snapshot_id"))


class NoArguments(BaseModel):
    """``list_collections`` takes none."""

    model_config = ConfigDict(extra="forbid", strict=True)


_DESCRIPTIONS = {
    "search": "Search a collection: the top k documents fused from the keyword and vector branches (RRF), each "
    "with its lexical and semantic rank and score; filter holds hard constraints (e.g. \"date >= '2024-03-01'\"); "
    "snapshot and as_of pin the result.",
    "ask": "Answer a question from the collection's top chunks, citing them by number; logged for replay.",
    "list_collections": "Every collection with its language, embedder, typed fields and active snapshot.",
    "get_document": "One document (title, body, metadata, content hash) as the snapshot (default: the active one) "
    "holds it.",
}
_MODELS: dict[str, type[BaseModel]] = {
    "search": SearchArguments,
    "ask": AskArguments,
    "list_collections": NoArguments,
    "get_document": DocumentArguments,
}


def _json(obj: Any) -> Any:
    """A JSON-safe copy (timestamps as ISO strings), as the HTTP API would send it."""
    return json.loads(json.dumps(obj, default=str))


def _handlers(engine: Engine) -> dict[str, Callable[[Any], dict[str, Any]]]:
    """Each tool's body over a validated request: the same engine calls the HTTP routes make."""

    def search(req: SearchArguments) -> dict[str, Any]:
        req.check_cost(engine.settings, engine.collection(req.collection).search_defaults)
        res = engine.search(req.collection, req.query, **req.arguments())
        return dict(json.loads(res.to_json(timings=True)))

    def ask(req: AskArguments) -> dict[str, Any]:
        req.check_cost(engine.settings)
        ans = engine.ask(req.collection, req.question, **req.arguments())
        return dict(json.loads(ans.to_json()))

    def list_collections(_req: NoArguments) -> dict[str, Any]:
        return dict(_json({"collections": [c.as_dict() for c in engine.collections()]}))

    def get_document(req: DocumentArguments) -> dict[str, Any]:
        return dict(_json(engine.document(req.collection, req.doc_id, snapshot=req.snapshot).as_dict()))

    return {"search": search, "ask": ask, "list_collections": list_collections, "get_document": get_document}


def create_server(engine: Engine) -> Any:
    """A low-level MCP ``Server`` whose tools call ``engine``; run it with :func:`run_stdio`."""
    require("mcp", "mcp")
    import anyio
    import mcp_types as types
    from mcp.server import Server

    handlers = _handlers(engine)
    read_only = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
    tools = [
        types.Tool(
            name=name,
            description=_DESCRIPTIONS[name],
            input_schema=_MODELS[name].model_json_schema(),
            annotations=read_only,
        )
        for name in TOOLS
    ]

    def failed(name: str, text: str) -> Any:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Error executing tool {name}: {text}")], is_error=True
        )

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: Any) -> Any:
        name = params.name
        if name not in handlers:
            return failed(name, f"InputError: unknown tool {name!r}; the tools are {', '.join(TOOLS)}.")
        model = _MODELS[name]
        try:
            req = model.model_validate(params.arguments or {})
        except ValidationError as exc:
            err = request_error(exc, model, what="argument")
            return failed(name, f"{type(err).__name__}: {err}")
        try:
            # The engine is synchronous (database, models): off the event loop.
            out = await anyio.to_thread.run_sync(lambda: handlers[name](req))
        except RanklockError as exc:
            return failed(name, f"{public_name(exc)}: {exc}")
        except Exception as exc:  # a bug: the agent gets a message, the log the traceback
            log.exception("unhandled error in tool %s", name)
            return failed(name, f"InternalError: {type(exc).__name__}: {str(exc)[:200]}; this is a bug in ranklock.")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(out, ensure_ascii=False))], structured_content=out
        )

    return Server(
        "ranklock",
        instructions=(
            "Deterministic hybrid (BM25 + vector) search over ranklock collections. Call list_collections first; "
            "search returns ranked hits with the snapshot id and manifest hash that make the result reproducible; "
            "get_document reads a hit's whole document; ask answers with numbered citations."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def frame_error(line: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error reply to a frame the server cannot take, or None when it is a JSON-RPC message."""
    import mcp_types as types

    try:
        text = line.decode("utf-8")
        obj = json.loads(text)
    except UnicodeDecodeError as exc:
        return _error_reply(None, types.PARSE_ERROR, f"the frame is not UTF-8 ({exc.reason} at byte {exc.start})")
    except RecursionError:
        return _error_reply(None, types.PARSE_ERROR, "the frame is JSON nested too deeply to read")
    except ValueError as exc:
        return _error_reply(None, types.PARSE_ERROR, f"the frame is not JSON ({exc})")
    ident = obj.get("id") if isinstance(obj, dict) else None
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        ident = None
    repeated = repeated_key(text)
    if repeated is not None:
        # The SDK's parser keeps the last of a repeated key: a tool would run with a value nobody may have meant.
        return _error_reply(ident, types.INVALID_REQUEST, f"the frame is not accepted: {repeated}")
    if isinstance(obj, dict) and "method" in obj and "id" in obj and ident is None:
        # The SDK takes a request whose id is not a string or an integer for a notification and
        # never answers it: the client would wait for ever.
        return _error_reply(
            None,
            types.INVALID_REQUEST,
            f"the request's id {json.dumps(obj['id'])[:60]} is {_json_kind(obj['id'])}; an MCP request's id is a "
            "string or an integer (a message without an id is a notification, which gets no reply)",
        )
    try:
        types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except (ValidationError, RecursionError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) and exc.errors() else str(exc)
        return _error_reply(ident, types.INVALID_REQUEST, f"the frame is not a JSON-RPC 2.0 message ({first})")
    request = _request_classes().get(str(obj.get("method"))) if isinstance(obj, dict) and ident is not None else None
    if request is not None:
        try:
            request.model_validate({k: obj[k] for k in ("method", "params") if k in obj}, by_name=False)
        except ValidationError as exc:
            # The SDK answers these -32602 with an empty message: say which parameter and why.
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "params"
            return _error_reply(
                ident,
                types.INVALID_PARAMS,
                f"invalid params of {obj['method']}: {where}: {err['msg']} (got {_json_kind(err.get('input'))}); "
                "see the tool's input schema in tools/list",
            )
    return None


def _json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type, with an article: "an object", "a float", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"), (int, "an integer"), (float, "a float"))
    return next((kind for t, kind in kinds if isinstance(value, t)), type(value).__name__)


@functools.cache
def _request_classes() -> dict[str, Any]:
    """The SDK's request model of each method a client may call, by method name."""
    import typing

    import mcp_types as types

    out: dict[str, Any] = {}
    for cls in typing.get_args(types.ClientRequest):
        for method in typing.get_args(cls.model_fields["method"].annotation):
            out[str(method)] = cls
    return out


def _error_reply(ident: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message[:500]}}


def run_stdio(server: Any, *, max_frame: int, max_reply: int) -> None:
    """Serve ``server`` on stdin/stdout, one JSON-RPC message per line, answering every malformed frame.

    A frame longer than ``max_frame`` bytes (``RANKLOCK_MAX_BODY_BYTES``) is skipped unread and answered;
    a reply longer than ``max_reply`` (``RANKLOCK_MCP_MAX_REPLY``) is replaced by an error naming its size.
    """
    import anyio
    import mcp_types as types

    # The SDK's own stdio transport builds the same pair of context-carrying streams.
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer

    async def main() -> None:
        read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, write_reader = create_context_streams[SessionMessage](0)
        replies = anyio.create_memory_object_stream[dict[str, Any]](16)
        out_lock = anyio.Lock()

        def read_frame() -> bytes | None:
            """One line, or None (after skipping the rest of it) when it is longer than ``max_frame``."""
            line = stdin.readline(max_frame + 1)
            if len(line) <= max_frame or line.endswith(b"\n"):
                return line
            while line and not line.endswith(b"\n"):
                line = stdin.readline(1 << 20)
            return None

        async def reader() -> None:
            async with read_writer, replies[0]:
                while True:
                    line = await anyio.to_thread.run_sync(read_frame)
                    if line is None:
                        await replies[0].send(
                            _error_reply(
                                None,
                                types.PARSE_ERROR,
                                f"the frame is longer than {max_frame:,} bytes (RANKLOCK_MAX_BODY_BYTES); it was "
                                "skipped unread",
                            )
                        )
                        continue
                    if not line:
                        return
                    if not line.strip():
                        continue
                    bad = frame_error(line)
                    if bad is not None:
                        await replies[0].send(bad)
                        continue
                    message = types.jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
                    await read_writer.send(SessionMessage(message))

        async def write(text: str) -> None:
            # Two tasks answer (the server's replies, the frame errors): one line at a time.
            async with out_lock:
                await anyio.to_thread.run_sync(lambda: (stdout.write(text.encode("utf-8") + b"\n"), stdout.flush()))

        async def writer() -> None:
            async with write_reader:
                async for session_message in write_reader:
                    msg = session_message.message
                    ident = getattr(msg, "id", None)
                    try:
                        text = msg.model_dump_json(by_alias=True, exclude_unset=True)
                        size = len(text.encode("utf-8"))
                    except (ValueError, UnicodeEncodeError) as exc:
                        # A reply that cannot be written as UTF-8 JSON (a lone surrogate) still gets an answer.
                        text = json.dumps(
                            _error_reply(ident, types.INTERNAL_ERROR, f"the reply could not be sent: {exc}")
                        )
                    else:
                        if size > max_reply:
                            text = json.dumps(
                                _error_reply(
                                    ident,
                                    types.INTERNAL_ERROR,
                                    f"the reply is {size:,} bytes, over the {max_reply:,} one frame may hold "
                                    "(RANKLOCK_MCP_MAX_REPLY); ask for less (a smaller k, a search instead of the "
                                    "whole document), or raise the limit",
                                )
                            )
                    await write(text)

        async def error_writer() -> None:
            async with replies[1]:
                async for reply in replies[1]:
                    await write(json.dumps(reply))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            tg.start_soon(error_writer)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()

    anyio.run(main)
