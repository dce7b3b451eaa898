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
from ranklock.search.bm25 import costs as bm25_module
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
    """Take the admitted plan under any constraint."""
    monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", ("admitted",))


def way_of(engine: Engine, collection: str, query: str, **kw: Any) -> str:
    """The plan a constrained search takes: ``admitted``, or the pruning plans' way of checking (``set``, ``probe``)."""
    _, params = engine.search_sql(collection, query, mode="lexical", **kw)
    return str(params["bm25_plan"] if params["bm25_plan"] == "admitted" else params.get("bm25_admit"))


@pytest.mark.usefixtures("no_full_sum")
def test_a_constraint_takes_the_cheapest_way(engine: Engine, buckets: str, monkeypatch: pytest.MonkeyPatch) -> None:
    when = datetime(2024, 1, 1, tzinfo=UTC)
    # No constraint: the postings' plans, nothing to check.
    assert plan_of(engine, buckets, "alpha bravo") in ("impact", "dense")
    assert way_of(engine, buckets, "alpha bravo") == "None"
    # On a corpus this small, scoring what a constraint admits costs less than the pruning plans' seeds and
    # probes alone (1,274 chunks scored): the admitted plan, under a filter or as_of alone.
    assert way_of(engine, buckets, "alpha bravo", filter="bucket < 1") == "admitted"
    assert way_of(engine, buckets, "alpha bravo", filter="bucket < 1", as_of=when) == "admitted"
    assert way_of(engine, buckets, "alpha bravo", as_of=when) == "admitted"
    # With a seed and a probe each, pruning costs less, and its seeds read so few postings that probing
    # each costs less than listing the admitted set ...
    for knob in ("DENSE_SEEDS", "SEED_PER_TERM", "DENSE_PROBE", "PROBE"):
        monkeypatch.setattr(bm25_module, knob, 1)
    assert way_of(engine, buckets, "alpha bravo", filter="bucket < 5") == "probe"
    # ... unless probes cost more than listing it once (the segments have filter tables).
    monkeypatch.setattr(bm25_module, "PROBE_POSTINGS", 10**6)
    assert way_of(engine, buckets, "alpha bravo", filter="bucket < 5") == "set"
    # A chunk scored for nothing: the admitted plan again.
    monkeypatch.setattr(bm25_module, "CHUNK_POSTINGS", 0)
    assert way_of(engine, buckets, "alpha bravo", filter="bucket < 5") == "admitted"


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
            m.setattr(bm25_module, "CONSTRAINED_WAYS", ("set", "probe"))
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
