"""The HTTP API against a hostile client (issue 27): tokens, scopes, Host, limits, strict inputs.

Every case of the issue's adversarial run is here: first as the request that
got through (no token, a rebinding Host, 100 MB bodies, half-sent requests,
k x depth = 10^8, reserved params keys, %ff%fe, k=1&k=2, nanoseconds), then
the answer it gets now.  In-process (TestClient) where the ASGI app decides,
over raw sockets against a real uvicorn where the protocol does.  No answer is
a 500, none logs a traceback, and nothing stored changes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest
from fastapi.testclient import TestClient

from adversary import real_server, request, stored_digest
from fakes import use_hash_embedder
from ranklock import Document, Engine
from ranklock.api import RESERVED_PARAMS
from ranklock.async_engine import AsyncEngine
from ranklock.http import create_app
from ranklock.http.guard import Access, Guard
from ranklock.settings import SearchParams, Settings

COLL = "t_adv_http"
DOCS = [
    Document("kiln", "Kilns", "An electric kiln fires stoneware glaze to cone 6.", {"year": 2023}),
    Document("glaze", "Glazes", "Celadon glaze needs iron oxide and a reduction kiln firing.", {"year": 2024}),
    Document("bread", "Bread", "Sourdough bread rises overnight in a cool kitchen.", {"year": 2024}),
]


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    engine.create_collection(
        COLL, embedder=use_hash_embedder(engine), index="exact", fields=["year:int"], if_missing=True
    )
    engine.ingest(COLL, DOCS, replace=True)
    return COLL


@pytest.fixture(scope="module")
def tokens(engine: Engine) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    read, read_secret = engine.create_token(f"adv-read-{tag}", ["read"])
    _, paid_secret = engine.create_token(f"adv-paid-{tag}", ["read", "paid-generator"])
    gone, gone_secret = engine.create_token(f"adv-gone-{tag}", ["read"])
    revoked = engine.revoke_token(gone.name)
    return {
        "read": read_secret,
        "paid": paid_secret,
        "revoked": gone_secret,
        "revoked_info": revoked,
        "read_info": read,
    }


@pytest.fixture(scope="module")
def secured(engine: Engine, coll: str, tokens: dict[str, Any]) -> TestClient:  # noqa: ARG001 (coll, tokens: made first)
    """The app as `serve --host 0.0.0.0` runs it: a token on every route but the public ones.

    Its tests send hundreds of refused tokens from one client on purpose, so the limit on failed
    authentications (tested on its own below) is off for it.
    """
    saved = engine.settings
    engine.settings = saved.model_copy(update={"auth_fail_limit": (0, 1.0)})
    try:
        return TestClient(create_app(engine, access=Access(require_token=True)), raise_server_exceptions=False)
    finally:
        engine.settings = saved


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def routes(coll: str) -> list[tuple[str, str, dict[str, Any] | None, int]]:
    """Every route of the app: (method, path, JSON body, status with a good token)."""
    return [
        ("GET", "/", None, 200),
        ("GET", "/healthz", None, 200),
        ("GET", "/docs", None, 200),
        ("GET", "/openapi.json", None, 200),
        ("GET", "/api/health", None, 200),
        ("GET", "/readyz", None, 200),
        ("GET", "/api/collections", None, 200),
        ("GET", f"/api/collections/{coll}", None, 200),
        ("GET", f"/api/search?collection={coll}&q=kiln&k=2&mode=lexical", None, 200),
        ("POST", "/api/search", {"collection": coll, "query": "kiln glaze", "k": 2}, 200),
        ("POST", "/api/ask", {"collection": coll, "question": "What does celadon glaze need?"}, 200),
        # A drop needs the admin scope, which the good (read) token lacks.
        ("DELETE", f"/api/collections/{coll}", None, 403),
    ]


def test_the_route_table_covers_every_route_of_the_app(engine: Engine, coll: str) -> None:
    app = create_app(engine)
    served = {(m, r.path) for r in app.routes for m in getattr(r, "methods", ()) if m != "HEAD"}
    listed = {(m, p.split("?")[0].replace(coll, "{name}")) for m, p, _, _ in routes(coll)}
    assert served == listed


PUBLIC = {"/", "/healthz"}
JSON = {"content-type": "application/json"}
NO_TOKEN = (
    "this server needs an API token: send `Authorization: Bearer <token>`; its operator creates one with "
    "`ranklock token create NAME`."
)
MALFORMED = (
    "the bearer token is malformed (a ranklock token is rlk_ and 43 characters); send `Authorization: Bearer <token>` "
    "with a token from `ranklock token create`."
)
UNKNOWN = "the bearer token is not one this server issued; ask its operator for a token."


@pytest.mark.parametrize("who", ["none", "malformed", "unknown", "basic", "revoked", "good"])
def test_every_route_with_no_bad_revoked_and_good_tokens(
    secured: TestClient, coll: str, tokens: dict[str, Any], who: str
) -> None:
    headers = {
        "none": {},
        "malformed": bearer("nope"),
        "unknown": bearer("rlk_" + "A" * 43),
        "basic": {"Authorization": "Basic dXNlcjpwYXNz"},
        "revoked": bearer(tokens["revoked"]),
        "good": bearer(tokens["read"]),
    }[who]
    gone = tokens["revoked_info"]
    expected = {
        "none": NO_TOKEN,
        "malformed": MALFORMED,
        "unknown": UNKNOWN,
        "basic": "the Authorization header is not `Bearer <token>`; send the token from `ranklock token create` as "
        "`Authorization: Bearer <token>`.",
        "revoked": f"the bearer token {gone.prefix}… ({gone.name!r}) was revoked at {gone.revoked_at.isoformat()}; "
        "ask the server's operator for a new one.",
    }
    for method, path, body, good_status in routes(coll):
        r = secured.request(method, path, json=body, headers=headers)
        # /readyz answers a probe that sends no token (with its status alone); a token sent is checked.
        if who == "good" or path in PUBLIC or (who == "none" and path == "/readyz"):
            assert r.status_code == good_status, (path, r.text)
            continue
        assert r.status_code == 401, (path, r.status_code, r.text)
        assert r.headers["www-authenticate"] == 'Bearer realm="ranklock"'
        assert r.json() == {"error": {"type": "Unauthorized", "message": expected[who]}}, path


def test_public_routes_hold_no_data(secured: TestClient, coll: str) -> None:
    for path in PUBLIC:
        r = secured.get(path)
        assert r.status_code == 200 and coll not in r.text and "kiln" not in r.text.lower()


def test_a_paid_generator_needs_its_own_scope(secured: TestClient, coll: str, tokens: dict[str, Any]) -> None:
    body = {"collection": coll, "question": "What does celadon glaze need?", "generator": "openai"}
    r = secured.post("/api/ask", json=body, headers=bearer(tokens["read"]))
    assert r.status_code == 403
    assert r.json()["error"] == {
        "type": "Forbidden",
        "message": "generator 'openai' is billed to the server's operator, and this token lacks the scope "
        "`paid-generator`; use generator extractive, or a token created with --scope paid-generator.",
    }
    # With the scope the request reaches the generator (here unconfigured: its own error, not the scope's).
    r = secured.post("/api/ask", json=body, headers=bearer(tokens["paid"]))
    assert r.status_code != 403 and r.json()["error"]["type"] != "Forbidden"


@pytest.mark.usefixtures("coll")
def test_a_revoked_token_is_refused_from_the_next_request(engine: Engine, secured: TestClient) -> None:
    info, secret = engine.create_token(f"adv-soon-{uuid.uuid4().hex[:8]}", ["read"])
    assert secured.get("/api/collections", headers=bearer(secret)).status_code == 200
    engine.revoke_token(str(info.id))
    r = secured.get("/api/collections", headers=bearer(secret))
    assert r.status_code == 401 and "was revoked at" in r.json()["error"]["message"]


def test_token_cli_create_list_revoke(engine: Engine, rl_home: Any) -> None:
    from typer.testing import CliRunner

    from ranklock.cli import app

    runner = CliRunner()
    name = f"adv-cli-{uuid.uuid4().hex[:8]}"
    made = runner.invoke(app, ["token", "create", name, "--scope", "read", "--home", str(rl_home), "--json"])
    assert made.exit_code == 0, made.output
    created = json.loads(made.output)
    assert created["token"].startswith("rlk_") and len(created["token"]) == 47 and created["scopes"] == ["read"]
    # Only the hash is stored: the secret is in no column.
    stored = engine.db.fetchone("SELECT * FROM ranklock.api_tokens WHERE id = %s", [created["id"]])
    assert stored is not None and created["token"] not in json.dumps(stored, default=str)
    listed = runner.invoke(app, ["token", "list", "--home", str(rl_home), "--json"])
    assert name in listed.output and created["token"] not in listed.output
    bad = runner.invoke(app, ["token", "create", name, "--scope", "write", "--home", str(rl_home)])
    assert (
        bad.exit_code == 2 and "unknown token scope 'write'; use admin and/or paid-generator and/or read" in bad.output
    )
    twice = runner.invoke(app, ["token", "create", name, "--home", str(rl_home)])
    assert twice.exit_code == 2 and f"a live token named {name!r} exists already" in twice.output
    gone = runner.invoke(app, ["token", "revoke", name, "--home", str(rl_home)])
    assert gone.exit_code == 0 and "revoked token" in gone.output
    again = runner.invoke(app, ["token", "revoke", name, "--home", str(rl_home)])
    assert again.exit_code == 2 and f"no live token named {name!r}" in again.output


# -- DNS rebinding: the Host allow-list of a loopback server --------------------------------------------------


def test_a_loopback_server_answers_only_to_local_host_names(engine: Engine, coll: str) -> None:
    client = TestClient(create_app(engine, access=Access.for_bind("127.0.0.1")), raise_server_exceptions=False)
    for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"):
        assert client.get("/api/collections", headers={"host": host}).status_code == 200, host
    r = client.get("/api/collections", headers={"host": "evil.example:8000"})
    assert r.status_code == 421
    assert r.json()["error"] == {
        "type": "HostNotAllowed",
        "message": "this server answers to Host 127.0.0.1, ::1, localhost, not 'evil.example:8000' (a page whose DNS "
        "name points here is not this server's). Use one of those names, or start `ranklock serve` with "
        "--allow-host NAME.",
    }
    assert client.get("/", headers={"host": "evil.example"}).status_code == 421  # the page too
    # No token is needed on loopback (make demo, the page): the local user is the operator.
    assert client.get("/api/search", params={"collection": coll, "q": "kiln"}, headers={"host": "localhost"}).is_success


def test_a_public_server_without_allow_host_answers_only_to_its_own_names(
    engine: Engine,
    coll: str,  # noqa: ARG001 (the data the routes read: made first)
    tokens: dict[str, Any],
) -> None:
    """Issue 41: `serve --host 0.0.0.0` with no --allow-host answered any Host (DNS rebinding reached it)."""
    import socket

    client = TestClient(create_app(engine, access=Access.for_bind("0.0.0.0")), raise_server_exceptions=False)
    good = bearer(tokens["read"])
    r = client.get("/api/collections", headers={**good, "host": "evil.example"})
    assert r.status_code == 421 and r.json()["error"]["type"] == "HostNotAllowed"
    for host in (socket.gethostname(), "127.0.0.1:8000", "localhost"):
        assert client.get("/api/collections", headers={**good, "host": host}).status_code == 200, host
    anyone = TestClient(create_app(engine, access=Access.for_bind("0.0.0.0", extra_hosts=["*"])))
    assert anyone.get("/api/collections", headers={**good, "host": "search.example.org"}).status_code == 200
    named = TestClient(create_app(engine, access=Access.for_bind("0.0.0.0", extra_hosts=["search.example.org"])))
    assert named.get("/api/collections", headers={**good, "host": socket.gethostname()}).status_code == 421


def test_readyz_answers_a_probe_without_a_token_with_its_status_alone(
    secured: TestClient, coll: str, tokens: dict[str, Any]
) -> None:
    """Issue 41: an orchestrator probes /readyz without a token; the details need one."""
    r = secured.get("/readyz")
    assert (r.status_code, r.json()) == (200, {"status": "ready"})
    r = secured.get("/readyz", headers=bearer(tokens["read"]))
    assert r.status_code == 200 and {c["name"] for c in r.json()["collections"]} >= {coll}
    assert r.json()["models"]["state"] in ("not started", "loading", "loaded")
    r = secured.get("/readyz", headers=bearer("rlk_" + "A" * 43))  # a token sent is checked
    assert r.status_code == 401


# -- limits -------------------------------------------------------------------------------------------------------


@pytest.fixture
def limited(engine: Engine) -> Iterator[Settings]:
    """The session engine with its own copy of the settings, restored after the test."""
    saved = engine.settings
    engine.settings = saved.model_copy()
    try:
        yield engine.settings
    finally:
        engine.settings = saved


def test_a_body_over_the_limit_is_refused_on_its_content_length_and_while_it_streams(
    engine: Engine, coll: str, limited: Settings
) -> None:
    limited.max_body_bytes = 1000
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    big = json.dumps({"collection": coll, "query": "x" * 2000})
    r = client.post("/api/search", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.headers["connection"] == "close"
    assert r.json()["error"] == {
        "type": "RequestTooLarge",
        "message": f"the request body is too large: it declares {len(big):,} bytes; the server reads at most 1,000 "
        "(RANKLOCK_MAX_BODY_BYTES). Send a smaller request: a search body is a query and a filter.",
    }

    # A public route needs no token, but reads no more.
    assert client.post("/healthz", content=big).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked, counted as it comes
        for _ in range(20):
            yield b" " * 100

    r = client.post("/api/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"]["message"].startswith("the request body is too large: more than 1,000 bytes came;")


def test_the_cost_cap_refuses_k_times_depth_over_the_limit(engine: Engine, coll: str) -> None:
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    r = client.post("/api/search", json={"collection": coll, "query": "kiln", "k": 10000, "params": {"depth": 10000}})
    assert r.status_code == 400
    assert r.json()["error"] == {
        "type": "QueryError",
        "message": "this search costs k x depth = 10,000 x 10,000 = 100,000,000; the server allows 250,000 "
        "(RANKLOCK_MAX_COST). Lower k or depth.",
    }
    # A single-branch mode ranks max(depth, k) candidates: k alone can be over.
    r = client.get("/api/search", params={"collection": coll, "q": "kiln", "k": 600, "mode": "lexical"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(
        "this search costs k x depth = 600 x 600 = 360,000;"
    )
    ok = client.post("/api/search", json={"collection": coll, "query": "kiln", "k": 500, "params": {"depth": 500}})
    assert ok.status_code == 200
    long_filter = " or ".join(["year = 2024"] * 400)
    r = client.post("/api/search", json={"collection": coll, "query": "kiln", "filter": long_filter})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == (
        f"the filter is {len(long_filter):,} characters; the server allows 4,000 (RANKLOCK_MAX_FILTER_SIZE). "
        "Narrow it to fewer conditions or values."
    )


@pytest.mark.usefixtures("coll")
def test_the_rate_limit_is_per_token(engine: Engine, tokens: dict[str, Any], limited: Settings) -> None:
    limited.rate_limit = (3, 60.0)
    client = TestClient(create_app(engine, access=Access(require_token=True)), raise_server_exceptions=False)
    got = [client.get("/api/collections", headers=bearer(tokens["read"])).status_code for _ in range(4)]
    assert got == [200, 200, 200, 429]
    r = client.get("/api/collections", headers=bearer(tokens["read"]))
    info = tokens["read_info"]
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    message = r.json()["error"]["message"]
    assert message.startswith(
        f"over the rate limit of 3 requests per 60 s for token {info.prefix}… ({info.name}) (RANKLOCK_RATE_LIMIT); "
        "retry in "
    )
    assert client.get("/api/collections", headers=bearer(tokens["paid"])).status_code == 200  # another token


def test_concurrent_searches_per_token_are_capped(engine: Engine, tokens: dict[str, Any], limited: Settings) -> None:
    """Two searches of one token run; a third at the same time is a 429 at once; another token is not affected."""
    limited.token_concurrency = 2
    release = asyncio.Event()
    running = 0

    async def route(_scope: Any, _receive: Any, send: Any) -> None:
        # The route behind the guard: a search that holds on until released.
        nonlocal running
        running += 1
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def main() -> list[int]:
        aeng = AsyncEngine.over(engine)
        guard = Guard(route, aeng=aeng, access=Access(require_token=True), settings=limited)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://t") as client:
            first = [asyncio.create_task(client.get("/api/search", headers=bearer(tokens["read"]))) for _ in range(2)]
            while running < 2:
                await asyncio.sleep(0.01)
            third = await client.get("/api/search", headers=bearer(tokens["read"]))
            other = asyncio.create_task(client.get("/api/search", headers=bearer(tokens["paid"])))
            while running < 3:
                await asyncio.sleep(0.01)
            release.set()
            done = [r.status_code for r in await asyncio.gather(*first, other)]
            assert third.json()["error"]["message"].endswith(
                "runs 2 searches or asks already, the most one token may run at once (RANKLOCK_TOKEN_CONCURRENCY=2); "
                "wait for one to finish."
            )
            after = await client.get("/api/search", headers=bearer(tokens["read"]))
        await aeng.release()
        return [*done, third.status_code, after.status_code]

    assert asyncio.run(main()) == [200, 200, 200, 429, 200]


# -- strict inputs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(RESERVED_PARAMS))
def test_a_reserved_key_inside_params_is_a_400_naming_it(engine: Engine, coll: str, key: str) -> None:
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    r = client.post("/api/search", json={"collection": coll, "query": "kiln", "params": {key: 5}})
    assert r.status_code == 400
    assert r.json()["error"] == {
        "type": "InputError",
        "message": f"params key {key!r} is reserved: it is a key of the request itself, not a search parameter; give "
        f"it once, at the top level next to query, and keep params for {', '.join(sorted(SearchParams.model_fields))}.",
    }


def test_get_query_strings_are_read_strictly(engine: Engine, coll: str) -> None:
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    r = client.get(f"/api/search?collection={coll}&q=%ff%fe")
    assert r.status_code == 400
    assert r.json()["error"] == {
        "type": "QueryError",
        "message": "query parameter 'q' is not valid UTF-8 once its %-escapes are decoded ('q=%ff%fe'); "
        "percent-encode the text as UTF-8.",
    }
    post = client.post("/api/search", content=b'{"collection": "%s", "query": "\\xff\\xfe"}' % coll.encode())
    assert post.status_code == 400  # the POST body refused the same bytes before
    r = client.get(f"/api/search?collection={coll}&q=kiln&k=1&k=2")
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "query parameter 'k' is given twice ('1' and '2'); give it once."
    r = client.get(f"/api/search?collection={coll}&q=kiln&snapshot_id=1")
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("unknown query parameter 'snapshot_id';")
    assert client.get(f"/api/search?collection={coll}&q=caf%C3%A9+kiln").status_code == 200


@pytest.mark.parametrize("as_of", ["2026-01-31T00:00:00.123456789Z", "2026-01-31T00:00:00.1234567+00:00"])
def test_as_of_finer_than_a_microsecond_is_refused_not_truncated(engine: Engine, coll: str, as_of: str) -> None:
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    message = (
        f"as_of {as_of!r} is finer than a microsecond, which timestamps keep; round it to at most 6 fractional "
        "digits (e.g. 2026-01-31T00:00:00.123456Z)."
    )
    for r in (
        client.post("/api/search", json={"collection": coll, "query": "kiln", "as_of": as_of}),
        client.get("/api/search", params={"collection": coll, "q": "kiln", "as_of": as_of}),
    ):
        assert r.status_code == 400 and r.json()["error"] == {"type": "QueryError", "message": message}
    ok = client.post("/api/search", json={"collection": coll, "query": "kiln", "as_of": "2026-01-31T00:00:00.123456Z"})
    assert ok.status_code == 200


def test_snapshot_id_is_taken_for_snapshot_and_both_are_refused(engine: Engine, coll: str) -> None:
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    sid = engine.collection(coll).active_snapshot_id
    r = client.post("/api/search", json={"collection": coll, "query": "kiln", "snapshot_id": sid})
    assert r.status_code == 200 and r.json()["snapshot"]["id"] == sid
    r = client.post("/api/search", json={"collection": coll, "query": "kiln", "snapshot_id": 10**9})
    assert r.status_code == 404  # honoured: not silently the active snapshot
    r = client.post("/api/search", json={"collection": coll, "query": "kiln", "snapshot_id": sid, "snapshot": sid})
    assert r.status_code == 400 and r.json()["error"]["message"] == (
        "snapshot and snapshot_id are the same key (a snapshot id); give one of them."
    )


def test_docs_are_served_locally(engine: Engine) -> None:
    client = TestClient(create_app(engine))
    page = client.get("/docs")
    assert page.status_code == 200 and "/api/search" in page.text and "/openapi.json" in page.text
    assert "http://" not in page.text and "https://" not in page.text and "<script" not in page.text
    assert client.get("/redoc").status_code == 404


def test_a_hostile_request_corpus_gets_no_500_no_traceback_and_changes_nothing(
    engine: Engine, coll: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    before = stored_digest(engine)
    deep = "(" * 5000 + "year = 1" + ")" * 5000
    # (method, path, body, status): text that only looks hostile is searched as text (200).
    hostile: list[tuple[str, str, Any, int]] = [
        ("POST", "/api/search", {"collection": coll, "query": "kiln", "params": {"k": 3, "mode": "x"}}, 400),
        ("POST", "/api/search", {"collection": coll, "query": "kiln", "k": True}, 400),
        ("POST", "/api/search", {"collection": coll, "query": "\ud800"}, 400),
        ("POST", "/api/search", {"collection": coll, "query": "kiln", "filter": deep}, 400),
        ("POST", "/api/search", {"collection": coll, "query": "kiln", "filter": {"and": [{"and": []}] * 3}}, 400),
        ("POST", "/api/search", {"collection": coll, "query": "kiln", "params": {"depth": 10**30}}, 400),
        ("POST", "/api/search", {"collection": coll, "query": "kiln", "as_of": "2026-13-45T99:99:99Z"}, 400),
        ("POST", "/api/search", {"collection": "../../etc/passwd", "query": "kiln"}, 404),
        ("POST", "/api/search", {"collection": coll, "query": "kiln'; DROP TABLE ranklock.collections; --"}, 200),
        ("POST", "/api/search", [1, 2, 3], 400),
        ("POST", "/api/search", "x" * 10, 400),
        ("POST", "/api/ask", {"collection": coll, "question": "q", "generator": "../../bin/sh"}, 400),
        ("POST", "/api/ask", {"collection": coll, "question": "q", "chunks": 10**6}, 400),
        ("GET", f"/api/search?collection={coll}&q=" + "%" * 30, None, 200),
        ("GET", f"/api/search?collection={coll}&q=kiln&k=-1", None, 400),
        ("GET", f"/api/search?collection={coll}&q=kiln&snapshot=99999999999999999999999", None, 400),
        ("GET", "/api/collections/" + "a" * 5000, None, 404),
    ]
    raw_bodies = [b'{"collection": "x", "query": ' + b"[" * 5000 + b"]" * 5000 + b"}", b"\xff\xfe", b"{" * 100000]
    with caplog.at_level(logging.WARNING):
        # json.dumps escapes (\\ud800): the client library would refuse to encode a lone surrogate itself.
        statuses = [
            client.request(m, p, content=None if b is None else json.dumps(b), headers=JSON).status_code
            for m, p, b, _ in hostile
        ]
        statuses += [client.post("/api/search", content=raw, headers=JSON).status_code for raw in raw_bodies]
    assert statuses == [want for *_, want in hostile] + [400] * len(raw_bodies)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.records
    assert stored_digest(engine) == before


# -- the protocol: against a real server over raw sockets ----------------------------------------------------------


@pytest.mark.usefixtures("coll")
def test_a_huge_body_is_refused_before_it_is_read(engine: Engine) -> None:
    """The issue's 100 MB body cost +196 MB RSS before its 400: now 413 on the declared length, nothing read."""
    proc = psutil.Process()
    with real_server(create_app(engine)) as port:
        rss = proc.memory_info().rss
        t = time.monotonic()
        head = (
            f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {100 * 10**6}\r\n\r\n"
        ).encode()
        status, _, body, closed = request(port, head + b'{"collection": ')
        assert status == 413 and closed and time.monotonic() - t < 2
        assert body["error"]["type"] == "RequestTooLarge"
        # Chunked: counted as it streams; refused once over the limit, 100 MB never buffered.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
            piece = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
            sent = 0
            try:
                while sent < 100:
                    sock.sendall(piece)
                    sent += 1
            except OSError:
                pass  # the server answered and closed: the rest is never read
            assert sent < 100
        assert proc.memory_info().rss - rss < 50 * 2**20


