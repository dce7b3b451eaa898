"""The rerank stage on real PostgreSQL, with a real cross-encoder and a real HTTP reranker.

No cross-encoder weights can be installed here, so the test builds one: a two-layer BERT with
random weights and a tiny vocabulary, saved with ``save_pretrained`` and loaded back through
sentence-transformers' ``CrossEncoder`` by ranklock's own loading code.  The HTTP reranker talks
to a ``/rerank`` server the test starts on a free local port (TEI and Cohere/Jina shapes).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from typer.testing import CliRunner

from fakes import BagOfWordsEmbedder, use_bow_embedder
from live_server import serving
from ranklock import AsyncEngine, Document, Engine, QueryError
from ranklock.cli import app
from ranklock.errors import ConfigError, RerankError
from ranklock.rerank import RerankerInfo, resolve_reranker
from ranklock.rerank.cross_encoder import CrossEncoderReranker
from ranklock.rerank.http import HttpReranker
from ranklock.search.replay import RerankedReplay
from ranklock.search.rerank import rerank_result

COLL = "t_rerank_notes"
NOTES = [
    ("r01", "Halyard is hosted on Hetzner since the spring."),
    ("r02", "Halyard moved to Linode after the outage."),
    ("r03", "Lunch with Ana Ruiz; she is allergic to hazelnuts."),
    ("r04", "The Halyard dashboards were reviewed with Rui."),
    ("r05", "Walked along the river; the water was cold."),
    ("r06", "Halyard budget approved by the board."),
]


class LengthReranker:
    """A deterministic reranker for the stage's own rules: shorter texts score higher, in steps of ten characters
    (so some texts tie and the doc-id tie-break shows)."""

    name = "length"

    def info(self) -> RerankerInfo:
        return RerankerInfo(name=self.name, model="length/10", weights_sha256=None, params={})

    def score(self, query: str, texts: Sequence[str]) -> list[float]:  # noqa: ARG002 (the Reranker protocol)
        return [-float(len(t) // 10) for t in texts]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved two-layer BERT cross-encoder with random (seeded) weights: the real files CrossEncoder loads."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *alphabet, *(f"##{c}" for c in alphabet)]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"))
    torch.manual_seed(26)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    engine.create_collection(COLL, embedder=use_bow_embedder(engine))
    engine.ingest(COLL, [Document(i, "", text, {}) for i, text in NOTES], replace=True)
    return COLL


@pytest.fixture
def reranking(engine: Engine) -> Iterator[Engine]:
    """The session engine with the length reranker set (restored after the test)."""
    before = engine._reranker.replace(LengthReranker())
    yield engine
    engine._reranker.replace(before)


# -- the stage ------------------------------------------------------------------------------------


def test_rerank_orders_by_score_then_doc_id_and_keeps_the_rest(reranking: Engine, coll: str) -> None:
    fused = reranking.search(coll, "Halyard hosting", k=6)
    res = reranking.search(coll, "Halyard hosting", k=5, rerank=4)
    head = fused.hits[:4]
    expected = sorted(head, key=lambda h: (len(h.text) // 10, h.doc_id))  # score -len//10 high first, then doc id
    assert [h.doc_id for h in res.hits] == [h.doc_id for h in expected] + [fused.hits[4].doc_id]
    assert [h.rank for h in res.hits] == [1, 2, 3, 4, 5]
    # Each hit keeps its fused score; the rerank record says what reranked it and how.
    assert [h.score for h in res.hits[:4]] == [h.score for h in expected]
    rec = res.params["rerank"]
    assert rec["reranker"] == {"name": "length", "model": "length/10", "weights_sha256": None, "params": {}}
    assert rec["n"] == 4
    assert rec["order"] == [[h.doc_id, h.chunk, h.rank, -float(len(h.text) // 10)] for h in expected]


def test_search_without_rerank_is_unchanged(reranking: Engine, coll: str) -> None:
    a = reranking.search(coll, "Halyard hosting", k=3)
    reranking.search(coll, "Halyard hosting", k=3, rerank=6)
    b = reranking.search(coll, "Halyard hosting", k=3, rerank=None)
    assert a.to_json() == b.to_json()
    assert "rerank" not in a.params


def test_reranked_search_is_logged_and_replays_by_layer(reranking: Engine, coll: str) -> None:
    res = reranking.search(coll, "Halyard hosting", k=3, rerank=5)
    row = reranking.db.fetchone("SELECT request, rerank FROM ranklock.query_log WHERE id = %s", [res.query_id])
    # Logged once, as served: the request as asked (the fusion ran for max(k, N)), its stage beside it.
    assert row is not None and (row["request"]["k"], row["request"]["rerank"]) == (3, 5)
    assert row["rerank"]["order"] == res.params["rerank"]["order"] and row["rerank"]["k"] == 3
    assert row["rerank"]["digest"] == hashlib.sha256(res.to_json().encode()).hexdigest()
    rep = reranking.replay(res.query_id)
    assert rep.identical and rep.rerank["identical"]
    assert async_replay(reranking, res.query_id) == (True, True)  # the async engine replays both layers too
    # A changed rerank layer is reported apart from the fusion, which still replays identically.
    reranking.db.execute(
        "UPDATE ranklock.query_log SET rerank = jsonb_set(rerank, '{order,0,3}', '99') WHERE id = %s",
        [res.query_id],
    )
    rep = reranking.replay(res.query_id)
    assert rep.report.identical and not rep.identical
    assert [d["where"] for d in rep.differences] == ["rerank:order"]
    assert async_replay(reranking, res.query_id) == (False, True)


def async_replay(eng: Engine, query_id: int) -> tuple[bool, bool]:
    """``AsyncEngine.replay`` of ``query_id``: (identical, its search layer identical)."""

    async def main() -> tuple[bool, bool]:
        async with AsyncEngine.over(eng) as aeng:
            rep = await aeng.replay(query_id)
        assert isinstance(rep, RerankedReplay)
        return rep.identical, rep.report.identical

    return asyncio.run(main())


def test_bad_rerank_values(reranking: Engine, coll: str) -> None:
    for bad in (0, -1, True, "4", 10_001):
        with pytest.raises(QueryError) as e:
            reranking.search(coll, "Halyard", rerank=bad)
        assert str(e.value) == (
            f"rerank must be an integer from 1 to 10000 (fused hits to rerank), got {bad!r}; e.g. 40."
        )


@pytest.mark.usefixtures("engine", "coll")
def test_no_reranker_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANKLOCK_RERANKER", raising=False)
    with pytest.raises(ConfigError) as e:
        resolve_reranker(None)
    assert str(e.value) == (
        "--rerank needs a reranker and none is configured; set RANKLOCK_RERANKER (or pass --reranker) to a saved "
        "CrossEncoder directory or to a /rerank endpoint URL such as http://localhost:8080."
    )
    with pytest.raises(ConfigError) as e:
        resolve_reranker("/nonexistent/model")
    assert str(e.value).startswith("reranker model directory /nonexistent/model does not exist;")


def test_reranked_ask_is_pinned_in_the_answer_and_its_log(reranking: Engine, coll: str) -> None:
    ans = reranking.ask(coll, "Where is Halyard hosted?", chunks=3, rerank=6)
    d = json.loads(ans.to_json())
    assert d["rerank"]["reranker"]["name"] == "length" and d["rerank"]["n"] == 6
    assert [c["doc_id"] for c in d["chunks"]] == [o[0] for o in d["rerank"]["order"][:3]]
    row = reranking.db.fetchone("SELECT request, rerank FROM ranklock.answer_log WHERE id = %s", [ans.log_id])
    assert row is not None and row["request"]["rerank"] == 6 and row["rerank"] == d["rerank"]
    rep = reranking.replay_answer(ans.answer_id)
    assert rep.identical and rep.layers["rerank"]["identical"]
    assert rep.layers["rerank"]["logged"] == d["rerank"]


# -- the cross-encoder ------------------------------------------------------------------------------


def test_cross_encoder_loads_a_saved_model_and_scores_deterministically(tiny_cross_encoder: Path) -> None:
    r = CrossEncoderReranker(tiny_cross_encoder)
    info = r.info()
    assert info.name == "cross-encoder"
    assert info.weights_sha256 == hashlib.sha256((tiny_cross_encoder / "model.safetensors").read_bytes()).hexdigest()
    assert info.params == {"batch_size": 16, "max_length": 512, "device": "cpu"}
    texts = [text for _i, text in NOTES] * 4  # 24 texts: two batches
    first = r.score("where is halyard hosted", texts)
    assert len(first) == 24 and all(isinstance(s, float) for s in first)
    assert first[:6] == first[6:12]  # the same pair scores the same wherever it sits in the batch order
    again = CrossEncoderReranker(tiny_cross_encoder).score("where is halyard hosted", texts)
    assert again == first  # a fresh load gives the same scores, bit for bit
    assert r.score("q", []) == []


@pytest.mark.usefixtures("engine")
def test_cross_encoder_through_the_cli(
    coll: str, tiny_cross_encoder: Path, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    bow = BagOfWordsEmbedder()
    monkeypatch.setattr(ranklock.embed.loaded, "resolve_embedder", lambda spec: bow if spec == bow.id else real(spec))
    db = ["--dsn", os.environ["RANKLOCK_TEST_DSN"]] if os.environ.get("RANKLOCK_TEST_DSN") else ["--home", str(rl_home)]
    args = ["search", coll, "Halyard hosting", "-k", "3", "--rerank", "5", "--reranker", str(tiny_cross_encoder)]
    r = CliRunner().invoke(app, [*args, "--json", "--timings", *db])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    sha = hashlib.sha256((tiny_cross_encoder / "model.safetensors").read_bytes()).hexdigest()
    assert out["params"]["rerank"]["reranker"]["weights_sha256"] == sha
    assert [h["rank"] for h in out["hits"]] == [1, 2, 3]
    r = CliRunner().invoke(app, ["replay", str(out["query_id"]), "--reranker", str(tiny_cross_encoder), *db])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        app, ["search", coll, "Halyard", "--rerank", "0", "--reranker", str(tiny_cross_encoder), *db]
    )
    assert r.exit_code == 2 and "rerank must be an integer from 1 to 10000" in r.stderr
    r = CliRunner().invoke(
        app,
        [
            "ask",
            coll,
            "Where is Halyard hosted?",
            "--rerank",
            "4",
            "--json",
            *db,
            "--reranker",
            str(tiny_cross_encoder),
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rerank"]["reranker"]["weights_sha256"] == sha


# -- the HTTP reranker -------------------------------------------------------------------------------


def _overlap(query: str, text: str) -> float:
    q = set(query.lower().split())
    return float(len(q & set(text.lower().replace(";", " ").replace(".", " ").split())))


def _rerank_app() -> FastAPI:
    """A /rerank server of both shapes, scoring by shared words; /bad/* replies with broken rankings."""
    api = FastAPI()

    @api.get("/info")
    def info() -> dict[str, str]:
        return {"model_id": "test/overlap", "model_sha": "abc123"}

    @api.post("/rerank")
    async def tei(req: Request) -> Response:
        body = await req.json()
        if set(body) != {"query", "texts", "raw_scores", "truncate"}:
            return JSONResponse({"error": f"unexpected keys {sorted(body)}"}, status_code=422)
        scores = [{"index": i, "score": _overlap(body["query"], t)} for i, t in enumerate(body["texts"])]
        return JSONResponse(sorted(scores, key=lambda s: -s["score"]))

    @api.post("/v1/rerank")
    async def cohere(req: Request) -> Response:
        body = await req.json()
        if body.get("model") != "overlap-v1" or "documents" not in body:
            return JSONResponse({"message": "model not found"}, status_code=404)
        results = [{"index": i, "relevance_score": _overlap(body["query"], t)} for i, t in enumerate(body["documents"])]
        return JSONResponse({"id": "x", "results": results[::-1]})

    @api.post("/bad/text/rerank")
    def text() -> Response:
        return PlainTextResponse("overloaded, try later")

    @api.post("/bad/short/rerank")
    def short() -> Response:
        return JSONResponse([{"index": 0, "score": 1.0}])

    return api


@pytest.fixture(scope="module")
def rerank_server() -> Iterator[str]:
    with serving(_rerank_app(), "the rerank server") as url:
        yield url


def test_http_reranker_tei_and_cohere_shapes(rerank_server: str) -> None:
    texts = ["halyard hosted on hetzner", "lunch with ana", "halyard"]
    tei = HttpReranker(rerank_server)
    assert tei.score("halyard hosted", texts) == [2.0, 0.0, 1.0]
    assert tei.info() == RerankerInfo(
        name="http",
        model="test/overlap",
        weights_sha256=None,
        params={"url": f"{rerank_server}/rerank", "api": "tei", "revision": "abc123"},
    )
    cohere = HttpReranker(f"{rerank_server}/v1", model="overlap-v1", api="cohere")
    assert cohere.score("halyard hosted", texts) == [2.0, 0.0, 1.0]
    assert cohere.body("q", ["a"]) == {
        "model": "overlap-v1",
        "query": "q",
        "documents": ["a"],
        "top_n": 1,
        "return_documents": False,
    }


def test_http_reranker_failures_name_the_reply(rerank_server: str) -> None:
    with pytest.raises(RerankError) as e:
        HttpReranker(f"{rerank_server}/bad/text").score("q", ["a", "b"])
    assert str(e.value) == (
        f"the reranker at {rerank_server}/bad/text/rerank did not return a ranking (not JSON): "
        "'overloaded, try later'; check that RANKLOCK_RERANKER points at a /rerank endpoint and "
        "RANKLOCK_RERANK_API (tei or cohere) matches it."
    )
    with pytest.raises(RerankError) as e:
        HttpReranker(f"{rerank_server}/bad/short").score("q", ["a", "b"])
    assert "(1 of 2 candidates have no score (first: index 1))" in str(e.value)
    with pytest.raises(RerankError) as e:
        HttpReranker(f"{rerank_server}/v1", model="nope", api="cohere").score("q", ["a"])
    assert str(e.value).startswith(f"the reranker at {rerank_server}/v1/rerank answered HTTP 404:")
    with pytest.raises(ConfigError) as c:
        HttpReranker(rerank_server, api="cohere")
    assert str(c.value).startswith("a cohere-shaped reranker needs a model name")


def test_http_reranker_through_the_engine(engine: Engine, coll: str, rerank_server: str) -> None:
    eng = Engine(dsn=os.environ.get("RANKLOCK_TEST_DSN") or None, home=engine.settings.home, reranker=rerank_server)
    for _e in engine.embedders.loaded():
        eng.embedders.register(_e)
    try:
        res = eng.search(coll, "lunch with ana ruiz", k=2, rerank=6)
        assert res.hits[0].doc_id == "r03"
        assert res.params["rerank"]["reranker"]["model"] == "test/overlap"
        assert eng.replay(res.query_id).identical
    finally:
        eng.close()


def test_rerank_result_refuses_a_reranker_that_drops_candidates(engine: Engine, coll: str) -> None:
    class Short(LengthReranker):
        def score(self, query: str, texts: Sequence[str]) -> list[float]:  # noqa: ARG002 (the Reranker protocol)
            return [1.0]

    res = engine.search(coll, "Halyard", k=3)
    with pytest.raises(QueryError) as e:
        rerank_result(res, Short(), 3, 3)
    assert str(e.value) == "the reranker returned 1 scores for 3 hits; it must score each once."


def test_the_async_engine_reranks_and_asks_as_the_sync_one(reranking: Engine, coll: str) -> None:
    """Issue 37: AsyncEngine.search takes rerank, AsyncEngine.ask takes mode and rerank, as Engine's do."""
    want = json.loads(reranking.search(coll, "Halyard hosted", k=3, rerank=6).to_json())
    want_ask = json.loads(reranking.ask(coll, "Where is Halyard hosted?", chunks=3, rerank=6, mode="lexical").to_json())

    async def main() -> tuple[dict[str, Any], dict[str, Any], Any]:
        async with AsyncEngine.over(reranking) as aeng:
            res = await aeng.search(coll, "Halyard hosted", k=3, rerank=6)
            ans = await aeng.ask(coll, "Where is Halyard hosted?", chunks=3, rerank=6, mode="lexical")
        return json.loads(res.to_json()), json.loads(ans.to_json()), ans.log_id

    got, got_ask, log_id = asyncio.run(main())
    assert got == want
    # Not vacuous: the rerank changed the order of the plain search's hits.
    plain = json.loads(reranking.search(coll, "Halyard hosted", k=3).to_json())
    assert [h["doc_id"] for h in got["hits"]] != [h["doc_id"] for h in plain["hits"]]
    assert got_ask == want_ask
    row = reranking.db.fetchone("SELECT request FROM ranklock.answer_log WHERE id = %s", [log_id])
    assert row is not None and (row["request"]["mode"], row["request"]["rerank"]) == ("lexical", 6)
    assert got_ask["rerank"]["n"] == 6 and got_ask["rerank"]["reranker"]["name"] == "length"
