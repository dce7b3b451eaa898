"""The API describes itself (issue 45): every route's body, example and errors in the OpenAPI document, held to
what the server really sends.  Real responses are validated against the documented models (no key more, none
missing), every documented request example is sent, and no route documents the 422 it never answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from ranklock import Engine, errors
from ranklock.api import AskArguments, SearchArguments
from ranklock.http import create_app
from ranklock.http import schemas as s
from ranklock.http.guard import Access

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus.jsonl"


@pytest.fixture(scope="module")
def client(engine: Engine) -> TestClient:
    # The examples name the README's collection `docs`, made from examples/corpus.jsonl as the README makes it.
    engine.ingest("docs", CORPUS, replace=True)
    return TestClient(create_app(engine), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def spec(client: TestClient) -> dict[str, Any]:
    return dict(client.get("/openapi.json").json())


def documented(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return dict(spec["paths"][path][method.lower()]["responses"])


def test_no_route_documents_a_422_and_every_one_its_body_and_errors(spec: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            responses = op["responses"]
            assert "422" not in responses, (method, path)
            assert {"400", "413", "421"} <= set(responses), (method, path)
            body = responses["200"]["content"]
            if path != "/":
                assert body["application/json"]["example"] and "$ref" in body["application/json"]["schema"], path
            if path not in ("/", "/healthz"):  # every route but the public two needs a token beyond loopback
                assert {"401", "403", "429"} <= set(responses), (method, path)
            for status, resp in responses.items():
                if status != "200" and path != "/readyz":
                    assert resp["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    search = documented(spec, "POST", "/api/search")
    assert {"404", "409", "503", "504"} <= set(search)
    assert search["404"]["description"].endswith("Types: NotFound.")
    params = [p["name"] for p in spec["paths"]["/api/search"]["get"]["parameters"]]
    assert params == ["collection", "q", "k", "mode", "filter", "snapshot", "as_of", "offset"]
    assert (
        spec["components"]["schemas"]["SearchArguments"]["examples"]
        == SearchArguments.model_config["json_schema_extra"]["examples"]
    )  # type: ignore[index]


def test_the_documented_error_types_are_the_error_tree(spec: dict[str, Any]) -> None:
    for ops in spec["paths"].values():
        for op in ops.values():
            for status, resp in op["responses"].items():
                example = resp.get("content", {}).get("application/json", {}).get("example", {})
                if status == "200" or "error" not in example:
                    continue
                cls = getattr(errors, example["error"]["type"])
                assert cls.http_status == int(status), (status, cls)


@pytest.mark.parametrize(("name", "model"), [(n, m) for n, m in vars(s).items() if n.endswith("Body")])
def test_every_example_fits_its_model(name: str, model: type[BaseModel]) -> None:
    key = {
        "StatusBody": "status",
        "ReadyBody": "ready",
        "CollectionsBody": "collections",
        "CollectionBody": "collection",
        "DropBody": "drop",
        "SearchBody": "search",
        "AnswerBody": "answer",
    }.get(name)
    if key is not None:
        model.model_validate(s.EXAMPLES[key])


def test_every_request_example_is_answered_with_the_documented_body(client: TestClient) -> None:
    for example in SearchArguments.model_config["json_schema_extra"]["examples"]:  # type: ignore[index]
        r = client.post("/api/search", json=example)
        assert r.status_code == 200, (example, r.text)
        s.SearchBody.model_validate(r.json())
        query = {
            "collection": example["collection"],
            "q": example["query"],
            **{k: v for k, v in example.items() if k in ("k", "mode", "filter", "offset")},
        }
        got = client.get("/api/search", params=query)
        assert got.status_code == 200, (query, got.text)
        s.SearchBody.model_validate(got.json())
    for example in AskArguments.model_config["json_schema_extra"]["examples"]:  # type: ignore[index]
        r = client.post("/api/ask", json=example)
        assert r.status_code == 200, (example, r.text)
        s.AnswerBody.model_validate(r.json())


def test_every_other_route_answers_its_documented_body(client: TestClient, engine: Engine) -> None:
    for path, model in [
        ("/api/health", s.StatusBody),
        ("/healthz", s.StatusBody),
        ("/readyz", s.ReadyBody),
        ("/api/collections", s.CollectionsBody),
        ("/api/collections/docs", s.CollectionBody),
    ]:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        model.model_validate(r.json())
    engine.ingest("t_http_schema_drop", CORPUS, replace=True)
    r = client.delete("/api/collections/t_http_schema_drop", params={"confirm": "t_http_schema_drop"})
    assert r.status_code == 200, r.text
    s.DropBody.model_validate(r.json())


def test_the_errors_are_the_documented_ones_in_the_documented_shape(
    client: TestClient, engine: Engine, spec: dict[str, Any]
) -> None:
    cases = [
        (client.post("/api/search", json={"collection": "docs", "query": "x", "kk": 2}), "/api/search", "post", 400),
        (
            client.post("/api/search", content=b"{not json", headers={"content-type": "application/json"}),
            "/api/search",
            "post",
            400,
        ),
        (client.get("/api/collections/t_no_such"), "/api/collections/{name}", "get", 404),
        (client.post("/api/ask", json={"collection": "t_no_such", "question": "who?"}), "/api/ask", "post", 404),
        (client.post("/api/search", content=b"x" * (engine.settings.max_body_bytes + 1)), "/api/search", "post", 413),
        (client.delete("/api/collections/docs"), "/api/collections/{name}", "delete", 400),
    ]
    loopback = TestClient(create_app(engine, access=Access.for_bind("127.0.0.1")), raise_server_exceptions=False)
    cases.append((loopback.get("/api/collections", headers={"host": "evil.example"}), "/api/collections", "get", 421))
    guarded = TestClient(create_app(engine, access=Access.for_bind("0.0.0.0", extra_hosts=["*"])))
    cases.append((guarded.get("/api/collections"), "/api/collections", "get", 401))
    for r, path, method, status in cases:
        assert r.status_code == status, (path, r.status_code, r.text)
        s.ErrorBody.model_validate(r.json())
        assert str(status) in documented(spec, method, path), (method, path, status)
