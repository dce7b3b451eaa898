"""Hybrid search on a real embedded PostgreSQL: RRF, ties, determinism, the SQL twin."""

from __future__ import annotations

import numpy as np
import pytest

from ranklock import Document, Engine, NotFound, QueryError
from ranklock.cli.demo import demo_corpus_path
from ranklock.snapshot.build import chunk_table

RRF_K = 60


def shared_weights(ranks: dict[str, int], k: int = RRF_K) -> dict[str, float]:
    """Rule rrf/2 by hand: the n documents tied at competition rank r share positions r..r+n-1,
    each weighing the mean of 1/(k + p) over them (summed in position order, as the SQL does)."""
    blocks: dict[int, int] = {}
    for r in ranks.values():
        blocks[r] = blocks.get(r, 0) + 1
    weight = {}
    for r, n in blocks.items():
        total = 0.0
        for p in range(r, r + n):
            total += 1.0 / (k + p)
        weight[r] = total / n
    return {d: weight[r] for d, r in ranks.items()}


@pytest.fixture(scope="module")
def demo(engine: Engine) -> str:
    engine.ingest("t_search_demo", demo_corpus_path(), replace=True, create={"fields": ["year:int", "tags:keyword[]"]})
    return "t_search_demo"


def test_rrf_scores_are_the_formula(engine: Engine, demo: str) -> None:
    res = engine.search(demo, "approximate nearest neighbour index for vectors", k=10)
    assert len(res.hits) == 10
    lex_ranks = [h.lexical_rank for h in engine.search(demo, res.query, k=40, mode="lexical").hits]
    sem_ranks = [h.semantic_rank for h in engine.search(demo, res.query, k=40, mode="semantic").hits]
    for h in res.hits:
        # A document alone at its rank in a branch weighs 1/(k + rank) there.
        assert h.lexical_rank is None or lex_ranks.count(h.lexical_rank) == 1
        assert h.semantic_rank is None or sem_ranks.count(h.semantic_rank) == 1
        expected = 0.0
        if h.lexical_rank is not None:
            expected += 1 / (RRF_K + h.lexical_rank)
        if h.semantic_rank is not None:
            expected += 1 / (RRF_K + h.semantic_rank)
        assert h.score == pytest.approx(expected, abs=1e-15)
    top = res.hits[0]
    # pg-002 is first in both branches: 1/(60+1) + 1/(60+1).
    assert top.doc_id == "pg-002"
    assert (top.lexical_rank, top.semantic_rank) == (1, 1)
    assert top.score == pytest.approx(1 / (60 + 1) + 1 / (60 + 1))
    # Ranks are 1..n in order of (score desc, doc_id).
    assert [h.rank for h in res.hits] == list(range(1, 11))
    keys = [(-h.score, h.doc_id.encode(), h.chunk) for h in res.hits]
    assert keys == sorted(keys)


def test_hybrid_equals_python_fusion_of_the_two_branches(engine: Engine, demo: str) -> None:
    """The fast path (one SQL statement) against an exhaustive reference, result for result."""
    q = "immune system memory cells"
    depth = 40
    lex = engine.search(demo, q, k=depth, mode="lexical", depth=depth)
    sem = engine.search(demo, q, k=depth, mode="semantic", depth=depth)
    hyb = engine.search(demo, q, k=25, mode="hybrid", depth=depth)
    fused: dict[str, float] = {}
    lex_w = shared_weights({h.doc_id: h.lexical_rank for h in lex.hits if h.lexical_rank is not None})
    sem_w = shared_weights({h.doc_id: h.semantic_rank for h in sem.hits if h.semantic_rank is not None})
    assert len(lex_w) == len(lex.hits) and len(sem_w) == len(sem.hits)
    for d, w in lex_w.items():
        fused[d] = fused.get(d, 0.0) + w
    for d, w in sem_w.items():
        fused[d] = fused.get(d, 0.0) + w
    expected = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0].encode()))
    # Bit for bit: the same float8 additions in the same order.
    assert [(h.doc_id, h.score) for h in hyb.hits] == expected[:25]
    lex_ranks = {h.doc_id: h.lexical_rank for h in lex.hits}
    sem_ranks = {h.doc_id: h.semantic_rank for h in sem.hits}
    for h in hyb.hits:
        assert h.lexical_rank == lex_ranks.get(h.doc_id)
        assert h.semantic_rank == sem_ranks.get(h.doc_id)


def test_semantic_branch_matches_exact_numpy_reference(engine: Engine, demo: str) -> None:
    q = "bread fermentation with wild yeast"
    res = engine.search(demo, q, k=25, mode="semantic", depth=25)
    info = engine.collection(demo)
    rows = engine.db.fetchall(
        __import__("psycopg")
        .sql.SQL("SELECT doc_id, chunk, embedding FROM {} ORDER BY row_id")
        .format(chunk_table(int(info.active_snapshot_id or 0)))
    )
    qv = engine._query_vector(info, q)
    best: dict[str, tuple[float, int]] = {}
    for r in rows:
        v = np.asarray(r["embedding"].to_numpy(), dtype=np.float64)
        dist = 1.0 - float(np.dot(v, qv.astype(np.float64)) / (np.linalg.norm(v) * np.linalg.norm(qv)))
        cur = best.get(r["doc_id"])
        if cur is None or (dist, r["chunk"]) < cur:
            best[r["doc_id"]] = (dist, r["chunk"])
    expected = sorted(best.items(), key=lambda kv: (kv[1][0], kv[0].encode()))
    got = [(h.doc_id, h.semantic_distance) for h in res.hits]
    assert [d for d, _ in got] == [d for d, _ in expected]
    for (_, dist), (_, (edist, _)) in zip(got, expected, strict=True):
        assert dist == pytest.approx(edist, abs=1e-6)


