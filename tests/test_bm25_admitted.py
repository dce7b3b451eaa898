"""BM25's admitted plan: a hard constraint that admits few chunks gets those scored, exactly.

Without it a selective filter left the impact and dense plans with too few
seed documents to bound theta, and the statement summed every posting of the
query's terms.  The admitted plan scores each admitted chunk that holds a
query term from the forward table: the same float8 weights in the same order,
so its answers equal the other plans' bit for bit and the exhaustive reference.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lexical_helpers import ingest_bucketed, lexical, reference_bm25
from ranklock import Engine
from ranklock.search import bm25 as bm25_module
from test_bm25 import QUERIES, assert_same, bucket_docs

FILTERS = ["bucket < 1", "bucket < 3", "bucket = 5"]


@pytest.fixture(scope="module")
def buckets(engine: Engine) -> str:
    name = "t_bm25_admitted"
    ingest_bucketed(engine, name, bucket_docs())
    return name


def plan_of(engine: Engine, collection: str, query: str, **kw: Any) -> str:
    _, params = engine.search_sql(collection, query, mode="lexical", **kw)
    return str(params["bm25_plan"])


def in_bucket(doc_id: str, expr: str) -> bool:
    bucket = int(doc_id[3:]) % 10
    op, value = expr.split()[1], int(expr.split()[2])
    return bucket < value if op == "<" else bucket == value


@pytest.fixture
def no_full_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test corpus is small: without this every query would take the plain sum."""
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)


def force_admitted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the admitted plan under any constraint within the threshold (rare words have few postings)."""
    monkeypatch.setattr(bm25_module, "CHUNK_POSTINGS", 0)


@pytest.mark.usefixtures("no_full_sum")
def test_a_selective_constraint_takes_the_admitted_plan(
    engine: Engine, buckets: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert plan_of(engine, buckets, "alpha bravo", filter="bucket < 1") == "admitted"
    when = datetime(2024, 1, 1, tzinfo=UTC)
    assert plan_of(engine, buckets, "alpha bravo", filter="bucket < 1", as_of=when) == "admitted"
    # No constraint, or one admitting 6 chunks in 7 (as_of alone): the postings' plans.
    assert plan_of(engine, buckets, "alpha bravo") in ("impact", "dense")
    assert plan_of(engine, buckets, "alpha bravo", as_of=when) in ("impact", "dense")
    # More admitted chunks than the exact threshold (half the corpus), and enough for the seeds: the
    # postings' plans ... (the cost rule is set aside here: scoring half the chunks reads more than these postings)
    monkeypatch.setattr(bm25_module, "CHUNK_POSTINGS", 0)
    assert plan_of(engine, buckets, "alpha bravo", filter="bucket < 5", exact_threshold=10) in ("impact", "dense")
    # ... unless too few seeds would pass the filter to bound theta at this depth.
    monkeypatch.setattr(bm25_module, "DENSE_SEEDS", 40)
    assert plan_of(engine, buckets, "alpha bravo", filter="bucket < 5", exact_threshold=10) == "admitted"
    assert plan_of(engine, buckets, "alpha bravo", filter="bucket < 5", exact_threshold=10, depth=5) in (
        "impact",
        "dense",
    )
    # Scoring the admitted chunks would read more than the postings: the postings' plans.
    monkeypatch.setattr(bm25_module, "CHUNK_POSTINGS", 10**12)
    assert plan_of(engine, buckets, "alpha bravo", filter="bucket < 1") in ("impact", "dense")


@pytest.mark.usefixtures("no_full_sum")
def test_admitted_plan_reads_no_postings(engine: Engine, buckets: str) -> None:
    text, params = engine.search_sql(buckets, "alpha bravo", mode="lexical", filter="bucket < 1")
    sid = engine.collection(buckets).active_snapshot_id
    assert params["bm25_plan"] == "admitted"
    assert "adm AS MATERIALIZED" in text and f'"postings_{sid}"' not in text


@pytest.mark.usefixtures("no_full_sum")
@pytest.mark.parametrize("expr", FILTERS)
@pytest.mark.parametrize("depth", [1, 5, 40])
def test_admitted_plan_equals_the_reference_and_the_other_plans(
    engine: Engine, buckets: str, expr: str, depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_admitted(monkeypatch)
    for q in QUERIES:
        assert plan_of(engine, buckets, q, filter=expr) == "admitted"
        got = lexical(engine, buckets, q, depth=depth, filter=expr)
        everything = reference_bm25(engine, buckets, q, depth=1000)
        assert_same(got, [h for h in everything if in_bucket(h[0], expr)][:depth])
        with monkeypatch.context() as m:
            m.setattr(bm25_module, "CHUNK_POSTINGS", 10**12)
            assert plan_of(engine, buckets, q, filter=expr) != "admitted"
            assert got == lexical(engine, buckets, q, depth=depth, filter=expr)  # bit for bit


@pytest.mark.usefixtures("no_full_sum")
def test_admitted_plan_honours_the_time_predicate(
    engine: Engine, buckets: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_admitted(monkeypatch)
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for q in QUERIES:
        assert plan_of(engine, buckets, q, filter="bucket < 3", as_of=when) == "admitted"
        for depth in (1, 10):
            got = lexical(engine, buckets, q, depth=depth, as_of=when, filter="bucket < 3")
            everything = reference_bm25(engine, buckets, q, depth=1000, as_of=when)
            assert_same(got, [h for h in everything if in_bucket(h[0], "bucket < 3")][:depth])
            assert all(int(d[3:]) % 7 != 0 for d, _, _ in got)  # out-of-force documents never come back


@pytest.mark.usefixtures("no_full_sum")
def test_admitted_chunks_without_the_query_terms_return_nothing(
    engine: Engine, buckets: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_admitted(monkeypatch)
    # "bucket = 11" admits no chunk: an empty answer, not an error.
    assert plan_of(engine, buckets, "alpha bravo", filter="bucket = 11") == "admitted"
    assert engine.search(buckets, "alpha bravo", mode="lexical", k=5, filter="bucket = 11").hits == []
