"""`ranklock mcp` over stdio, driven by the official MCP SDK client, against a real collection."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from fakes import use_hash_embedder
from ranklock import Document, Engine
from ranklock.api import AskArguments, SearchArguments

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    Document("kiln", "Kilns", "An electric kiln fires stoneware glaze to cone 6.", {"year": 2023}),
    Document("glaze", "Glazes", "Celadon glaze needs iron oxide and a reduction kiln firing.", {"year": 2024}),
    Document("bread", "Bread", "Sourdough bread rises overnight in a cool kitchen.", {"year": 2024}),
]


@pytest.fixture
def coll(engine: Engine, cname: str) -> Iterator[str]:
    engine.create_collection(cname, embedder=use_hash_embedder(engine), index="exact", fields=["year:int"])
    engine.ingest(cname, DOCS)
    yield cname


def session(rl_home: Path, *, launcher: list[str], calls: Any) -> Any:
    """Spawn the server with ``launcher``, initialise an SDK ClientSession, run ``calls(session)``."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    params = StdioServerParameters(
        command=sys.executable, args=[*launcher, "mcp", "--home", str(rl_home)], env=env, cwd=str(ROOT)
    )

    async def main() -> Any:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                return await calls(s)

    return anyio.run(main)


HASH = [str(ROOT / "tests" / "mcp_hash_server.py")]


def payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return dict(result.structured_content)


def test_tools_are_listed_read_only_with_the_http_schemas(rl_home: Path) -> None:
    async def calls(s: Any) -> Any:
        return (await s.list_tools()).tools

    tools = {t.name: t for t in session(rl_home, launcher=["-m", "ranklock"], calls=calls)}
    assert sorted(tools) == ["ask", "get_document", "list_collections", "search"]
    assert all(t.annotations.read_only_hint and not t.annotations.destructive_hint for t in tools.values())
    for name, model in (("search", SearchArguments), ("ask", AskArguments)):
        want = model.model_json_schema()
        got = tools[name].input_schema
        assert sorted(got["properties"]) == sorted(want["properties"])
        assert sorted(got.get("required", [])) == sorted(want.get("required", []))
        for prop, spec in want["properties"].items():
            for key in ("type", "default", "minimum", "maximum", "anyOf"):
                assert got["properties"][prop].get(key) == spec.get(key), (name, prop, key)


def test_search_list_and_get_document_through_python_m_ranklock(engine: Engine, coll: str, rl_home: Path) -> None:
    async def calls(s: Any) -> Any:
        return (
            await s.call_tool("list_collections", {}),
            await s.call_tool("search", {"collection": coll, "query": "kiln glaze", "mode": "lexical", "k": 2}),
            await s.call_tool("get_document", {"collection": coll, "doc_id": "glaze"}),
            await s.call_tool("search", {"collection": coll, "query": "kiln", "mode": "sideways"}),
            await s.call_tool("get_document", {"collection": coll, "doc_id": "nope"}),
        )

    listed, found, doc, bad_mode, missing = session(rl_home, launcher=["-m", "ranklock"], calls=calls)
    names = [c["name"] for c in payload(listed)["collections"]]
    assert coll in names
    # The same canonical result the engine (and the HTTP API) gives, but for the log id and timings.
    expected = json.loads(engine.search(coll, "kiln glaze", mode="lexical", k=2).to_json())
    got = payload(found)
    assert {k: v for k, v in got.items() if k not in ("timings", "query_id")} == expected
    d = payload(doc)
    assert (d["doc_id"], d["title"], d["body"], d["metadata"]) == ("glaze", DOCS[1].title, DOCS[1].body, {"year": 2024})
    assert d["snapshot_id"] == engine.collection(coll).active_snapshot_id
    assert bad_mode.is_error
    assert bad_mode.content[0].text == (
        "Error executing tool search: QueryError: unknown mode 'sideways'; use one of hybrid, lexical, semantic."
    )
    assert missing.is_error
    assert missing.content[0].text.startswith(
        f"Error executing tool get_document: NotFound: collection {coll!r} has no document 'nope' in snapshot "
    )


def test_hybrid_search_with_filter_and_ask(engine: Engine, coll: str, rl_home: Path) -> None:
    async def calls(s: Any) -> Any:
        return (
            await s.call_tool("search", {"collection": coll, "query": "kiln glaze", "k": 3, "filter": "year >= 2024"}),
            await s.call_tool("ask", {"collection": coll, "question": "What does celadon glaze need?"}),
        )

    found, answered = session(rl_home, launcher=HASH, calls=calls)
    expected = json.loads(engine.search(coll, "kiln glaze", k=3, filter="year >= 2024").to_json())
    got = payload(found)
    assert {k: v for k, v in got.items() if k not in ("timings", "query_id")} == expected
    assert [h["doc_id"] for h in got["hits"]] == [h["doc_id"] for h in expected["hits"]]
    assert {h["doc_id"] for h in got["hits"]} <= {"glaze", "bread"}
    ans = payload(answered)
    assert ans == json.loads(engine.ask(coll, "What does celadon glaze need?").to_json()) | {
        "answer_id": ans["answer_id"]
    }
