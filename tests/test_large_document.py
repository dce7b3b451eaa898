"""A 5 MB document is searchable at every depth the API accepts, in every mode and in eval.

Every integer the search statement binds carries an explicit SQL type: psycopg
sends a Python int as int2, int4 or int8 by its value, so ``depth *
max_chunks_per_doc`` computed in SQL overflowed smallint (40 * 820 > 32767)
once one document had more than ~820 chunks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from fakes import use_hash_embedder
from large_document import large_document_text, vocabulary
from lexical_helpers import reference_bm25
from ranklock import Document, Engine
from ranklock.eval.run import evaluate
from ranklock.ingest.chunker import document_text
from ranklock.limits import MAX_K
from ranklock.search.bm25 import choose_plan
from ranklock.search.fusion import build_search_sql
from ranklock.search.lexical import LexicalBranch
from ranklock.search.semantic import SemanticBranch
from ranklock.search.spec import SearchSpec
from ranklock.snapshot.filter_table import FILTER_TABLE_VERSION
from ranklock.snapshot.lexical_stats import BM25_STATS_VERSION
from ranklock.snapshot.segments import Layout, SegmentInfo

DEPTHS = (1, 40, 100, 1000, MAX_K)  # MAX_K: the most SearchParams.depth accepts
MODES = ("lexical", "semantic", "hybrid")
#: Rare words planted in the large document: (about where, word).
MARKERS = {1_000: "quillfeather", 2_500_000: "marrowgate", 4_990_000: "zephyrcloud"}
_PLACEHOLDER = re.compile(r"%\((\w+)\)s(::)?")


_REFERENCE: dict[tuple[str, str], list[tuple[str, int, float]]] = {}


def _reference(engine: Engine, name: str, query: str) -> list[tuple[str, int, float]]:
    """The exhaustive BM25 ranking of every matching document (computed once per query: it reads every chunk)."""
    if (name, query) not in _REFERENCE:
        _REFERENCE[(name, query)] = reference_bm25(engine, name, query, depth=MAX_K)
    return _REFERENCE[(name, query)]


def untyped_integer_placeholders(text: str, params: dict[str, Any]) -> list[str]:
    """Names of integer parameters that appear in ``text`` without a ``::type`` cast right after."""
    return sorted(
        {
            m.group(1)
            for m in _PLACEHOLDER.finditer(text)
            if isinstance(params.get(m.group(1)), int) and not isinstance(params[m.group(1)], bool) and not m.group(2)
        }
    )


@pytest.fixture(scope="module")
def large(engine: Engine) -> tuple[str, str]:
    """A collection holding one 5 MB document and 30 small ones of the same vocabulary; returns (name, big text)."""
    name = "t_large_document"
    emb = use_hash_embedder(engine)
    text = large_document_text(5_000_000, markers=MARKERS)
    docs = [Document("big", "A very long report", text)]
    docs += [
        Document(f"small-{i:02d}", f"Note {i}", large_document_text(2_000 + 300 * i, seed=100 + i)) for i in range(30)
    ]
    docs.append(Document("marker-note", "Marrowgate", "A short note on marrowgate and nothing else."))
    engine.ingest(name, docs, create={"embedder": emb, "index": "hnsw"})
    return name, text


def test_large_document_has_thousands_of_chunks(engine: Engine, large: tuple[str, str]) -> None:
    name, text = large
    snap = engine.db.fetchone(
        "SELECT stats FROM ranklock.snapshots WHERE id = %s", [engine.collection(name).active_snapshot_id]
    )
    assert snap is not None
    # Far beyond the ~820 chunks (smallint / 40) that used to break every lexical search.
    assert snap["stats"]["max_chunks_per_doc"] > 3 * (32767 // 40)
    seg = engine.db.fetchone(
        "SELECT stats FROM ranklock.segments WHERE id = %s", [engine.collection(name).active_snapshot_id]
    )
    assert seg is not None and seg["stats"]["bm25"]["version"] == BM25_STATS_VERSION
    assert len(text) >= 5_000_000


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("mode", MODES)
def test_every_depth_and_mode_answers(engine: Engine, large: tuple[str, str], mode: str, depth: int) -> None:
    name, text = large
    res = engine.search(name, "zephyrcloud stou", k=10, mode=mode, depth=depth)
    assert res.hits, res
    full = document_text("A very long report", text)
    for h in res.hits:
        if h.doc_id == "big":
            # Offsets are exact in the stored document, however far into it.
            assert full[h.char_start : h.char_end] == h.text
    if mode == "lexical":
        # The marker sits ~5 MB in: the big document's best chunk is the one holding it.
        assert res.hits[0].doc_id == "big"
        assert "zephyrcloud" in res.hits[0].text
        assert res.hits[0].chunk > 2000
    # Nothing lost: min(k, what the mode ranks) hits at every depth.
    if mode == "hybrid" and depth < 10:
        # Fusion sees `depth` documents per branch, fewer than k: said, not silent.
        assert 1 <= len(res.hits) <= 2 * depth
        assert res.truncation == "fusion_depth"
    else:
        lexical_docs = len(_reference(engine, name, "zephyrcloud stou"))
        assert len(res.hits) == min(10, lexical_docs if mode == "lexical" else res.matching_count)


@pytest.mark.parametrize("depth", (40, 100, 1000))
@pytest.mark.parametrize(
    "query",
    [
        "marrowgate",
        # The ten most common words: tens of thousands of postings, so the pruned impact plan runs.
        " ".join(vocabulary(30_000, 11)[:10]),
    ],
)
def test_lexical_ranking_equals_the_exhaustive_reference(
    engine: Engine, large: tuple[str, str], query: str, depth: int
) -> None:
    name, _ = large
    res = engine.search(name, query, k=depth, mode="lexical", depth=depth)
    got = [(h.doc_id, h.chunk) for h in res.hits]
    want = _reference(engine, name, query)[:depth]
    assert got == [(d, c) for d, c, _ in want]
    for h, (_, _, score) in zip(res.hits, want, strict=True):
        assert h.lexical_score == pytest.approx(score, rel=1e-9)


def test_common_words_take_a_pruned_plan(engine: Engine, large: tuple[str, str]) -> None:
    name, _ = large
    text, params = engine.search_sql(name, " ".join(vocabulary(30_000, 11)[:10]), mode="lexical", depth=1000)
    assert "theta2 AS MATERIALIZED" in text
    assert params["bm25_plan"] == "dense"  # every one of them is in more than 1/1024 of the chunks


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("query", ["marrowgate", "zephyrcloud report stou", "brandain"])
def test_search_sql_types_every_bound_integer(engine: Engine, large: tuple[str, str], mode: str, query: str) -> None:
    name, _ = large
    for depth in (1, MAX_K):
        text, params = engine.search_sql(name, query, k=10, mode=mode, depth=depth, filter=None)
        assert untyped_integer_placeholders(text, params) == []


def _specs() -> list[SearchSpec]:
    """Every shape of search statement: modes, rankers, BM25 plans, vector strategies, filter, as_of."""
    import dataclasses
    from datetime import UTC, datetime

    specs = []
    stats = {
        "max_chunks_per_doc": 5000,
        "bm25": {
            "version": BM25_STATS_VERSION,
            "k1": 1.2,
            "b": 0.75,
            "avgdl": 100.0,
            "level_base": 256,
            "dense": {"share": 1 / 64, "min_df": 10, "block": 16000, "rows": 10**6, "terms": 5, "blocks": 315},
        },
    }
    # One segment (id 1) of a million chunks holding those statistics, no dead row; with and without a
    # filter table (the admitted set is listed only from one).
    segment = SegmentInfo(1, 1000, 10**6, 10**8, 5000, bm25=stats["bm25"])
    layout = Layout(1, (segment,), 0, (segment,))
    tabled = dataclasses.replace(segment, filter={"version": FILTER_TABLE_VERSION, "rows": 10**6})
    filter_layout = Layout(1, (tabled,), 0, (tabled,))
    totals = (10**6, 10**8, 5000)
    for mode in MODES:
        for ranker, syntax, k1, postings in [
            ("bm25", "natural", 1.2, 10),
            ("bm25", "natural", 1.2, 10**6),
            ("bm25", "natural", 1.2, [10**6, 100, 2]),  # the dense plan
            ("bm25", "websearch", 1.2, None),
            ("bm25", "natural", 0.9, None),
            ("ts_rank_cd", "natural", 1.2, None),
        ]:
            for strategy in ("exact", "hnsw", "ivfflat"):
                # Unfiltered; then constrained as a search meets it: the plan chosen for what the constraint
                # admits (lexical.LexicalBranch.constrained), few or many chunks, with or without filter tables.
                for filtered, lay, admitted in [
                    (False, layout, 0),
                    (True, layout, 30_000),
                    (True, filter_layout, 30_000),
                    (True, filter_layout, 300_000),
                    (True, filter_layout, 300),
                ]:
                    spec = SearchSpec(
                        layout=lay,
                        mode=mode,
                        k=10,
                        depth=40,
                        rrf_k=60,
                        query="q",
                        language="english",
                        accent="sensitive",
                        max_chunks_per_doc=5000,
                        capture_branches=filtered,
                    )
                    if filtered:
                        spec = dataclasses.replace(
                            spec,
                            filter_sql=sql.SQL('"c"."year" >= {}::bigint').format(sql.Placeholder("f0")),
                            filter_params={"f0": 2020},
                            as_of=datetime(2026, 1, 1, tzinfo=UTC),
                        )
                    branches: list[Any] = []
                    if mode in ("hybrid", "lexical"):
                        lex = LexicalBranch("q", "english", "sensitive", syntax, ranker, k1, 0.75)
                        if ranker == "bm25":
                            bm25 = choose_plan(lex, lay, totals, postings)
                            if filtered:
                                bm25 = bm25.constrained(spec, admitted)
                            lex = dataclasses.replace(lex, bm25=bm25)
                        branches.append(lex)
                    if mode in ("hybrid", "semantic"):
                        branches.append(SemanticBranch([0.0] * 8, strategy, strategy, 160, "strict_order", 20000, 10))
                    specs.append(spec.with_branches(tuple(branches)))
    return specs


def test_every_statement_shape_types_its_integers() -> None:
    """A cheap guard: no integer placeholder in any statement shape is left for psycopg to type by value."""
    specs = _specs()
    assert len(specs) == 3 * 6 * 3 * 5
    bm25s = [b.bm25 for s in specs for b in s.branches if isinstance(b, LexicalBranch)]
    assert {b.name if b else None for b in bm25s} == {None, "full", "impact", "dense", "admitted"}
    assert {b.params().get("bm25_admit") for b in bm25s if b} == {None, "probe", "set"}
    for spec in specs:
        q, params = build_search_sql(spec)
        text = q.as_string(None)
        assert untyped_integer_placeholders(text, params) == [], (spec.mode, spec.branches)


def test_the_guard_sees_an_untyped_integer() -> None:
    assert untyped_integer_placeholders("LIMIT %(depth)s * %(m)s::bigint", {"depth": 40, "m": 820}) == ["depth"]
    assert untyped_integer_placeholders("WHERE x = %(flag)s AND y = %(s)s", {"flag": True, "s": "a"}) == []


def test_eval_at_depth_100_scores_the_large_collection(engine: Engine, large: tuple[str, str], tmp_path: Path) -> None:
    name, _ = large
    golden = tmp_path / "golden.jsonl"
    lines = [
        {"id": "q1", "query": "zephyrcloud", "expected": ["big"]},
        {"id": "q2", "query": "marrowgate note", "expected": {"marker-note": 2, "big": 1}},
        {"id": "q3", "query": "quillfeather", "expected": ["big"]},
    ]
    golden.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = evaluate(engine, name, golden, ks=(1, 10, 100))
    assert run.report["depth"] == 100
    lexical = run.report["modes"]["lexical"]
    assert lexical["recall@100"] == 1.0
    assert lexical["mrr"] == 1.0
    assert set(run.report["modes"]) == set(MODES)
