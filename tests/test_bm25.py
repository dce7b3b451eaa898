"""BM25 in PostgreSQL: the fast path against an exhaustive Python reference, result for result."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from lexical_helpers import ingest_bucketed, lexical, reference_bm25, use_hash_embedder
from ranklock import Document, Engine, QueryError, SnapshotError
from ranklock.search.bm25 import costs as bm25_module
from ranklock.settings import ChunkerParams
from ranklock.snapshot.lexical_stats import build_lexical_stats

VOCAB = [
    "alpha", "bravo", "canyon", "delta", "ember", "falcon", "glacier", "harbor", "island", "jungle",
    "kettle", "lantern", "meadow", "nectar", "orchid", "pepper", "quartz", "river", "saddle", "timber",
    "umber", "velvet", "willow", "xenon", "yonder", "zephyr", "anchor", "beacon", "cobalt", "dune",
]  # fmt: skip


def zipf_docs(n: int, seed: int = 3) -> list[Document]:
    """Zipf-distributed words, so some terms are in most chunks and others in a handful."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(VOCAB) + 1) ** 1.1
    p /= p.sum()
    docs = []
    for i in range(n):
        words = [VOCAB[j] for j in rng.choice(len(VOCAB), size=int(rng.integers(4, 60)), p=p)]
        meta = {}
        if i % 7 == 0:  # some documents went out of force in 2021
            meta = {"effective_to": "2021-01-01T00:00:00Z"}
        docs.append(Document(f"doc{i:04d}", "", " ".join(words), meta))
    return docs


@pytest.fixture(scope="module")
def zipf(engine: Engine) -> str:
    name = "t_bm25_zipf"
    emb = use_hash_embedder(engine)
    # A 24-token window makes most documents several chunks: the branch keeps each document's best.
    engine.ingest(
        name,
        zipf_docs(300),
        replace=True,
        create={"embedder": emb, "index": "exact", "chunker": ChunkerParams(window=24, overlap=4)},
    )
    return name


QUERIES = ["alpha bravo", "zephyr dune cobalt", "alpha canyon yonder umber", "river", "kettle alpha alpha"]


def assert_same(got: list[tuple[str, int, float]], want: list[tuple[str, int, float]]) -> None:
    assert [(d, c) for d, c, _ in got] == [(d, c) for d, c, _ in want]
    for (_, _, s1), (_, _, s2) in zip(got, want, strict=True):
        assert s1 == pytest.approx(s2, rel=1e-9)


@pytest.mark.parametrize("query", QUERIES)
def test_bm25_equals_exhaustive_reference(engine: Engine, zipf: str, query: str) -> None:
    # These queries' postings are few, so every posting is scored (theta = 0).
    assert_same(lexical(engine, zipf, query, depth=15), reference_bm25(engine, zipf, query, depth=15))


def bucket_docs() -> list[Document]:
    """The zipf corpus with a typed ``bucket`` (doc number mod 10) to filter on."""
    return [Document(d.doc_id, d.title, d.body, {**d.metadata, "bucket": i % 10}) for i, d in enumerate(zipf_docs(300))]


@pytest.fixture(scope="module")
def zipf_levels(engine: Engine) -> str:
    """The zipf corpus with impact quantiles every 2nd, 4th, 8th... posting: many read levels on small data."""
    name = "t_bm25_zipf_levels"
    sid = ingest_bucketed(engine, name, bucket_docs())
    assert build_lexical_stats(engine.db, sid, level_base=2)["level_base"] == 2
    return name


def force_impact_plan(monkeypatch: pytest.MonkeyPatch, *, seed: int, probe: int, deeper: int, skip: int) -> None:
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    monkeypatch.setattr(bm25_module, "DENSE_MAX_TERMS", 0)  # the dense plan has its own tests (test_bm25_dense)
    monkeypatch.setattr(
        bm25_module, "CONSTRAINED_WAYS", ("set", "probe")
    )  # and so has the admitted plan (test_bm25_admitted)
    monkeypatch.setattr(bm25_module, "SEED_PER_TERM", seed)
    monkeypatch.setattr(bm25_module, "PROBE", probe)
    monkeypatch.setattr(bm25_module, "DEEPER", deeper)
    monkeypatch.setattr(bm25_module, "SKIP_LEVEL", skip)


