"""`ranklock mcp` against a hostile client (issue 27): raw JSON-RPC lines over stdio, one reply for each.

The issue found MCP lax where HTTP is strict (``snapshot_id: 2`` ignored, ``k: true`` taken as 1,
unknown arguments dropped) and some frames never answered (a lone surrogate, a filter 5,000
deep).  Here every frame gets exactly one JSON-RPC reply, and the tools refuse what the HTTP API
refuses, with its messages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes import use_hash_embedder
from ranklock import Document, Engine
from ranklock.settings import SearchParams

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    Document("kiln", "Kilns", "An electric kiln fires stoneware glaze to cone 6.", {"year": 2023}),
    Document("glaze", "Glazes", "Celadon glaze needs iron oxide and a reduction kiln firing.", {"year": 2024}),
]


class RawClient:
    """An MCP client that writes whatever bytes it is given, one frame per line, and reads one reply per frame."""

    def __init__(self, rl_home: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "mcp_hash_server.py"), "mcp", "--home", str(rl_home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env},
            cwd=str(ROOT),
        )
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        )
        assert "result" in self.reply()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, frame: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = frame if isinstance(frame, bytes) else json.dumps(frame).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout without a reply"
        return dict(json.loads(line))

    def call(self, ident: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(
            {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        )
        got = self.reply()
        assert got["id"] == ident
        return got

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    name = "t_adv_mcp"
    engine.create_collection(
        name, embedder=use_hash_embedder(engine), index="exact", fields=["year:int"], if_missing=True
    )
    engine.ingest(name, DOCS, replace=True)
    engine.ingest(name, DOCS[:1], replace=True)  # a second snapshot: the first is an old one now
    return name


@pytest.fixture(scope="module")
def client(rl_home: Path, coll: str) -> Iterator[RawClient]:  # noqa: ARG001 (coll: made first)
    c = RawClient(rl_home, {"RANKLOCK_MAX_BODY_BYTES": "200000"})
    yield c
    c.close()


def tool_error(reply: dict[str, Any]) -> str:
    result = reply["result"]
    assert result["isError"] is True, result
    return str(result["content"][0]["text"])


def test_malformed_frames_each_get_a_json_rpc_error(client: RawClient) -> None:
    client.send(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    cut = client.reply()
    assert cut["id"] is None and cut["error"]["code"] == -32700
    assert cut["error"]["message"].startswith("the frame is not JSON (")
    head = b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "x": "'
    client.send(head + b'\xff\xfe"}')
    assert client.reply()["error"] == {
        "code": -32700,
        "message": f"the frame is not UTF-8 (invalid start byte at byte {len(head)})",
    }
    deep = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"filter":'
    client.send(deep + b"[" * 5000 + b"]" * 5000 + b"}}}")
    assert client.reply()["error"] == {"code": -32700, "message": "the frame is JSON nested too deeply to read"}
    client.send({"id": 4, "hello": "world"})
    wrong = client.reply()
    assert wrong["id"] == 4 and wrong["error"]["code"] == -32600
    assert wrong["error"]["message"].startswith("the frame is not a JSON-RPC 2.0 message (")
    client.send(b"[" + b" " * 300_000 + b"]")
    assert client.reply()["error"] == {
        "code": -32700,
        "message": "the frame is longer than 200,000 bytes (RANKLOCK_MAX_BODY_BYTES); it was skipped unread",
    }
    client.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})
    assert client.reply() == {"jsonrpc": "2.0", "id": 5, "result": {}}  # and the server is still there


def test_a_lone_surrogate_is_refused_as_over_http(client: RawClient, engine: Engine, coll: str) -> None:
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    client.send(
        b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"search","arguments":'
        b'{"collection":"%s","query":"\\ud800 kiln"}}}' % coll.encode()
    )
    got = client.reply()
    assert got["id"] == 10
    over_http = TestClient(create_app(engine)).post(
        "/api/search",
        content=json.dumps({"collection": coll, "query": "\ud800 kiln"}),
        headers={"content-type": "application/json"},
    )
    error = over_http.json()["error"]
    assert (
        over_http.status_code == 400
        and tool_error(got) == f"Error executing tool search: {error['type']}: {error['message']}"
    )


@pytest.mark.usefixtures("engine")
def test_the_tools_are_as_strict_as_the_http_api(client: RawClient, coll: str) -> None:
    assert tool_error(client.call(20, "search", {"collection": coll, "query": "kiln", "k": True})) == (
        "Error executing tool search: InputError: argument 'k': input should be a valid integer, got True (bool); "
        "fix the value."
    )
    assert tool_error(client.call(21, "search", {"collection": coll, "query": "kiln", "depth": 80})) == (
        "Error executing tool search: InputError: unknown argument 'depth'; valid arguments: as_of, collection, "
        "filter, k, mode, offset, params, query, snapshot."
    )
    assert tool_error(client.call(22, "search", {"collection": coll, "query": "kiln", "params": {"k": 3}})) == (
        "Error executing tool search: InputError: params key 'k' is reserved: it is a key of the request itself, not "
        "a search parameter; give it once, at the top level next to query, and keep params for "
        f"{', '.join(sorted(SearchParams.model_fields))}."
    )
    big = {"collection": coll, "query": "kiln", "k": 10000, "params": {"depth": 10000}}
    assert tool_error(client.call(23, "search", big)) == (
        "Error executing tool search: QueryError: this search costs k x depth = 10,000 x 10,000 = 100,000,000; the "
        "server allows 250,000 (RANKLOCK_MAX_COST). Lower k or depth."
    )
    assert tool_error(client.call(24, "list_collections", {"all": True})) == (
        "Error executing tool list_collections: InputError: unknown argument 'all'."
    )
    assert "unknown tool 'drop_everything'" in tool_error(client.call(25, "drop_everything", {}))


def test_snapshot_id_is_honoured(client: RawClient, engine: Engine, coll: str) -> None:
    old = engine.list_snapshots(coll)[0].id  # the first: all the documents (later ones: one, merged)
    got = client.call(30, "search", {"collection": coll, "query": "glaze", "mode": "lexical", "snapshot_id": old})
    result = got["result"]["structuredContent"]
    assert result["snapshot"]["id"] == old and [h["doc_id"] for h in result["hits"]][:1] == ["glaze"]
    active = client.call(31, "search", {"collection": coll, "query": "glaze", "mode": "lexical"})
    assert active["result"]["structuredContent"]["snapshot"]["id"] != old  # the old one has a document the active lacks
    missing = client.call(32, "get_document", {"collection": coll, "doc_id": "glaze", "snapshot_id": 10**9})
    assert tool_error(missing).startswith("Error executing tool get_document: NotFound: ")


# -- issue 42 ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ident", "kind"), [({}, "an object"), ([1], "an array"), (True, "a boolean"), (1.5, "a float"), (None, "null")]
)
def test_a_request_whose_id_is_no_string_or_integer_is_answered(client: RawClient, ident: Any, kind: str) -> None:
    """The issue: the SDK took such a request for a notification and never answered; the client waited for ever."""
    client.send({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
    assert client.reply() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"the request's id {json.dumps(ident)} is {kind}; an MCP request's id is a string or an "
            "integer (a message without an id is a notification, which gets no reply)",
        },
    }


def test_bad_params_types_get_a_32602_that_names_the_parameter(client: RawClient) -> None:
    """The issue: -32602 with an empty message."""
    client.send({"jsonrpc": "2.0", "id": 61, "method": "tools/call", "params": {"name": "search", "arguments": "kiln"}})
    assert client.reply()["error"] == {
        "code": -32602,
        "message": "invalid params of tools/call: params.arguments: Input should be a valid dictionary (got a string); "
        "see the tool's input schema in tools/list",
    }
    client.send({"jsonrpc": "2.0", "id": 62, "method": "tools/call", "params": {"name": 5}})
    got = client.reply()
    assert got["id"] == 62 and got["error"]["message"].startswith(
        "invalid params of tools/call: params.name: Input should be a valid string (got an integer)"
    )


@pytest.mark.usefixtures("coll")
def test_a_reply_over_the_frame_cap_is_replaced_by_an_error_naming_its_size(rl_home: Path) -> None:
    """The issue: outgoing frames had no cap (an 83 MB get_document line)."""
    small = RawClient(rl_home, {"RANKLOCK_MCP_MAX_REPLY": "2000"})
    try:
        small.send({"jsonrpc": "2.0", "id": 71, "method": "tools/list"})  # the tools' schemas: several KB
        got = small.reply()
        assert got["id"] == 71 and got["error"]["code"] == -32603
        assert got["error"]["message"].startswith("the reply is ") and (
            "bytes, over the 2,000 one frame may hold (RANKLOCK_MCP_MAX_REPLY)" in got["error"]["message"]
        )
        small.send({"jsonrpc": "2.0", "id": 72, "method": "ping"})
        assert small.reply() == {"jsonrpc": "2.0", "id": 72, "result": {}}  # small replies still go
    finally:
        small.close()


def test_a_frame_that_repeats_a_key_is_refused(client: RawClient, coll: str) -> None:
    """Issue 48: the SDK's parser kept the last of a repeated key, so a tool ran with a value nobody may have meant."""
    client.send(
        b'{"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "search", "arguments": '
        b'{"collection": "%s", "query": "kiln", "k": 1, "k": 50}}}' % coll.encode()
    )
    assert client.reply() == {
        "jsonrpc": "2.0",
        "id": 41,
        "error": {
            "code": -32600,
            "message": "the frame is not accepted: the key 'k' is given twice in one object (1 and 50); give each key "
            "once",
        },
    }
    client.send(b'{"jsonrpc": "2.0", "id": 42, "id": 43, "method": "ping"}')
    assert client.reply()["error"]["message"].startswith("the frame is not accepted: the key 'id' is given twice")
    client.send({"jsonrpc": "2.0", "id": 44, "method": "ping"})
    assert client.reply() == {"jsonrpc": "2.0", "id": 44, "result": {}}
