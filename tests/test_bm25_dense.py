"""BM25's dense plan: frequent terms summed as float4 blocks (sparsevec, made vectors), only to prune; scores stay exact.

Every result is compared with the exhaustive Python reference and, bit for
bit, with the plans that do not use the dense blocks (impact plan, full sum).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lexical_helpers import ingest_bucketed, lexical, reference_bm25, use_hash_embedder
from ranklock import Document, Engine
from ranklock.search.bm25 import costs as bm25_module
from ranklock.snapshot.lexical_stats import DENSE_BLOCK, DENSE_SHARE, build_lexical_stats, dense_min_df
from test_bm25 import VOCAB, assert_same, zipf_docs

#: A block size that does not divide the chunk count: several blocks, the last one short.
SMALL_BLOCK = 7
#: Terms in at least this share of the chunks are dense in the fixture: the frequent half of the vocabulary.
SHARE = 0.3

DENSE_ONLY = ["alpha bravo", "alpha bravo canyon delta", "bravo", "alpha alpha bravo", "bravo canyon bravo bravo"]
MIXED = ["alpha zephyr", "alpha bravo dune cobalt", "kettle alpha alpha", "canyon yonder umber xenon"]


def dense_docs() -> list[Document]:
    """The zipf corpus with a bucket field, plus identical documents (ties at the top of 'alpha bravo')."""
    docs = [Document(d.doc_id, d.title, d.body, {**d.metadata, "bucket": i % 10}) for i, d in enumerate(zipf_docs(300))]
    docs += [Document(f"dup{i:02d}", "", "bravo bravo bravo alpha alpha", {"bucket": i % 10}) for i in range(12)]
    return docs


@pytest.fixture(scope="module")
def dense(engine: Engine) -> str:
    name = "t_bm25_dense"
    sid = ingest_bucketed(engine, name, dense_docs())
    entry = build_lexical_stats(engine.db, sid, dense_share=SHARE, dense_block=SMALL_BLOCK)
    assert entry["dense"]["block"] == SMALL_BLOCK and entry["dense"]["rows"] % SMALL_BLOCK != 0
    return name


def plan_of(engine: Engine, collection: str, query: str, **kw: Any) -> str:
    _, params = engine.search_sql(collection, query, mode="lexical", **kw)
    return str(params["bm25_plan"])


def force_dense_plan(monkeypatch: pytest.MonkeyPatch, *, seeds: int = 1024, probe: int = 250) -> None:
    """Take the dense plan whatever the postings count (the test corpus is small)."""
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    monkeypatch.setattr(bm25_module, "DENSE_SEEDS", seeds)
    monkeypatch.setattr(bm25_module, "DENSE_PROBE", probe)
    monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", ("set", "probe"))  # filtered tests keep the dense plan


def other_plans(
    engine: Engine, collection: str, query: str, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> list[list[tuple[str, int, float]]]:
    """The same search under the impact plan and the full sum, which never read the dense blocks."""
    out = []
    with monkeypatch.context() as m:
        m.setattr(bm25_module, "DENSE_MAX_TERMS", 0)
        assert plan_of(engine, collection, query) == "impact"
        out.append(lexical(engine, collection, query, **kw))
        m.setattr(bm25_module, "FULL_SCAN_POSTINGS", 10**9)
        assert plan_of(engine, collection, query) == "full"
        out.append(lexical(engine, collection, query, **kw))
    return out


def dense_terms(engine: Engine, collection: str) -> set[str]:
    sid = engine.collection(collection).active_snapshot_id
    rows = engine.db.fetchall(
        f"SELECT DISTINCT t.lexeme FROM ranklock_data.terms_{sid} AS t "
        f"JOIN ranklock_data.dense_{sid} AS d ON d.term_id = t.term_id"
    )
    return {r["lexeme"] for r in rows}


def test_fixture_has_dense_and_sparse_terms_and_several_chunks_per_document(engine: Engine, dense: str) -> None:
    """The premises of the tests below: which query words are dense, and documents of several chunks."""
    got = dense_terms(engine, dense)
    assert {"alpha", "bravo", "canyon", "delta"} <= got
    assert not {"zephyr", "dune", "cobalt", "xenon"} & got
    assert len(got) < len(VOCAB)
    stats = engine.db.fetchone(
        "SELECT stats FROM ranklock.snapshots WHERE id = %s", [engine.collection(dense).active_snapshot_id]
    )
    assert stats is not None and stats["stats"]["max_chunks_per_doc"] > 1


@pytest.mark.parametrize("query", DENSE_ONLY + MIXED)
@pytest.mark.parametrize("depth", [1, 5, 40])
@pytest.mark.parametrize("knobs", [(1, 0), (40, 5), (1024, 250)])
def test_dense_plan_is_exact(
    engine: Engine,
    dense: str,
    query: str,
    depth: int,
    knobs: tuple[int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Weak or strong theta, no probing or much: the exact top depth, the same bits as the other plans."""
    seeds, probe = knobs
    force_dense_plan(monkeypatch, seeds=seeds, probe=probe)
    assert plan_of(engine, dense, query, depth=depth) == "dense"
    got = lexical(engine, dense, query, depth=depth)
    assert_same(got, reference_bm25(engine, dense, query, depth=depth))
    for other in other_plans(engine, dense, query, monkeypatch, depth=depth):
        assert got == other


