"""The ``openai`` generator against a small OpenAI-compatible chat server started by the test."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fakes import use_hash_embedder
from ranklock import Engine
from ranklock.ask.abstention import RULE_VERSION
from ranklock.ask.model import ABSTAIN
from ranklock.ask.prompt import render_prompt
from ranklock.errors import CitationError, ConfigError, GenerationError
from test_ask import journal

COLL = "t_ask_openai"


class ChatServer(ThreadingHTTPServer):
    """Speaks POST /v1/chat/completions; ``mode`` picks the reply, ``requests`` records what came in."""

    mode = "good"
    requests: list[tuple[dict[str, str], dict[str, Any]]]


class Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, _format: str, *_args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((dict(self.headers), body))
        if self.path != "/v1/chat/completions":
            return self.reply(404, {"error": "no such path"})
        user = body["messages"][1]["content"]
        m = re.search(r"^\[1\] \([^)]*\) (.+)$", user, re.M)
        quote = m.group(1) if m else ""  # the whole of passage [1]
        first = quote.split(". ")[0].rstrip(".")  # its first sentence
        mode = self.server.mode
        if mode == "http500":
            return self.reply(500, {"error": "boom"})
        if mode == "not_chat":
            return self.reply(200, {"object": "list", "data": []})
        content = {
            "good": json.dumps({"answer": f"{quote} [1].", "citations": [{"n": 1, "quote": quote}]}),
            "garbage": "I believe the answer is Lisbon.",
            "outside": json.dumps({"answer": "Lisbon [9].", "citations": [{"n": 9, "quote": quote}]}),
            "misquote": json.dumps({"answer": "Lisbon [1].", "citations": [{"n": 1, "quote": "words not there"}]}),
            "abstain": json.dumps({"answer": ABSTAIN, "citations": []}),
            "first_sentence": json.dumps({"answer": f"{first} [1].", "citations": [{"n": 1, "quote": first}]}),
        }[mode]
        self.reply(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            },
        )

    def reply(self, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    srv = ChatServer(("127.0.0.1", 0), Handler)
    srv.requests = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    monkeypatch.setenv("RANKLOCK_LLM_URL", f"http://127.0.0.1:{srv.server_address[1]}/v1")
    monkeypatch.setenv("RANKLOCK_LLM_MODEL", "tiny-chat")
    monkeypatch.setenv("RANKLOCK_LLM_API_KEY", "sk-test")
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    emb = use_hash_embedder(engine)
    engine.create_collection(COLL, fields=["lang:keyword", "date:date"], embedder=emb)
    engine.ingest(COLL, journal(), replace=True)
    return COLL


QUESTION = "Where did Oksana Vrell move?"


def test_openai_answer_is_validated_and_recorded(engine: Engine, coll: str, server: ChatServer) -> None:
    ans = engine.ask(coll, QUESTION, generator="openai")
    headers, body = server.requests[-1]
    assert headers["Authorization"] == "Bearer sk-test"
    assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == ("tiny-chat", 0, 0, 512)
    assert body["messages"] == list(render_prompt(QUESTION, ans.chunks).messages)
    assert ans.generator.to_dict() == {
        "name": "openai",
        "model": "tiny-chat",
        "checksum": None,
        "params": {
            "url": server_url(server),
            "temperature": 0,
            "seed": 0,
            "max_tokens": 512,
            "template": "ask-v2",
            "abstention": RULE_VERSION,
        },
    }
    passage = ans.chunks[0].text
    assert ans.answer == f"{passage} [1]."
    assert [(c.n, c.doc_id, c.quote) for c in ans.citations] == [(1, ans.chunks[0].doc_id, passage)]
    assert "sk-test" not in ans.to_json()
    # The same server reply replays identically (the server is deterministic here).
    assert engine.replay_answer(ans.answer_id).identical


def test_openai_follows_the_abstention_rule_of_every_generator(engine: Engine, coll: str, server: ChatServer) -> None:
    # The model declines: the abstention says what was looked for, as extractive-v4's do.
    server.mode = "abstain"
    ans = engine.ask(coll, QUESTION, generator="openai")
    assert (ans.abstained, ans.citations) == (True, ())
    assert ans.answer == (
        f"{ABSTAIN} Looked for a place about “Oksana”, “Vrell”, “move” (the question asks “Where”): "
        "the model found it in none of the 8 passages."
    )
    # The model answers "when" with a sentence that holds no date or time: that is no answer, whatever it cites.
    server.mode = "first_sentence"
    question = "When did Oksana Vrell move to Lisbon?"
    first = next(c for c in engine.ask(coll, question, generator="extractive-v3").chunks if c.n == 1)
    ans = engine.ask(coll, question, generator="openai")
    sentence = first.text.split(". ")[0].rstrip(".")
    if any(ch.isdigit() for ch in sentence):
        pytest.fail(f"passage [1] of this test must hold no date: {sentence!r}")
    assert ans.abstained and ans.answer == (
        f"{ABSTAIN} Looked for a date or a time about “Oksana”, “Vrell”, “move”, “Lisbon” (the question asks "
        "“When”): the passages the model quoted hold none."
    )
    assert json.loads(engine.db.fetchone("SELECT raw FROM ranklock.answer_log WHERE id = %s", [ans.log_id])["raw"])[
        "citations"
    ] == [{"n": 1, "quote": sentence}]  # the model's own reply is kept in the log


def server_url(server: ChatServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"


def rejected_row(engine: Engine) -> dict[str, Any]:
    row = engine.db.fetchone(
        "SELECT * FROM ranklock.answer_log WHERE collection = %s AND status = 'rejected' ORDER BY id DESC LIMIT 1",
        [COLL],
    )
    assert row is not None
    return row


def test_garbage_reply_is_rejected_with_a_clear_error(engine: Engine, coll: str, server: ChatServer) -> None:
    server.mode = "garbage"
    with pytest.raises(GenerationError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value) == (
        f"the reply of model 'tiny-chat' at {server_url(server)} is not the JSON object the prompt asks for "
        "(no JSON object in it): 'I believe the answer is Lisbon.'; the answer was rejected. Use a model that "
        "follows instructions, or --generator extractive."
    )
    row = rejected_row(engine)
    assert (row["answer_id"], row["answer"], row["error"]) == (None, None, str(e.value))
    # Over HTTP: a generator failure is a bad gateway, with the same message.
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    r = TestClient(create_app(engine)).post(
        "/api/ask", json={"collection": coll, "question": QUESTION, "generator": "openai"}
    )
    assert r.status_code == 502
    assert r.json() == {"error": {"type": "GenerationError", "message": str(e.value)}}


def test_citation_outside_the_chunks_is_rejected_never_shown(engine: Engine, coll: str, server: ChatServer) -> None:
    server.mode = "outside"
    with pytest.raises(CitationError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value) == (
        "the answer cites passage [9] but only passages [1]..[8] were given; the answer was rejected, not shown. "
        "Ask again, or use --generator extractive."
    )
    row = rejected_row(engine)
    assert row["error"] == str(e.value) and json.loads(row["raw"])["answer"] == "Lisbon [9]."
    server.mode = "misquote"
    with pytest.raises(CitationError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value).startswith("citation [1] quotes 'words not there', which is not in passage [1]")


def test_endpoint_errors(engine: Engine, coll: str, server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.mode = "http500"
    with pytest.raises(GenerationError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value) == (
        f'the LLM endpoint {server_url(server)} answered HTTP 500: \'{{"error": "boom"}}\'; '
        "check RANKLOCK_LLM_MODEL and RANKLOCK_LLM_API_KEY, or use --generator extractive."
    )
    server.mode = "not_chat"
    with pytest.raises(GenerationError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value).startswith(f"the LLM endpoint {server_url(server)} did not return an OpenAI chat completion:")
    # Nothing listens on a port that was just closed.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    monkeypatch.setenv("RANKLOCK_LLM_URL", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(GenerationError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value).startswith(f"cannot reach the LLM endpoint http://127.0.0.1:{port}/v1/chat/completions: ")
    assert str(e.value).endswith("check RANKLOCK_LLM_URL and that the server runs, or use --generator extractive.")


def test_missing_configuration(engine: Engine, coll: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANKLOCK_LLM_URL", raising=False)
    monkeypatch.setenv("RANKLOCK_LLM_MODEL", "m")
    with pytest.raises(ConfigError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value) == (
        "the openai generator needs an endpoint and RANKLOCK_LLM_URL is not set; set it to an OpenAI-compatible "
        "API base such as http://localhost:8080/v1, or use --generator extractive."
    )
    monkeypatch.setenv("RANKLOCK_LLM_URL", "localhost:8080")
    with pytest.raises(ConfigError) as e:
        engine.ask(coll, QUESTION, generator="openai")
    assert str(e.value) == "RANKLOCK_LLM_URL 'localhost:8080' is not an http(s) URL; e.g. http://localhost:8080/v1."