@pytest.mark.usefixtures("coll")
def test_a_slow_body_is_cut_off_at_the_body_timeout(engine: Engine, limited: Settings) -> None:
    limited.body_timeout = 1.0
    with real_server(create_app(engine)) as port:
        t = time.monotonic()
        head = b"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        status, _, body, closed = request(port, head + b'{"collection"')
        assert status == 408 and closed and 0.9 < time.monotonic() - t < 3
        assert body["error"] == {
            "type": "RequestTimeout",
            "message": "the request body did not arrive within 1 s (13 bytes came; RANKLOCK_BODY_TIMEOUT); the "
            "connection is closed. Send the whole body at once.",
        }


def test_300_half_sent_requests_are_all_closed_at_the_header_timeout(engine: Engine) -> None:
    """The issue's slow-loris: 300 connections with half a request each were all open after 60 s."""
    with real_server(create_app(engine), header_timeout=1.0) as port:
        socks = []
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 3 == 0:
                s.sendall(b"GET /api/collect")  # half a request line
            elif i % 3 == 1:
                s.sendall(b"GET /api/collections HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never ended
            socks.append(s)  # and a third sends nothing at all
        t = time.monotonic()
        closed = 0
        for s in socks:
            s.settimeout(max(0.1, t + 5 - time.monotonic()))
            data = b""
            try:
                while chunk := s.recv(4096):
                    data += chunk
                closed += 1
                assert data == b"" or data.startswith(b"HTTP/1.1 408 Request Timeout"), data[:80]
            except TimeoutError:
                pass
            finally:
                s.close()
        assert closed == 300 and time.monotonic() - t < 5
        # The server still answers a well-behaved client.
        status, _, body, _ = request(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status == 200 and body == {"status": "ok"}


# -- who the client is (issue 42) ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("coll")
def test_x_forwarded_for_from_loopback_is_not_believed_unless_the_proxy_is_named(
    engine: Engine, limited: Settings
) -> None:
    """The issue: uvicorn believed X-Forwarded-For from 127.0.0.1, so any local process escaped the per-client
    limits (a new address a request) and wrote forged addresses into the access log."""
    limited.rate_limit = (3, 60.0)
    forged = [{"X-Forwarded-For": f"203.0.113.{i}"} for i in range(5)]
    with real_server(create_app(engine)) as port:
        got = [httpx.get(f"http://127.0.0.1:{port}/api/collections", headers=h).status_code for h in forged]
        assert got == [200, 200, 200, 429, 429]
        r = httpx.get(f"http://127.0.0.1:{port}/api/collections", headers=forged[0])
        assert "for client 127.0.0.1 (RANKLOCK_RATE_LIMIT)" in r.json()["error"]["message"]
    limited.rate_limit = (3, 60.0)  # a fresh app: fresh buckets
    with real_server(create_app(engine), trusted_proxies=("127.0.0.1",)) as port:
        got = [httpx.get(f"http://127.0.0.1:{port}/api/collections", headers=h).status_code for h in forged]
        assert got == [200, 200, 200, 200, 200]  # a named proxy: each forwarded client has its own bucket


@pytest.mark.usefixtures("coll")
def test_failed_authentications_are_rate_limited_before_any_lookup(
    engine: Engine, tokens: dict[str, Any], limited: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue: 1,300 wrong tokens in 3.7 s, each a database lookup."""
    limited.auth_fail_limit = (5, 60.0)
    looked: list[str] = []
    client = TestClient(create_app(engine, access=Access(require_token=True)), raise_server_exceptions=False)
    from ranklock.store import tokens as store_tokens

    real = store_tokens.verify_token_steps

    def counting(token: str) -> Any:  # the real lookup, counted
        looked.append(token)
        return real(token)

    monkeypatch.setattr(store_tokens, "verify_token_steps", counting)
    got = [client.get("/api/collections", headers=bearer(f"rl_wrong{i:04d}")).status_code for i in range(50)]
    assert got[:5] == [401] * 5 and set(got[5:]) == {429}
    assert len(looked) == 5  # the 45 after the fifth failure were refused without a lookup
    r = client.get("/api/collections", headers=bearer(tokens["read"]))
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert r.json()["error"]["message"].startswith(
        "client testclient sent 5 tokens that were refused within 60 s (RANKLOCK_AUTH_FAIL_LIMIT); retry in "
    )


def test_a_json_body_that_repeats_a_key_is_a_400_naming_it(engine: Engine, coll: str) -> None:
    """Issue 48: `{"k": 1, "k": 50}` ran with k=50 (the parser keeps the last), where `?k=1&k=50` was refused."""
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    body = b'{"collection": "%s", "query": "kiln", "k": 1, "k": 50}' % coll.encode()
    r = client.post("/api/search", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"] == {
        "type": "InputError",
        "message": "the request body is not accepted: the key 'k' is given twice in one object (1 and 50); give "
        "each key once.",
    }
    nested = b'{"collection": "%s", "query": "kiln", "params": {"depth": 5, "depth": 500}}' % coll.encode()
    r = client.post("/api/search", content=nested, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "the key 'depth' is given twice in one object (5 and 500)" in r.text
    r = client.post("/api/ask", content=b'{"collection": "x", "question": "a", "question": "b"}')
    assert r.status_code == 400 and "the key 'question' is given twice" in r.text
    once = b'{"collection": "%s", "query": "kiln", "k": 1}' % coll.encode()
    assert client.post("/api/search", content=once, headers={"content-type": "application/json"}).status_code == 200
