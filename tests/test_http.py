"""The HTTP API: in-process for most checks, one smoke test against a real server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ranklock import Engine
from ranklock.cli.demo import demo_corpus_path
from ranklock.http import create_app


@pytest.fixture(scope="module")
def client(engine: Engine) -> TestClient:
    engine.ingest("t_http", demo_corpus_path(), replace=True)
    return TestClient(create_app(engine))


def test_search_post_matches_the_engine_byte_for_byte(client: TestClient, engine: Engine) -> None:
    r = client.post("/api/search", json={"collection": "t_http", "query": "sourdough yeast", "k": 3})
    assert r.status_code == 200
    body = r.json()
    assert body["hits"][0]["doc_id"] == "food-001"
    body.pop("timings"), body.pop("query_id")
    assert body.pop("served_by") == "primary"  # no read replicas configured
    assert (
        json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        == engine.search("t_http", "sourdough yeast", k=3).to_json()
    )


def test_search_get_and_collections(client: TestClient) -> None:
    r = client.get("/api/search", params={"collection": "t_http", "q": "vitamin d bones", "k": 2, "mode": "lexical"})
    assert r.status_code == 200 and r.json()["hits"][0]["doc_id"] == "bio-004"
    names = [c["name"] for c in client.get("/api/collections").json()["collections"]]
    assert "t_http" in names


@pytest.mark.parametrize(
    ("payload", "status", "etype", "message"),
    [
        ({"collection": "t_http", "query": ""}, 400, "QueryError", "the query is empty"),
        ({"collection": "missing", "query": "x"}, 404, "NotFound", "no collection named 'missing'"),
        ({"collection": "t_http", "query": "x", "mode": "nope"}, 400, "QueryError", "unknown mode 'nope'"),
    ],
)
def test_errors_are_json_with_the_right_status(
    client: TestClient, payload: dict, status: int, etype: str, message: str
) -> None:
    r = client.post("/api/search", json=payload)
    assert r.status_code == status
    err = r.json()["error"]
    assert err["type"] == etype and err["message"].startswith(message)


def test_collection_detail_lists_typed_fields_and_snapshots(client: TestClient, engine: Engine) -> None:
    body = client.get("/api/collections/t_http").json()
    assert body["fields"] == [
        {"name": f.name, "type": f.type, "required": f.required} for f in engine.collection("t_http").fields
    ]
    assert [s["id"] for s in body["snapshots"]] == [s.id for s in engine.list_snapshots("t_http")]
    assert body["active_snapshot_id"] == engine.collection("t_http").active_snapshot_id
    r = client.get("/api/collections/missing")
    assert r.status_code == 404 and r.json()["error"]["message"].startswith("no collection named 'missing'")


def test_search_page_is_served(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and "<title>ranklock search</title>" in r.text and "/api/search" in r.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.usefixtures("client")
def test_real_server_smoke(rl_home: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ranklock", "serve", "--port", str(port), "--home", str(rl_home)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # `serve` loads every collection's model before it listens (issue 28): allow for that on a loaded machine.
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as resp:
                    assert json.loads(resp.read()) == {"status": "ok"}
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("server did not come up") from None
                time.sleep(0.3)
        url = f"http://127.0.0.1:{port}/api/search?collection=t_http&q=pgvector+hnsw&k=2&mode=lexical"
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert json.loads(resp.read())["hits"][0]["doc_id"] == "pg-002"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