# (seed, probe, deeper, skip): from a weak theta and no probing (bounds alone
# prune) to strong probing; shallow and deep reads; skipped terms read or not.
PLAN_KNOBS = [(60, 0, 0, 0), (15, 1, 0, 1), (30, 50, 1, 5), (100, 5, 3, 0)]


def impact_trace(engine: Engine, collection: str, query: str, depth: int) -> dict[str, float]:
    """theta and how many chunks the impact plan read, bounded and scored, from its own CTEs.

    White-box: runs the lexical statement's CTEs with a SELECT of their sizes
    in place of the branch's final top-N.
    """
    text, params = engine.search_sql(collection, query, k=depth, mode="lexical", depth=depth)
    start = text.index("WITH qlex AS MATERIALIZED")
    end = text.rindex("SELECT c.doc_id, c.chunk, s.score FROM (")
    probe = text[start:end] + (
        "SELECT (SELECT theta FROM theta) AS theta, (SELECT count(*) FROM cand) AS bounded, "
        "(SELECT count(*) FROM scored) AS scored, "
        "(SELECT count(DISTINCT p.row_id) FROM qt JOIN {p} AS p ON p.term_id = qt.term_id) AS matching"
    ).replace("{p}", f"ranklock_data.postings_{engine.collection(collection).active_snapshot_id}")
    with engine.db.connection() as conn:
        row = conn.execute(probe, params).fetchone()
    assert row is not None
    return {"theta": row[0], "bounded": row[1], "scored": row[2], "matching": row[3]}


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("depth", [1, 5, 40])
@pytest.mark.parametrize("knobs", PLAN_KNOBS)
def test_pruned_impact_plan_is_exact(
    engine: Engine,
    zipf_levels: str,
    query: str,
    depth: int,
    knobs: tuple[int, int, int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the impact plan forced, every choice of its knobs must return the exact top depth."""
    seed, probe, deeper, skip = knobs
    force_impact_plan(monkeypatch, seed=seed, probe=probe, deeper=deeper, skip=skip)
    got = lexical(engine, zipf_levels, query, depth=depth)
    assert_same(got, reference_bm25(engine, zipf_levels, query, depth=depth))
    trace = impact_trace(engine, zipf_levels, query, depth)
    if depth <= 5 and seed >= 30:  # enough seed documents: the pruned plan really ran
        assert trace["theta"] > 0 and trace["scored"] < trace["matching"], trace


def test_impact_plan_scores_few_chunks_of_a_frequent_query(
    engine: Engine, zipf_levels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's point: most chunks holding a query term are never scored."""
    force_impact_plan(monkeypatch, seed=30, probe=20, deeper=1, skip=2)
    trace = impact_trace(engine, zipf_levels, "alpha bravo canyon", 5)
    assert trace["matching"] > 500 and trace["scored"] * 5 < trace["matching"], trace


def test_random_queries_and_knobs_stay_exact(engine: Engine, zipf_levels: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded random queries, depths and knobs, each against the exhaustive reference."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        words = rng.choice(VOCAB, size=int(rng.integers(1, 6)))
        depth = int(rng.integers(1, 30))
        seed, probe, deeper, skip = (int(x) for x in rng.integers([1, 0, 0, 0], [120, 60, 4, 6]))
        force_impact_plan(monkeypatch, seed=seed, probe=probe, deeper=deeper, skip=skip)
        q = " ".join(words)
        assert_same(lexical(engine, zipf_levels, q, depth=depth), reference_bm25(engine, zipf_levels, q, depth=depth))


@pytest.mark.parametrize("bucket_below", [1, 3, 8])
def test_pruned_plan_honours_a_typed_filter(
    engine: Engine, zipf_levels: str, bucket_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeds and probes count only documents passing the filter; the top is the filtered reference's."""
    force_impact_plan(monkeypatch, seed=80, probe=10, deeper=1, skip=2)
    for q in QUERIES:
        got = lexical(engine, zipf_levels, q, depth=5, filter=f"bucket < {bucket_below}")
        everything = reference_bm25(engine, zipf_levels, q, depth=1000)
        want = [h for h in everything if int(h[0][3:]) % 10 < bucket_below][:5]
        assert_same(got, want)


def test_pruned_plan_honours_the_time_predicate(
    engine: Engine, zipf_levels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_impact_plan(monkeypatch, seed=40, probe=3, deeper=0, skip=1)
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for q in QUERIES:
        for depth in (1, 10):
            got = lexical(engine, zipf_levels, q, depth=depth, as_of=when)
            assert_same(got, reference_bm25(engine, zipf_levels, q, depth=depth, as_of=when))
            assert all(int(d[3:]) % 7 != 0 for d, _, _ in got)  # out-of-force documents never come back


@pytest.mark.parametrize("depth", [1, 7])
def test_full_plan_with_a_filter_is_exact(engine: Engine, zipf: str, depth: int) -> None:
    """Sum-all plan: chunks are read in score order until enough pass the predicate."""
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for q in QUERIES:
        assert_same(
            lexical(engine, zipf, q, depth=depth, as_of=when), reference_bm25(engine, zipf, q, depth=depth, as_of=when)
        )


def test_row_id_order_is_doc_id_then_chunk_order(engine: Engine, zipf: str) -> None:
    """The sum-all plan breaks ties by row_id; that equals (doc_id, chunk) only because the builder numbers rows so."""
    sid = engine.collection(zipf).active_snapshot_id
    rows = engine.db.fetchall(f"SELECT doc_id, chunk FROM ranklock_data.chunks_{sid} ORDER BY row_id")
    keys = [(r["doc_id"].encode(), r["chunk"]) for r in rows]
    assert keys == sorted(keys) and len(keys) > 300


def test_other_k1_b_use_the_match_plan_and_stay_exact(engine: Engine, zipf: str) -> None:
    for k1, b in [(0.9, 0.4), (2.0, 1.0), (1.2, 0.0)]:
        assert_same(
            lexical(engine, zipf, "alpha canyon yonder", depth=20, k1=k1, b=b),
            reference_bm25(engine, zipf, "alpha canyon yonder", depth=20, k1=k1, b=b),
        )


def test_websearch_filters_by_tsquery_and_scores_positive_terms(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    docs = [
        Document("w1", "", "river saddle canyon trip"),
        Document("w2", "", "saddle river canyon"),  # the phrase in the wrong order
        Document("w3", "", "river saddle canyon alpha"),  # excluded word
        Document("w4", "", "canyon only"),  # no phrase
        Document("w5", "", "river saddle canyon canyon canyon"),
        Document("w6", "", "river saddle"),  # no canyon
    ]
    engine.ingest(cname, docs, replace=True, create={"embedder": emb, "index": "exact"})
    q = 'canyon -alpha "river saddle"'
    got = lexical(engine, cname, q, depth=10, query_syntax="websearch")
    assert [d for d, _, _ in got] == ["w5", "w1"]  # more canyon first
    assert_same(got, reference_bm25(engine, cname, q, depth=10, syntax="websearch"))
    terms = engine.db.fetchone("SELECT ranklock.query_terms('english', 'sensitive', 'websearch', %s) AS t", [q])
    assert terms is not None and terms["t"] == ["canyon", "river", "saddl"]  # positive terms only, sorted
    # The natural syntax on the same words is an OR: every document with any term matches.
    natural = lexical(engine, cname, "canyon alpha river saddle", depth=10)
    assert sorted(d for d, _, _ in natural) == ["w1", "w2", "w3", "w4", "w5", "w6"]


def test_exclusion_only_websearch_query_is_a_clear_answer(engine: Engine, zipf: str) -> None:
    """'-alpha' alone would match nearly every chunk with score 0: say so instead of ranking noise."""
    for ranker in ("bm25", "ts_rank_cd"):
        with pytest.raises(QueryError) as exc:
            engine.search(zipf, "-alpha -bravo", mode="lexical", query_syntax="websearch", lexical_ranker=ranker)
        assert str(exc.value) == (
            "the query '-alpha -bravo' only excludes words (-word); say what to look for too, "
            "e.g. 'canyon -alpha', or drop the minus signs."
        )
    res = engine.search(zipf, "-alpha", k=3, mode="hybrid", query_syntax="websearch")
    assert res.warnings == ["query only excludes words: the lexical branch was skipped"]
    assert res.hits and all(h.lexical_rank is None for h in res.hits)
    # With a word to look for, the exclusion applies.
    hits = engine.search(zipf, "canyon -alpha", k=50, mode="lexical", query_syntax="websearch").hits
    assert hits and all("canyon" in h.text and "alpha" not in h.text.split() for h in hits)


def test_bm25_is_the_default_and_its_parameters_are_recorded(engine: Engine, zipf: str) -> None:
    res = engine.search(zipf, "alpha canyon", k=5, mode="lexical")
    assert res.params["lexical_ranker"] == "bm25"
    assert (res.params["k1"], res.params["b"]) == (1.2, 0.75)
    manifest = engine.db.fetchone(
        "SELECT manifest, stats FROM ranklock.snapshots WHERE id = %s", [engine.collection(zipf).active_snapshot_id]
    )
    assert manifest is not None
    assert manifest["manifest"]["search"]["lexical_ranker"] == "bm25"
    assert (manifest["manifest"]["search"]["k1"], manifest["manifest"]["search"]["b"]) == (1.2, 0.75)
    assert manifest["manifest"]["text_search"]["analyzer"] == "pg-ts/2"
    seg = engine.db.fetchone(
        "SELECT stats FROM ranklock.segments WHERE id = %s", [engine.collection(zipf).active_snapshot_id]
    )
    assert seg is not None
    bm25 = seg["stats"]["bm25"]
    assert (bm25["k1"], bm25["b"], bm25["unit"]) == (1.2, 0.75, "chunk")
    assert bm25["N"] == manifest["manifest"]["corpus"]["chunks"]


def test_ts_rank_cd_stays_available(engine: Engine, zipf: str) -> None:
    res = engine.search(zipf, "zephyr", k=5, mode="lexical", lexical_ranker="ts_rank_cd")
    assert res.params["lexical_ranker"] == "ts_rank_cd" and "k1" not in res.params
    assert res.hits and all("zephyr" in h.text for h in res.hits)


def test_unknown_ranker_is_a_clear_error(engine: Engine, zipf: str) -> None:
    with pytest.raises(QueryError) as exc:
        engine.search(zipf, "alpha", mode="lexical", lexical_ranker="tfidf")
    assert str(exc.value) == "unknown lexical ranker 'tfidf'; use one of bm25, ts_rank_cd."


def test_stop_words_only(engine: Engine, zipf: str) -> None:
    with pytest.raises(QueryError) as exc:
        engine.search(zipf, "the of and", mode="lexical")
    assert str(exc.value) == (
        "the query 'the of and' has no searchable words in english (only stop words or punctuation); "
        "add content words, or use --mode semantic."
    )
    res = engine.search(zipf, "the of and", k=3, mode="hybrid")
    assert res.warnings == ["query has only stop words: the lexical branch was skipped"]
    assert res.hits and all(h.lexical_rank is None for h in res.hits)


def test_statistics_build_is_idempotent_and_backfills(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    engine.ingest(cname, zipf_docs(40, seed=9), replace=True, create={"embedder": emb, "index": "exact"})
    sid = engine.collection(cname).active_snapshot_id
    assert sid is not None
    before = lexical(engine, cname, "alpha glacier")
    first = build_lexical_stats(engine.db, sid)
    assert build_lexical_stats(engine.db, sid) == first  # nothing recomputed, same entry
    # A snapshot built before BM25 existed: no statistics, a clear error, then a backfill.
    engine.db.execute("UPDATE ranklock.segments SET stats = stats - 'bm25' WHERE id = %s", [sid])
    engine.db.execute(f"DROP TABLE ranklock_data.postings_{sid}, ranklock_data.terms_{sid}")
    with pytest.raises(SnapshotError) as exc:
        engine.search(cname, "alpha glacier", mode="lexical")
    assert str(exc.value).startswith(f"snapshot {sid} has no BM25 statistics")
    assert f"ranklock snapshot lexical-stats {cname} {sid}" in str(exc.value)
    assert "lexical_ranker='ts_rank_cd'" in str(exc.value)
    out = engine.lexical_stats(cname)
    assert out.snapshot_id == sid and out.bm25["version"] == 4
    assert lexical(engine, cname, "alpha glacier") == before


def test_statistics_of_an_older_layout_are_refused_then_rebuilt(engine: Engine, cname: str, rl_home: Path) -> None:
    """A segment whose BM25 tables are of an older layout (version 3: weights only, built before segments)
    is refused with the command that rebuilds it, and the CLI rebuilds it with the same results."""
    from typer.testing import CliRunner

    from ranklock.cli import app

    emb = use_hash_embedder(engine)
    engine.ingest(cname, zipf_docs(60, seed=4), replace=True, create={"embedder": emb, "index": "exact"})
    sid = engine.collection(cname).active_snapshot_id
    before = lexical(engine, cname, "alpha glacier")
    # What a layout-3 segment looked like: no term frequencies, version 3.
    engine.db.execute(f"ALTER TABLE ranklock_data.forward_{sid} DROP COLUMN tfs")
    engine.db.execute(
        "UPDATE ranklock.segments SET stats = jsonb_set(stats, '{bm25,version}', '3') WHERE id = %s", [sid]
    )
    with pytest.raises(SnapshotError, match=f"ranklock snapshot lexical-stats {cname} {sid}"):
        engine.search(cname, "alpha glacier", mode="lexical")
    dsn = ["--dsn", os.environ["RANKLOCK_TEST_DSN"]] if os.environ.get("RANKLOCK_TEST_DSN") else []
    r = CliRunner().invoke(app, ["snapshot", "lexical-stats", cname, "--json", "--home", str(rl_home), *dsn])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["bm25"]["version"] == 4
    assert lexical(engine, cname, "alpha glacier") == before


def test_search_sql_twin_binds_the_statistics(engine: Engine, zipf: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text, params = engine.search_sql(zipf, "alpha canyon", mode="lexical")
    sid = engine.collection(zipf).active_snapshot_id
    assert f'"ranklock_data"."postings_{sid}"' in text and f'"ranklock_data"."terms_{sid}"' in text
    assert params["k1"] == 1.2 and params["b"] == 0.75
    assert params["bm25_seed"] == bm25_module.SEED_PER_TERM
    assert params["bm25_full"] == bm25_module.FULL_SCAN_POSTINGS
    assert params["bm25_probe"] == bm25_module.PROBE and params["bm25_level_base"] == 256
    assert "alpha" not in text  # the query is bound, never spliced
    # Few postings: the statement is the plain sum, without the impact plan's CTEs.
    assert params["bm25_plan"] == "full" and "theta" not in text
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    monkeypatch.setattr(bm25_module, "DENSE_MAX_TERMS", 0)
    text, params = engine.search_sql(zipf, "alpha canyon", mode="lexical")
    assert params["bm25_plan"] == "impact" and f'"ranklock_data"."forward_{sid}"' in text and "theta" in text


def test_cli_passes_ranker_and_bm25_parameters(engine: Engine, zipf: str, rl_home: Path) -> None:
    from typer.testing import CliRunner

    from ranklock.cli import app

    dsn = ["--dsn", os.environ["RANKLOCK_TEST_DSN"]] if os.environ.get("RANKLOCK_TEST_DSN") else []
    args = ["search", zipf, "alpha canyon", "--mode", "lexical", "--k1", "0.9", "--b", "0.4", "--json"]
    r = CliRunner().invoke(app, [*args, "--home", str(rl_home), *dsn])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert (out["params"]["lexical_ranker"], out["params"]["k1"], out["params"]["b"]) == ("bm25", 0.9, 0.4)
    want = reference_bm25(engine, zipf, "alpha canyon", k1=0.9, b=0.4, depth=10)
    assert [h["doc_id"] for h in out["hits"]] == [d for d, _, _ in want]