def test_ties_at_the_top_break_by_doc_id_then_chunk(
    engine: Engine, dense: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve identical documents score the same, to the last bit: they come back in doc_id order."""
    force_dense_plan(monkeypatch)
    got = lexical(engine, dense, "alpha bravo", depth=20)
    dups = [(d, c, s) for d, c, s in got if d.startswith("dup")]
    assert [d for d, _, _ in dups] == [f"dup{i:02d}" for i in range(12)]
    assert len({s for _, _, s in dups}) == 1
    assert_same(got, reference_bm25(engine, dense, "alpha bravo", depth=20))


@pytest.mark.parametrize("bucket_below", [1, 3, 8])
def test_dense_plan_honours_a_typed_filter(
    engine: Engine, dense: str, bucket_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_dense_plan(monkeypatch, seeds=200, probe=10)
    for q in DENSE_ONLY + MIXED:
        got = lexical(engine, dense, q, depth=5, filter=f"bucket < {bucket_below}")
        everything = reference_bm25(engine, dense, q, depth=1000)
        want = [h for h in everything if _bucket(h[0]) < bucket_below][:5]
        assert_same(got, want)


def _bucket(doc_id: str) -> int:
    return int(doc_id[3:]) % 10


def test_dense_plan_honours_the_time_predicate(engine: Engine, dense: str, monkeypatch: pytest.MonkeyPatch) -> None:
    force_dense_plan(monkeypatch, seeds=100, probe=3)
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for q in DENSE_ONLY + MIXED:
        for depth in (1, 10):
            got = lexical(engine, dense, q, depth=depth, as_of=when)
            assert_same(got, reference_bm25(engine, dense, q, depth=depth, as_of=when))
            assert all(not (d.startswith("doc") and int(d[3:]) % 7 == 0) for d, _, _ in got)


def test_random_queries_and_knobs_stay_exact(engine: Engine, dense: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(14)
    for _ in range(30):
        q = " ".join(rng.choice(VOCAB, size=int(rng.integers(1, 7))))
        depth = int(rng.integers(1, 30))
        force_dense_plan(monkeypatch, seeds=int(rng.integers(1, 400)), probe=int(rng.integers(0, 60)))
        got = lexical(engine, dense, q, depth=depth)
        assert_same(got, reference_bm25(engine, dense, q, depth=depth))


def dense_trace(engine: Engine, collection: str, query: str, depth: int) -> dict[str, float]:
    """theta, candidates, chunks scored and chunks matching, from the dense plan's own CTEs (white-box)."""
    text, params = engine.search_sql(collection, query, k=depth, mode="lexical", depth=depth)
    assert params["bm25_plan"] == "dense"
    start = text.index("WITH qlex AS MATERIALIZED")
    end = text.rindex("SELECT c.doc_id, c.chunk, s.score FROM (")
    sid = engine.collection(collection).active_snapshot_id
    probe = text[start:end] + (
        "SELECT (SELECT theta FROM theta), (SELECT count(*) FROM cand), (SELECT count(*) FROM scored), "
        f"(SELECT count(DISTINCT p.row_id) FROM qt JOIN ranklock_data.postings_{sid} AS p ON p.term_id = qt.term_id)"
    )
    with engine.db.connection() as conn:
        row = conn.execute(probe, params).fetchone()
    assert row is not None
    return {"theta": row[0], "bounded": row[1], "scored": row[2], "matching": row[3]}


def test_dense_bounds_prune_most_chunks(engine: Engine, dense: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's point: of the chunks holding a query term, few are scored exactly."""
    force_dense_plan(monkeypatch, seeds=200, probe=20)
    for q in ("alpha bravo canyon", "alpha bravo dune"):
        trace = dense_trace(engine, dense, q, 5)
        assert trace["theta"] > 0 and trace["matching"] > 400, trace
        assert trace["scored"] * 5 < trace["matching"], trace


def test_plan_choice_falls_back_when_the_dense_plan_does_not_apply(
    engine: Engine, dense: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    assert plan_of(engine, dense, "alpha zephyr") == "dense"
    # No query term has dense blocks.
    assert plan_of(engine, dense, "zephyr dune") == "impact"
    # The other terms have too many postings to read whole; the dense terms alone need none.
    monkeypatch.setattr(bm25_module, "DENSE_REST_POSTINGS", 0)
    assert plan_of(engine, dense, "alpha zephyr") == "impact"
    assert plan_of(engine, dense, "alpha bravo") == "dense"
    # More dense terms than the float4 margin covers.
    monkeypatch.setattr(bm25_module, "DENSE_MAX_TERMS", 1)
    assert plan_of(engine, dense, "alpha bravo") == "impact"
    assert plan_of(engine, dense, "alpha") == "dense"
    # Few postings in all: the plain sum, as before.
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 10**9)
    assert plan_of(engine, dense, "alpha") == "full"


def test_dense_plan_params_are_bound(engine: Engine, dense: str, monkeypatch: pytest.MonkeyPatch) -> None:
    force_dense_plan(monkeypatch)
    text, params = engine.search_sql(dense, "alpha zephyr", mode="lexical")
    sid = engine.collection(dense).active_snapshot_id
    assert f'"ranklock_data"."dense_{sid}"' in text and "binary_quantize" in text
    assert params["bm25_plan"] == "dense"
    assert params["bm25_dense_block"] == SMALL_BLOCK
    assert params["bm25_dense_rel"] == bm25_module.DENSE_REL and params["bm25_dense_abs"] == bm25_module.DENSE_ABS
    assert params["bm25_dense_seeds"] == bm25_module.DENSE_SEEDS and params["bm25_probe"] == bm25_module.DENSE_PROBE
    assert "zephyr" not in text and "alpha" not in text


def test_dense_blocks_hold_the_postings_weights_as_float4(engine: Engine, dense: str) -> None:
    """Element row_id % block of block row_id // block: the posting's weight rounded to float4, 0 elsewhere."""
    sid = engine.collection(dense).active_snapshot_id
    entry = engine.db.fetchone("SELECT stats -> 'bm25' -> 'dense' AS d FROM ranklock.segments WHERE id = %s", [sid])
    assert entry is not None
    rows, block = entry["d"]["rows"], entry["d"]["block"]
    term = engine.db.fetchone(f"SELECT term_id, df FROM ranklock_data.terms_{sid} WHERE lexeme = 'canyon'")
    assert term is not None
    want = np.zeros(rows, dtype=np.float32)
    for r in engine.db.fetchall(
        f"SELECT row_id, w FROM ranklock_data.postings_{sid} WHERE term_id = %s", [term["term_id"]]
    ):
        want[r["row_id"]] = np.float32(r["w"])
    got = np.zeros(rows, dtype=np.float32)
    blocks = engine.db.fetchall(
        f"SELECT blk, v::vector::real[] AS v FROM ranklock_data.dense_{sid} WHERE term_id = %s ORDER BY blk",
        [term["term_id"]],
    )
    for b in blocks:
        v = np.asarray(b["v"], dtype=np.float32)
        assert len(v) == min(block, rows - b["blk"] * block)  # the last block only as long as needed
        got[b["blk"] * block : b["blk"] * block + len(v)] = v
    assert np.array_equal(got, want) and int((got > 0).sum()) == term["df"]


def test_default_block_size_and_an_upgrade_of_a_snapshot_without_dense_blocks(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot built without dense blocks keeps the old plans; the CLI adds them; nothing else changes."""
    from typer.testing import CliRunner

    from ranklock.cli import app

    emb = use_hash_embedder(engine)
    engine.ingest(cname, zipf_docs(80, seed=5), replace=True, create={"embedder": emb, "index": "exact"})
    sid = engine.collection(cname).active_snapshot_id
    assert sid is not None
    # What a snapshot of before dense blocks looks like.
    entry = build_lexical_stats(engine.db, sid, force=True, dense=False)
    assert "dense" not in entry
    assert engine.db.fetchone("SELECT to_regclass(%s) AS t", [f"ranklock_data.dense_{sid}"]) == {"t": None}
    force_dense_plan(monkeypatch)
    q = "alpha bravo zephyr"
    assert plan_of(engine, cname, q) == "impact"
    before = lexical(engine, cname, q, depth=10)
    assert_same(before, reference_bm25(engine, cname, q, depth=10))
    postings = engine.db.fetchone(f"SELECT count(*) AS n, sum(w) AS s FROM ranklock_data.postings_{sid}")

    dsn = ["--dsn", os.environ["RANKLOCK_TEST_DSN"]] if os.environ.get("RANKLOCK_TEST_DSN") else []
    r = CliRunner().invoke(app, ["snapshot", "lexical-stats", cname, "--json", "--home", str(rl_home), *dsn])
    assert r.exit_code == 0, r.output
    added = json.loads(r.output)["bm25"]["dense"]
    assert added["block"] == DENSE_BLOCK and added["rows"] == sid_chunks(engine, sid) < DENSE_BLOCK
    assert added["terms"] > 0 and added["blocks"] == added["terms"]  # one (short) block per dense term
    assert engine.db.fetchone(f"SELECT count(*) AS n, sum(w) AS s FROM ranklock_data.postings_{sid}") == postings
    assert plan_of(engine, cname, q) == "dense"
    assert lexical(engine, cname, q, depth=10) == before
    # Idempotent: a second call changes nothing, and says what there is.
    again = engine.lexical_stats(cname)
    assert again.bm25["dense"] == added
    r = CliRunner().invoke(app, ["snapshot", "lexical-stats", cname, "--home", str(rl_home), *dsn])
    assert r.exit_code == 0, r.output
    assert f"{added['terms']:,} dense terms" in r.output


def test_blocks_of_before_issue_22_are_rebuilt_as_sparsevec_with_the_same_results(
    engine: Engine, cname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks stored as vectors for the terms in 1/64 of the chunks search as before; lexical stats rebuilds them."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, zipf_docs(300, seed=7), replace=True, create={"embedder": emb, "index": "exact"})
    sid = engine.collection(cname).active_snapshot_id
    assert sid is not None
    force_dense_plan(monkeypatch)
    queries = ["alpha bravo zephyr", "canyon delta", "kettle alpha alpha umber"]
    now = {q: lexical(engine, cname, q, depth=10) for q in queries}
    # What a snapshot built before issue 22 holds: vectors, and only for the terms in 1/64 of the chunks.
    old_min_df = dense_min_df(sid_chunks(engine, sid), 1 / 64)
    engine.db.execute(
        f"DELETE FROM ranklock_data.dense_{sid} AS d USING ranklock_data.terms_{sid} AS t "
        "WHERE t.term_id = d.term_id AND t.df < %s",
        [old_min_df],
    )
    engine.db.execute(f"ALTER TABLE ranklock_data.dense_{sid} ALTER COLUMN v TYPE vector USING v::vector")
    engine.db.execute(
        "UPDATE ranklock.segments SET stats = jsonb_set(jsonb_set(stats, '{bm25,dense,share}', to_jsonb(%s::float8)), "
        "'{bm25,dense,min_df}', to_jsonb(%s::int)) WHERE id = %s",
        [1 / 64, old_min_df, sid],
    )
    for q in queries:
        assert plan_of(engine, cname, q) == "dense"
        assert lexical(engine, cname, q, depth=10) == now[q]
        assert_same(now[q], reference_bm25(engine, cname, q, depth=10))
    entry = engine.lexical_stats(cname).bm25["dense"]
    assert (entry["share"], entry["min_df"]) == (DENSE_SHARE, dense_min_df(sid_chunks(engine, sid), DENSE_SHARE))
    kind = engine.db.fetchone(
        "SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'v'",
        [f"ranklock_data.dense_{sid}"],
    )
    assert kind == {"t": "sparsevec"}
    for q in queries:
        assert lexical(engine, cname, q, depth=10) == now[q]


def sid_chunks(engine: Engine, sid: int) -> int:
    row = engine.db.fetchone(f"SELECT count(*) AS n FROM ranklock_data.chunks_{sid}")
    assert row is not None
    return int(row["n"])


def test_builder_refuses_impossible_dense_parameters(engine: Engine, dense: str) -> None:
    sid = engine.collection(dense).active_snapshot_id
    assert sid is not None
    with pytest.raises(ValueError) as exc:
        build_lexical_stats(engine.db, sid, dense_block=16001)
    assert str(exc.value) == "dense_block must be 1..16000 (pgvector's largest vector), not 16001"
    with pytest.raises(ValueError) as exc:
        build_lexical_stats(engine.db, sid, dense_share=0)
    assert str(exc.value) == "dense_share must be in (0, 1], not 0"