def test_duplicated_texts_tie_break_by_doc_id(engine: Engine, cname: str) -> None:
    text = "Identical body text about lighthouse keepers and their lamps."
    docs = [Document(i, "Same title", text) for i in ("dup-c", "dup-a", "dup-b", "other")]
    docs[3] = Document("other", "Different", "Completely unrelated text about tax law.")
    engine.ingest(cname, docs, replace=True)
    for mode in ("hybrid", "lexical", "semantic"):
        res = engine.search(cname, "lighthouse keepers lamps", k=3, mode=mode)
        assert [h.doc_id for h in res.hits] == ["dup-a", "dup-b", "dup-c"], mode
        # Raw signals are identical, so the branch ranks (competition ranks) and the
        # fused scores are identical too: a tie, ordered by doc_id and reported as one
        # tie group whose inner order carries no meaning.
        assert len({(h.lexical_score, h.semantic_distance, h.lexical_rank, h.semantic_rank) for h in res.hits}) == 1
        assert len({h.score for h in res.hits}) == 1
        assert [h.rank for h in res.hits] == [1, 2, 3]
        assert [h.tie_group for h in res.hits] == [1, 1, 1]


def test_same_search_fifty_times_is_byte_identical(engine: Engine, demo: str) -> None:
    outputs = {engine.search(demo, "how do we evaluate a ranking", k=10).to_json() for _ in range(50)}
    assert len(outputs) == 1


def test_json_has_the_documented_shape(engine: Engine, demo: str) -> None:
    import json

    res = json.loads(engine.search(demo, "pgvector", k=3).to_json())
    for key in ("query", "collection", "mode", "k", "hits", "params", "snapshot"):
        assert key in res
    for key in ("depth", "rrf_k", "ef_search", "embedder_id", "embedder_sha256"):
        assert key in res["params"]
    assert res["params"]["depth"] == 40 and res["params"]["rrf_k"] == 60
    hit = res["hits"][0]
    for key in (
        "rank",
        "doc_id",
        "chunk",
        "score",
        "lexical_rank",
        "lexical_score",
        "semantic_rank",
        "semantic_distance",
        "text",
    ):
        assert key in hit


def test_search_sql_twin_binds_every_value(engine: Engine, demo: str) -> None:
    q = "robert'); DROP TABLE ranklock.collections; --"
    text, params = engine.search_sql(demo, q, k=7)
    assert q not in text
    assert params["q"] == q and params["k"] == 7 and params["depth"] == 40
    assert "%(q)s" in text and "%(qvec)s" in text
    # Every ranking step tie-breaks by doc_id then chunk.
    assert "ORDER BY score DESC, doc_id, chunk" in text
    assert "ORDER BY dist, doc_id, chunk" in text
    assert "ORDER BY f.score DESC, f.doc_id, f.chunk" in text
    # And the injection attempt is inert when run.
    engine.search(demo, q, k=7)
    assert engine.collection(demo).name == demo


@pytest.mark.parametrize(
    ("query", "kwargs", "message"),
    [
        ("", {}, "the query is empty; pass the words or question to search for."),
        ("   ", {}, "the query is empty; pass the words or question to search for."),
        ("x", {"mode": "fuzzy"}, "unknown mode 'fuzzy'; use one of hybrid, lexical, semantic."),
        ("x", {"k": 0}, "k must be an integer from 1 to 10000, got 0."),
    ],
)
def test_bad_queries_have_clear_errors(engine: Engine, demo: str, query: str, kwargs: dict, message: str) -> None:
    with pytest.raises(QueryError) as exc:
        engine.search(demo, query, **kwargs)
    assert str(exc.value) == message


def test_stop_word_only_query(engine: Engine, demo: str) -> None:
    with pytest.raises(QueryError, match="has no searchable words in english"):
        engine.search(demo, "the of and", mode="lexical")
    res = engine.search(demo, "the of and", k=3)
    assert res.warnings[0] == "query has only stop words: the lexical branch was skipped"
    assert all(h.lexical_rank is None for h in res.hits) and len(res.hits) == 3


def test_unknown_collection(engine: Engine) -> None:
    with pytest.raises(NotFound, match=r"no collection named 'nope'; existing: .*Create one with `ranklock ingest"):
        engine.search("nope", "anything")


def test_filter_is_pushed_into_both_branches_and_constrains_both(engine: Engine, demo: str) -> None:
    f = 'year >= 2023 and tags has "database"'
    text, params = engine.search_sql(demo, "index for vectors", k=10, filter=f)
    lex_part = text[text.index("lex_hits AS") : text.index("lex_best AS")]
    sem_part = text[text.index("sem_") : text.index("sem_best AS")]
    for part in (lex_part, sem_part):
        assert '"year" >=' in part and '"tags" @>' in part, part
    assert 2023 in params.values()
    res = engine.search(demo, "index for vectors", k=10, filter=f)
    allowed = {"pg-001", "pg-002", "pg-003", "pg-004"}  # year >= 2023 and tagged database
    assert {h.doc_id for h in res.hits} == allowed
    assert res.matching_count == 4 and res.complete is True
    # Both branches saw only filtered documents: no hit ranked by either branch is outside the filter.
    for mode in ("lexical", "semantic"):
        branch = engine.search(demo, "index for vectors", k=10, mode=mode, filter=f)
        assert {h.doc_id for h in branch.hits} <= allowed
