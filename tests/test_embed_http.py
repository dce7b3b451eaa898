"""The OpenAI-compatible HTTP embedder, against a real local ``/embeddings`` server (httpx's real transport)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import httpx
import numpy as np
import pytest

from ranklock.embed.http import OpenAIEmbedder
from ranklock.errors import EmbedderError


class _FakeEmbeddings(BaseHTTPRequestHandler):
    #: (status, body) the next request gets; body None: one 3-d vector per input, in reversed index order.
    reply: ClassVar[tuple[int, bytes | None]] = (200, None)
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        body = json.loads(raw)
        type(self).seen.append({"path": self.path, "raw": raw, "auth": self.headers.get("Authorization")})
        status, payload = type(self).reply
        if payload is None:
            data = [{"index": i, "embedding": [float(i + 1), 0.0, 0.0]} for i in range(len(body["input"]))]
            payload = json.dumps({"data": data[::-1]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args: Any) -> None:
        return None


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _FakeEmbeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeEmbeddings.seen = []
    _FakeEmbeddings.reply = (200, None)
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join()


def test_embeds_in_index_order_normalised_and_sends_the_same_body(endpoint: str) -> None:
    emb = OpenAIEmbedder("fake-model", endpoint + "/", 3, api_key="secret")
    m = emb.embed(["alpha", "beta"])
    assert m.dtype == np.float32 and m.shape == (2, 3)
    # Rows come back sorted by "index" (the server answered them reversed) and unit length.
    assert m.tolist() == [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    sent = _FakeEmbeddings.seen[0]
    assert sent["path"] == "/v1/embeddings"
    assert sent["raw"] == json.dumps({"model": "fake-model", "input": ["alpha", "beta"]}).encode()
    assert sent["auth"] == "Bearer secret"
    assert emb.embed([]).shape == (0, 3) and len(_FakeEmbeddings.seen) == 1  # nothing to embed: no request


def test_key_from_openai_api_key(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    OpenAIEmbedder("m", endpoint, 3).embed(["x"])
    monkeypatch.delenv("OPENAI_API_KEY")
    OpenAIEmbedder("m", endpoint, 3).embed(["x"])
    assert [s["auth"] for s in _FakeEmbeddings.seen] == ["Bearer from-env", None]


def test_wrong_shape_names_both_shapes(endpoint: str) -> None:
    with pytest.raises(EmbedderError) as err:
        OpenAIEmbedder("m", endpoint, 4).embed(["a", "b"])
    assert str(err.value) == (
        f"endpoint {endpoint} returned vectors of shape (2, 3), expected (2, 4); "
        "fix the #dimension in the embedder spec."
    )


def test_http_error_status_is_an_embedder_error(endpoint: str) -> None:
    _FakeEmbeddings.reply = (500, b'{"error": "overloaded"}')
    with pytest.raises(EmbedderError) as err:
        OpenAIEmbedder("m", endpoint, 3).embed(["a"])
    text = str(err.value)
    assert text.startswith(f"embedding endpoint {endpoint} failed: ") and "500" in text
    assert text.endswith("; check the URL and key.")


def test_non_json_answer_is_an_embedder_error(endpoint: str) -> None:
    _FakeEmbeddings.reply = (200, b"<html>proxy error</html>")
    with pytest.raises(EmbedderError, match=r"^embedding endpoint .* failed: Expecting value"):
        OpenAIEmbedder("m", endpoint, 3).embed(["a"])


def test_connection_refused_is_an_embedder_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(EmbedderError, match=rf"^embedding endpoint {url} failed: .*; check the URL and key\.$"):
        OpenAIEmbedder("m", url, 3).embed(["a"])


def test_timeout_is_an_embedder_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    real_client = httpx.Client
    monkeypatch.setattr(httpx, "Client", lambda **kw: real_client(transport=httpx.MockTransport(slow), **kw))
    with pytest.raises(EmbedderError, match=r"^embedding endpoint http://e\.invalid/v1 failed: timed out; check"):
        OpenAIEmbedder("m", "http://e.invalid/v1", 3).embed(["a"])
