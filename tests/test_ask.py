"""Ask on real PostgreSQL: retrieval is exactly search, citations stay within the chunks given,
the extractive generator is deterministic and abstains by its stated rule, and the answer log replays."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from fakes import BagOfWordsEmbedder, use_bow_embedder
from ranklock import Document, Engine, QueryError
from ranklock.ask.model import ABSTAIN, Answer
from ranklock.ask.run import DEPTH, RRF_K
from ranklock.cli import app
from ranklock.errors import ConfigError

COLL = "t_ask_journal"

# A small journal: dated notes (in force from their date), people, three languages.
NOTES = [
    (
        "n01",
        "2024-03-04",
        "en",
        "Met Oksana Vrell about project Halcyon. We agreed to ship the XJ-900 firmware on April 12. "
        "Dr. Pereira reviewed the budget.",
    ),
    ("n02", "2024-05-10", "en", "Lunch with Tobiah Quist at the harbour. He recommended the book Salt Roads."),
    ("n03", "2025-01-20", "en", "The board cancelled Halcyon. Oksana Vrell moved to the Lisbon office."),
    (
        "n04",
        "2023-11-02",
        "pt",
        "A Dra. Inês Faria aprovou o orçamento do projeto Halcyon. O Sr. Costa ficou contente, p. ex. Ontem sorriu.",
    ),
    ("n05", "2024-08-15", "es", "La Dra. Ruiz visitó Valparaíso con el Sr. Peña. Compramos un telescopio."),
    ("n06", "2024-02-01", "en", "Went running along the river in the morning. The water was cold."),
    ("n07", "2024-02-02", "en", "Bought apples, bread and coffee. Cooked soup for dinner."),
    ("n08", "2024-02-03", "en", "Read two chapters of a novel before sleep."),
    ("n09", "2024-06-11", "en", "Quarterly review went fine. Nobody mentioned the office move."),
    ("n10", "2023-09-09", "pt", "Fui à praia com a família. O mar estava calmo."),
]

SHAPE = [
    "question",
    "collection",
    "answer",
    "citations",
    "chunks",
    "abstained",
    "generator",
    "prompt_sha256",
    "snapshot",
    "answer_id",
]


def journal() -> list[Document]:
    return [
        Document(i, "", body, {"lang": lang, "date": date, "effective_from": f"{date}T00:00:00Z"})
        for i, date, lang, body in NOTES
    ]


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    """One collection for the module: these tests only read it (and append to the logs)."""
    emb = use_bow_embedder(engine)
    engine.create_collection(COLL, fields=["lang:keyword", "date:date"], embedder=emb)
    engine.ingest(COLL, journal(), replace=True)
    return COLL


def assert_grounded(ans: Answer) -> None:
    """Every citation refers to one of the numbered chunks and quotes it verbatim."""
    assert [c.n for c in ans.chunks] == list(range(1, len(ans.chunks) + 1))
    for c in ans.citations:
        assert 1 <= c.n <= len(ans.chunks)
        chunk = ans.chunks[c.n - 1]
        assert (c.doc_id, c.chunk) == (chunk.doc_id, chunk.chunk)
        assert c.quote in chunk.text


QUESTIONS = [
    "When will the XJ-900 firmware ship?",
    "Where did Oksana Vrell move?",
    "Who recommended Salt Roads?",
    "Quem aprovou o orçamento do Halcyon?",
    "¿Qué compramos en Valparaíso?",
    "What did I cook for dinner?",
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_retrieval_is_search_and_citations_stay_within_the_chunks(engine: Engine, coll: str, question: str) -> None:
    ans = engine.ask(coll, question)
    res = engine.search(coll, question, k=8, mode="hybrid", depth=DEPTH, rrf_k=RRF_K)
    assert [(c.doc_id, c.chunk, c.rank, c.score, c.text) for c in ans.chunks] == [
        (h.doc_id, h.chunk, h.rank, h.score, h.text) for h in res.hits
    ]
    assert len(ans.chunks) == min(8, len(NOTES))
    assert not ans.abstained and ans.citations
    assert_grounded(ans)


def test_extractive_answer_is_the_matching_sentence(engine: Engine, coll: str) -> None:
    ans = engine.ask(coll, "When will the XJ-900 firmware ship?")
    n = next(c.n for c in ans.chunks if c.doc_id == "n01")
    assert ans.answer == f"We agreed to ship the XJ-900 firmware on April 12. [{n}]"
    assert [(c.n, c.doc_id, c.quote) for c in ans.citations] == [
        (n, "n01", "We agreed to ship the XJ-900 firmware on April 12.")
    ]
    pt = engine.ask(coll, "Quem aprovou o orçamento do Halcyon?")
    # "Dra." does not end a sentence: the extractive generator cuts with the union of the en/pt/es rules.
    assert pt.citations[0].quote == "A Dra. Inês Faria aprovou o orçamento do projeto Halcyon."


def test_same_ask_twice_gives_byte_identical_json(engine: Engine, coll: str) -> None:
    a = engine.ask(coll, "Where did Oksana Vrell move?")
    b = engine.ask(coll, "Where did Oksana Vrell move?")
    assert a.to_json() == b.to_json()
    assert a.answer_id == b.answer_id
    assert a.log_id is not None and b.log_id is not None and a.log_id != b.log_id
    assert a.query_id is not None and a.query_id != b.query_id


def test_json_has_exactly_the_issue_shape(engine: Engine, coll: str) -> None:
    ans = engine.ask(coll, "Who recommended Salt Roads?")
    d = json.loads(ans.to_json())
    assert list(d) == SHAPE
    assert list(d["citations"][0]) == ["n", "doc_id", "chunk", "quote"]
    assert list(d["chunks"][0]) == ["n", "doc_id", "chunk", "rank", "score", "text", "date"]
    # Each passage carries its note's date (the collection's date field), for the present-tense rule.
    assert {c["doc_id"]: c["date"] for c in d["chunks"]}["n02"] == "2024-05-10"
    assert "rerank" not in d  # only a reranked answer has the key
    assert list(d["generator"]) == ["name", "model", "checksum", "params"]
    assert list(d["snapshot"]) == ["id", "manifest_hash"]
    assert d["generator"]["name"] == "extractive"
    snap = engine.snapshot_info(coll)
    assert d["snapshot"] == {"id": snap.id, "manifest_hash": snap.manifest_hash}


def test_abstains_when_nothing_relevant_was_retrieved(engine: Engine, coll: str) -> None:
    # The name the question gives (a key term) is in no note: no chunk qualifies, and the abstention says so.
    ans = engine.ask(coll, "What is the name of Bartholomew's cat?")
    assert ans.abstained is True
    # The abstention names what was searched: the collection, whose records are no files (documents).
    assert ans.answer == "The documents in “t_ask_journal” do not say. None of the 8 passages mentions “Bartholomew”."
    assert ans.citations == ()
    assert len(ans.chunks) == 8  # retrieval still ran and is recorded


def test_abstains_when_too_few_question_terms_match(engine: Engine, coll: str) -> None:
    # Vrell's notes say where she moved, nothing of a telescope or a price: the span naming her is not close
    # enough to the question to answer it, and the abstention says what it looked for.
    ans = engine.ask(coll, "What price did Vrell pay for the telescope?")
    assert ans.abstained is True
    assert ans.answer.startswith(
        "The documents in “t_ask_journal” do not say. Looked for an amount of money about “Vrell”, “telescope” "
        "(the question asks "
    )
    # The older rules, still replayable, abstain with the sentence alone.
    assert engine.ask(coll, "What price did Vrell pay for the telescope?", generator="extractive-v3").answer == ABSTAIN


def test_filter_restricts_retrieval_and_citations(engine: Engine, coll: str) -> None:
    ans = engine.ask(coll, "Halcyon orçamento", filter='lang = "pt"')
    assert {c.doc_id for c in ans.chunks} == {"n04", "n10"}
    assert {c.doc_id for c in ans.citations} == {"n04"}
    assert_grounded(ans)


def test_as_of_restricts_retrieval_and_citations(engine: Engine, coll: str) -> None:
    now = engine.ask(coll, "Where did Oksana Vrell move?")
    assert "n03" in {c.doc_id for c in now.citations}
    then = engine.ask(coll, "Where did Oksana Vrell move?", as_of="2024-06-01T00:00:00Z")
    in_force = {i for i, date, *_ in NOTES if date <= "2024-06-01"}
    assert {c.doc_id for c in then.chunks} <= in_force
    assert "n03" not in {c.doc_id for c in then.chunks}
    assert {c.doc_id for c in then.citations} <= in_force
    assert_grounded(then)


def test_chunks_option(engine: Engine, coll: str) -> None:
    ans = engine.ask(coll, "Where did Oksana Vrell move?", chunks=3)
    assert [c.n for c in ans.chunks] == [1, 2, 3]
    assert_grounded(ans)
    for bad in (0, 41):
        with pytest.raises(QueryError) as e:
            engine.ask(coll, "Where did Oksana Vrell move?", chunks=bad)
        assert str(e.value) == f"chunks must be an integer from 1 to 40, got {bad}; the default is 8."


def test_bad_inputs(engine: Engine, coll: str) -> None:
    with pytest.raises(QueryError) as e:
        engine.ask(coll, "  ")
    assert str(e.value) == "the question is empty; pass the question to answer."
    with pytest.raises(ConfigError) as c:
        engine.ask(coll, "who?", generator="gpt")
    assert (
        str(c.value)
        == "unknown generator 'gpt'; use one of extractive, extractive-v5, extractive-v4, extractive-v3, extractive-v2, local, openai."
    )


def test_answer_log_row(engine: Engine, coll: str) -> None:
    ans = engine.ask(coll, "Who recommended Salt Roads?")
    row = engine.db.fetchone("SELECT * FROM ranklock.answer_log WHERE id = %s", [ans.log_id])
    assert row is not None
    assert row["answer_id"] == ans.answer_id and row["status"] == "answered"
    assert row["answer"] == ans.to_json()
    assert row["query_id"] == ans.query_id
    assert row["prompt_sha256"] == ans.prompt_sha256 and row["prompt_version"] == "ask-v2"
    assert row["generator"] == ans.generator.to_dict()
    assert [r[:3] for r in row["chunks"]] == [[c.n, c.doc_id, c.chunk] for c in ans.chunks]
    logged = engine.db.fetchone("SELECT request FROM ranklock.query_log WHERE id = %s", [ans.query_id])
    assert logged is not None and logged["request"]["params"] == {"depth": 40, "rrf_k": 60}


def test_nothing_is_logged_when_logging_is_off(engine: Engine, coll: str, rl_home: object) -> None:
    import os

    quiet = Engine(dsn=os.environ.get("RANKLOCK_TEST_DSN") or None, home=str(rl_home), log_queries=False)
    try:
        for _e in engine.embedders.loaded():
            quiet.embedders.register(_e)
        before = engine.db.fetchone("SELECT count(*) AS n FROM ranklock.answer_log")
        ans = quiet.ask(coll, "Who recommended Salt Roads?")
        after = engine.db.fetchone("SELECT count(*) AS n FROM ranklock.answer_log")
    finally:
        quiet.close()
    assert (ans.log_id, ans.query_id) == (None, None)
    assert before == after
    assert ans.to_json() == engine.ask(coll, "Who recommended Salt Roads?").to_json()  # logging changes no byte


# -- replay ------------------------------------------------------------------------------


def test_replay_is_identical(engine: Engine, coll: str) -> None:
    ans = engine.ask(coll, "When will the XJ-900 firmware ship?", filter='lang = "en"')
    rep = engine.replay_answer(ans.answer_id)
    assert rep.identical
    assert {k: v["identical"] for k, v in rep.layers.items()} == {
        "retrieval": True,
        "rerank": True,
        "prompt": True,
        "generator": True,
        "answer": True,
    }
    assert rep.layers["rerank"] == {"identical": True, "logged": None, "replayed": None}
    assert rep.layers["answer"]["replayed"] == ans.to_json()


def test_an_answer_given_under_an_older_rule_replays_with_that_rule(engine: Engine, coll: str) -> None:
    for older in ("extractive-v4", "extractive-v3"):
        ans = engine.ask(coll, "When will the XJ-900 firmware ship?", filter='lang = "en"', generator=older)
        rep = engine.replay_answer(ans.answer_id)
        assert rep.identical and rep.layers["generator"]["replayed"]["model"] == older


def test_replay_reports_the_layer_that_changed(engine: Engine, coll: str) -> None:
    ans = engine.ask(coll, "Who recommended Salt Roads?", chunks=4)
    # Pretend the logged answer was different: only the answer layer may differ.
    engine.db.execute(
        "UPDATE ranklock.answer_log SET answer = replace(answer, 'Tobiah', 'Tobias') WHERE id = %s", [ans.log_id]
    )
    rep = engine.replay_answer(ans.answer_id)
    assert not rep.identical
    assert {k: v["identical"] for k, v in rep.layers.items()} == {
        "retrieval": True,
        "rerank": True,
        "prompt": True,
        "generator": True,
        "answer": False,
    }
    # Pretend retrieval had returned another order.
    engine.db.execute(
        "UPDATE ranklock.answer_log SET chunks = jsonb_build_array(chunks->1, chunks->0, chunks->2, chunks->3) "
        "WHERE id = %s",
        [ans.log_id],
    )
    rep = engine.replay_answer(ans.answer_id)
    assert rep.layers["retrieval"]["identical"] is False
    assert rep.layers["prompt"]["identical"] is True


def test_replay_reports_a_changed_prompt_template(engine: Engine, coll: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ans = engine.ask(coll, "Who recommended Salt Roads?", chunks=5)
    import ranklock.ask.prompt as prompt

    monkeypatch.setattr(prompt, "TEMPLATE_VERSION", "ask-v0-test")
    rep = engine.replay_answer(ans.answer_id)
    assert {k: v["identical"] for k, v in rep.layers.items()} == {
        "retrieval": True,
        "rerank": True,
        "prompt": False,
        "generator": True,
        "answer": False,  # the answer records its prompt hash
    }


def test_replay_uses_the_logged_retrieval_mode(engine: Engine, coll: str) -> None:
    # eval --answers runs Ask over lexical-only retrieval by handing in another search; replay follows the log.

    from ranklock.ask.run import ask

    def lexical(*args: Any, **params: Any) -> Any:
        return engine.search(*args, **{**params, "mode": "lexical"})

    info = engine.collection(coll)
    ans = ask(
        engine.db, info, lexical, "Where did Oksana Vrell move?", embedder=lambda: engine.embedder_for(info.embedder_id)
    )
    row = engine.db.fetchone("SELECT request FROM ranklock.answer_log WHERE id = %s", [ans.log_id])
    assert row is not None and row["request"]["mode"] == "lexical"
    assert [c.doc_id for c in ans.chunks] == [
        h.doc_id for h in engine.search(coll, "Where did Oksana Vrell move?", k=8, mode="lexical").hits
    ]
    assert engine.replay_answer(ans.answer_id).identical


@pytest.mark.usefixtures("coll")
def test_replay_errors(engine: Engine) -> None:
    from ranklock import NotFound

    with pytest.raises(QueryError) as q:
        engine.replay_answer("xyz")
    assert str(q.value) == "answer id 'xyz' is not 16 lowercase hex digits; copy answer_id from `ranklock ask --json`."
    with pytest.raises(NotFound) as n:
        engine.replay_answer("0" * 16)
    assert str(n.value).startswith("no logged answer with id 0000000000000000;")


# -- CLI ---------------------------------------------------------------------------------


@pytest.fixture
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its own Engine: let it resolve the test's bag-of-words embedder by id."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    bow = BagOfWordsEmbedder()
    monkeypatch.setattr(ranklock.embed.loaded, "resolve_embedder", lambda spec: bow if spec == bow.id else real(spec))


@pytest.mark.usefixtures("cli_hash_embedder")
def test_cli_ask_json_and_replay(engine: Engine, coll: str, rl_home: object) -> None:
    runner = CliRunner()
    home = ["--home", str(rl_home)]
    r = runner.invoke(app, ["ask", coll, "Where did Oksana Vrell move?", "--json", *home])
    assert r.exit_code == 0, r.output
    expected = engine.ask(coll, "Where did Oksana Vrell move?")
    assert r.stdout == expected.to_json() + "\n"
    r = runner.invoke(app, ["replay", "--answer", expected.answer_id, *home])
    assert r.exit_code == 0, r.output
    assert f"answer {expected.answer_id}: identical" in r.stdout
    engine.db.execute("UPDATE ranklock.answer_log SET prompt_sha256 = 'x' WHERE answer_id = %s", [expected.answer_id])
    r = runner.invoke(app, ["replay", "--answer", expected.answer_id, "--json", *home])
    assert r.exit_code == 1
    layers = json.loads(r.stdout)["layers"]
    assert [k for k, v in layers.items() if not v["identical"]] == ["prompt"]


def test_cli_ask_errors_exit_2(coll: str, rl_home: object) -> None:
    r = CliRunner().invoke(app, ["ask", coll, "who?", "--chunks", "0", "--home", str(rl_home)])
    assert r.exit_code == 2
    assert "chunks must be an integer from 1 to 40, got 0" in r.stderr
    assert "Traceback" not in r.output


# -- HTTP --------------------------------------------------------------------------------


def test_http_ask_matches_the_engine_byte_for_byte(engine: Engine, coll: str) -> None:
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    client = TestClient(create_app(engine))
    r = client.post("/api/ask", json={"collection": coll, "question": "Who recommended Salt Roads?", "chunks": 5})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.text == engine.ask(coll, "Who recommended Salt Roads?", chunks=5).to_json()
    r = client.post("/api/ask", json={"collection": "missing", "question": "who?"})
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound"
    r = client.post("/api/ask", json={"collection": coll, "question": "who?", "generator": "gpt"})
    assert r.status_code == 400
    assert r.json()["error"] == {
        "type": "ConfigError",
        "message": "unknown generator 'gpt'; use one of extractive, extractive-v5, extractive-v4, extractive-v3, extractive-v2, local, openai.",
    }
    # The request model is strict: an unknown key or a loosely typed value is refused, not ignored.
    for bad in (
        {"collection": coll, "question": "who?", "k": 3},
        {"collection": coll, "question": "who?", "chunks": "3"},
    ):
        r = client.post("/api/ask", json=bad)
        assert 400 <= r.status_code < 500
    r = client.post("/api/ask", json={"collection": coll, "question": "who?", "chunks": 99})
    assert 400 <= r.status_code < 500


def test_page_has_an_ask_box(engine: Engine) -> None:
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    page = TestClient(create_app(engine)).get("/").text
    assert 'id="ask"' in page and "/api/ask" in page
    assert "<script src=" not in page and "https://" not in page  # no CDN, no build step


def test_span_vectors_are_cached_by_text_hash(engine: Engine, coll: str) -> None:
    """The first ask embeds its spans once, into the embedding cache; the same ask again loads no model."""
    from ranklock.ask.run import ask

    info = engine.collection(coll)
    question = "Who recommended Salt Roads?"
    first = ask(engine.db, info, engine.search, question, embedder=lambda: engine.embedder_for(info.embedder_id))

    def no_model() -> Any:
        raise AssertionError("a cached ask asked for the embedder")

    again = ask(engine.db, info, engine.search, question, embedder=no_model)
    assert again.to_json() == first.to_json()
    rows = engine.db.fetchall(
        "SELECT text_sha256 FROM ranklock.embedding_cache WHERE embedder_sha256 = %s", [info.embedder_sha256]
    )
    import hashlib

    cached = {r["text_sha256"] for r in rows}
    # Every quoted span's vector is in the cache, keyed like a chunk's: sha256 of the text.
    assert {hashlib.sha256(c.quote.encode()).hexdigest() for c in first.citations} <= cached


def test_an_undated_collection_dates_notes_by_effective_from(engine: Engine, cname: str) -> None:
    engine.create_collection(cname, embedder=use_bow_embedder(engine))
    engine.ingest(
        cname,
        [
            Document("a", "", "Halyard is hosted on Hetzner.", {"effective_from": "2023-05-01T00:00:00Z"}),
            Document("b", "", "Reversed: Halyard is hosted on Linode.", {"effective_from": "2024-02-03T00:00:00Z"}),
            Document("c", "", "Lunch by the river.", {}),
        ],
        replace=True,
    )
    ans = engine.ask(cname, "Where is Halyard hosted now?")
    dates = {c.doc_id: c.date for c in ans.chunks}
    assert dates["a"] == "2023-05-01T00:00:00Z" and dates["c"] is None
    assert ans.answer.endswith("(the latest note: b, 2024-02-03T00:00:00Z)")
