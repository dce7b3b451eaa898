"""matching_count, complete and truncation: the strategy per query, the short index, the exact fallback."""

from __future__ import annotations

from typing import Any

import pytest

from ranklock import ChunkerParams, Document, Engine
from test_filters import use_hash_embedder


@pytest.fixture
def hnsw_coll(engine: Engine, cname: str) -> str:
    emb = use_hash_embedder(engine)
    engine.create_collection(
        cname, fields=["n:int!", "tag:keyword"], embedder=emb, index_params={"m": 4, "ef_construction": 16}
    )
    engine.ingest(
        cname,
        [Document(f"d{i:03d}", "", f"item {i} text", {"n": i, "tag": "odd" if i % 2 else "even"}) for i in range(120)],
    )
    return cname


@pytest.fixture
def big_hnsw(engine: Engine, cname: str) -> str:
    # Large enough that the planner walks the HNSW index rather than sorting a seq scan.
    emb = use_hash_embedder(engine)
    engine.create_collection(
        cname, fields=["n:int!", "tag:keyword"], embedder=emb, index_params={"m": 4, "ef_construction": 16}
    )
    engine.ingest(
        cname,
        [Document(f"d{i:04d}", "", f"item {i} text", {"n": i, "tag": "odd" if i % 2 else "even"}) for i in range(2000)],
    )
    return cname


def test_strategy_follows_selectivity(engine: Engine, hnsw_coll: str) -> None:
    small = engine.search(hnsw_coll, "item", k=5, mode="semantic", filter="n < 10", exact_threshold=50)
    assert small.params["vector_strategy"] == "exact"
    assert (small.params["ef_search"], small.params["max_scan_tuples"]) == (None, None)
    big = engine.search(hnsw_coll, "item", k=5, mode="semantic", filter="n < 100", exact_threshold=50)
    assert big.params["vector_strategy"] == "hnsw"
    assert big.params["iterative_scan"] == "strict_order"
    assert (big.params["ef_search"], big.params["max_scan_tuples"]) == (200, 20000)
    assert big.params["matching_chunks"] == 100 and big.params["vector_fallback"] is None
    # a full count from an ANN index: approximate order, said so
    assert (big.matching_count, big.complete, big.truncation, len(big.hits)) == (100, False, "approximate_index", 5)
    assert (small.complete, small.truncation) == (True, None)
    sql_text, _ = engine.search_sql(hnsw_coll, "item", k=5, mode="semantic", filter="n < 10", exact_threshold=50)
    assert "ORDER BY c.embedding <=>" not in sql_text  # the exact scan the search would run
    unfiltered = engine.search(hnsw_coll, "item", k=5, mode="semantic")
    assert unfiltered.matching_count == 120 and unfiltered.complete is True


def test_ef_search_is_chosen_from_the_filters_selectivity(engine: Engine, hnsw_coll: str) -> None:
    # The candidate list is sized so the chunks passing the filter alone can fill
    # the branch's fetch (depth 40 here): ef = max(200, ceil(40 / selectivity)), at most 1000.
    def ef(flt: str | None, **kw: object) -> object:
        res = engine.search(hnsw_coll, "item", k=5, mode="semantic", filter=flt, exact_threshold=0, **kw)
        assert res.params["vector_strategy"] == "hnsw"
        return res.params["ef_search"]

    assert ef(None) == 200  # unfiltered: the base list
    assert ef("n < 100") == 200  # 100 of 120 pass: 40 / 0.83 = 48, below the base
    assert ef("n < 10") == 480  # 10 of 120: 40 / (10 / 120)
    assert ef("n < 2") == 1000  # 40 / (2 / 120) = 2400, capped at pgvector's maximum
    assert ef("n < 10", ef_search=50) == 50  # an explicit value is the caller's
    # the same query always gets the same list: the count that sizes it is exact
    assert {ef("n < 10") for _ in range(3)} == {480}


def test_short_index_is_flagged_or_rescanned(engine: Engine, big_hnsw: str) -> None:
    hnsw_coll = big_hnsw
    # iterative scan off and ef_search 1: the index hands over one candidate,
    # the filter keeps at most that one, far fewer than min(depth, 1000).
    knobs = {"exact_threshold": 0, "iterative_scan": "off", "ef_search": 1}
    flagged = engine.search(
        hnsw_coll, "item", k=10, mode="semantic", filter='tag = "odd"', exact_fallback=False, **knobs
    )
    assert flagged.matching_count == 1000
    assert (flagged.complete, flagged.truncation) == (False, "index_scan_budget")
    assert len(flagged.hits) < 10
    assert any("index returned" in w for w in flagged.warnings)
    rescued = engine.search(hnsw_coll, "item", k=10, mode="semantic", filter='tag = "odd"', **knobs)
    assert (rescued.complete, rescued.truncation, len(rescued.hits)) == (True, None, 10)
    assert rescued.params["vector_strategy"] == "exact"
    assert rescued.params["vector_fallback"].startswith("index_scan_budget: hnsw returned ")
    exact = engine.search(hnsw_coll, "item", k=10, mode="semantic", filter='tag = "odd"')
    assert [h.doc_id for h in rescued.hits] == [h.doc_id for h in exact.hits]


def test_fusion_depth_below_k_is_flagged(engine: Engine, hnsw_coll: str) -> None:
    res = engine.search(hnsw_coll, "zzz item", k=20, mode="hybrid", filter="n < 30", depth=5)
    assert res.matching_count == 30
    assert len(res.hits) <= 10
    assert (res.complete, res.truncation) == (False, "fusion_depth")
    ok = engine.search(hnsw_coll, "zzz item", k=20, mode="hybrid", filter="n < 30", depth=20)
    assert (ok.complete, len(ok.hits)) == (True, 20)


def test_matching_count_counts_documents_not_chunks(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    engine.create_collection(cname, fields=["n:int!"], embedder=emb, chunker=ChunkerParams(window=16, overlap=0))
    docs = [Document(f"d{i}", "", " ".join(f"w{j}" for j in range(10 + 20 * i)), {"n": i}) for i in range(6)]
    engine.ingest(cname, docs)
    res = engine.search(cname, "w1", k=10, mode="semantic", filter="n >= 2")
    assert res.matching_count == 4
    assert res.params["matching_chunks"] > 4
    assert sorted(h.doc_id for h in res.hits) == ["d2", "d3", "d4", "d5"]
    assert res.complete is True


def test_matching_count_honours_as_of(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    engine.create_collection(cname, fields=["n:int!"], embedder=emb)
    docs = [
        Document(
            "old",
            "",
            "policy text",
            {"n": 1, "effective_from": "2020-01-01T00:00:00Z", "effective_to": "2023-01-01T00:00:00Z"},
        ),
        Document("new", "", "policy text", {"n": 1, "effective_from": "2023-01-01T00:00:00Z"}),
        Document("any", "", "policy text", {"n": 2}),
    ]
    engine.ingest(cname, docs)
    res = engine.search(cname, "policy", k=10, as_of="2021-06-01T00:00:00Z")
    assert (res.matching_count, sorted(h.doc_id for h in res.hits)) == (2, ["any", "old"])
    res = engine.search(cname, "policy", k=10, filter="n = 1", as_of="2024-06-01T00:00:00Z")
    assert (res.matching_count, [h.doc_id for h in res.hits], res.complete) == (1, ["new"], True)


def _count_spec(layout: Any, f: Any) -> Any:
    """The spec a completeness count reads: the layout and the compiled filter (nothing of a query)."""
    from ranklock.search.spec import SearchSpec

    return SearchSpec(
        layout=layout,
        mode="semantic",
        k=1,
        depth=1,
        rrf_k=60,
        query="",
        language="",
        accent="",
        filter_sql=f.sql,
        filter_params=f.params,
    )


def test_value_counts_agree_with_counting_rows(engine: Engine, hnsw_coll: str) -> None:
    from psycopg import sql

    from ranklock.search.filters import compile_filter
    from ranklock.search.scope import count_matching_sql
    from ranklock.snapshot.segments import read_layout

    coll = engine.collection(hnsw_coll)
    sid = int(coll.active_snapshot_id or 0)
    for flt in ['tag = "odd"', "n < 17", "not (n between 3 and 90)", "tag is null", 'tag in ("even", "x") or n > 5']:
        res = engine.search(hnsw_coll, "item", k=1, mode="semantic", filter=flt)
        f = compile_filter(coll, flt)
        spec = _count_spec(read_layout(engine.db, sid), f)
        q, p = count_matching_sql(spec, {})
        row = engine.db.fetchone(q, p)
        assert row is not None and res.matching_count == row["documents"], flt
    # The ingest counted every typed field's values in its segment (a value a row) and said so beside it.
    counted = engine.db.fetchall(
        sql.SQL('SELECT "#field" AS f, count(*) AS n FROM {} GROUP BY 1 ORDER BY 1').format(
            sql.Identifier("ranklock_data", f"counts_{sid}")
        )
    )
    assert counted == [{"f": "n", "n": 120}, {"f": "tag", "n": 2}]
    recorded = engine.db.fetchone("SELECT stats -> 'counts' AS c FROM ranklock.segments WHERE id = %s", [sid])
    assert recorded == {"c": {"n": "values", "tag": "values"}}


def _writes_to_data(seen: list[str]) -> list[str]:
    """The statements of ``seen`` that create or write a table of the data schema."""
    return [q for q in seen if q.startswith(('INSERT INTO "ranklock_data".', "CREATE TABLE", "ALTER TABLE"))]


def test_search_sql_writes_nothing_and_is_the_statement_search_runs(engine: Engine, cname: str) -> None:
    from fakes import use_hash_embedder as register

    register(engine)
    engine.create_collection(cname, fields=["n:int!", "tag:keyword"], embedder="test:hash-8")
    engine.ingest(
        cname,
        [Document(f"d{i:03d}", "", f"item {i} text", {"n": i, "tag": "odd" if i % 2 else "even"}) for i in range(40)],
    )
    query, flt = "item text never embedded before", "tag = 'odd'"

    def cached_vectors() -> int:
        row = engine.db.fetchone("SELECT count(*) AS n FROM ranklock.embedding_cache")
        assert row is not None
        return int(row["n"])

    before = cached_vectors()
    seen: list[str] = []
    traced = Engine(dsn=engine.db.dsn, tracer=lambda q, _p: seen.append(q), log_queries=engine.settings.log_queries)
    try:
        register(traced)
        seen.clear()  # opening the engine checked the migrations
        text, params = traced.search_sql(cname, query, k=5, filter=flt)
        # Read-only: no embedding-cache row for the new query, no table made or written.
        assert cached_vectors() == before
        assert _writes_to_data(seen) == [] and not [q for q in seen if q.startswith("INSERT")]
        # search() (which stores the new vector) runs exactly that statement with those values, and makes
        # no table either: the value counts the filter reads were made by the ingest.
        seen.clear()
        res = traced.search(cname, query, k=5, filter=flt)
    finally:
        traced.close()
    assert text in seen
    assert _writes_to_data(seen) == []
    assert cached_vectors() == before + 1
    assert res.matching_count == 20 and len(res.hits) == 5
    again, again_params = engine.search_sql(cname, query, k=5, filter=flt)
    assert again == text
    assert again_params.keys() == params.keys()
    assert [v for k, v in again_params.items() if k != "qvec"] == [v for k, v in params.items() if k != "qvec"]
    assert list(again_params["qvec"]) == list(params["qvec"])


def test_value_counts_are_per_segment_and_a_write_counts_only_what_it_wrote(engine: Engine, cname: str) -> None:
    """A snapshot's counts are its segments' summed, less its dead rows': each write counts the segment it
    wrote and its snapshot's dead rows, no row of a segment it left unchanged; a search only reads them."""
    from ranklock.search.filters import compile_filter
    from ranklock.search.scope import count_matching_sql
    from ranklock.snapshot.segments import read_layout

    emb = use_hash_embedder(engine)
    engine.create_collection(
        cname, fields=["n:int!", "tag:keyword"], embedder=emb, chunker=ChunkerParams(window=16, overlap=0)
    )

    def doc(i: int, tag: str, version: int = 0) -> Document:
        # Several chunks each (window 16), so documents and chunks are counted apart.
        return Document(f"d{i:03d}", "", " ".join(f"w{j} v{version}" for j in range(5 + i % 20)), {"n": i, "tag": tag})

    engine.ingest(cname, [doc(i, "odd" if i % 2 else "even") for i in range(60)] + [doc(2, "x")])
    first = int(engine.collection(cname).active_snapshot_id or 0)
    flts = ['tag = "odd"', 'tag in ("x", "new")', "tag is null", "n < 30", "not (n between 3 and 50)"]
    # Writes: a tag changed, a document deleted, two added; then d002 changed twice with its tag kept, so
    # its two dead versions (two segments) hold one value: two documents to take off, not one.
    seen: list[str] = []
    writer = Engine(dsn=engine.db.dsn, tracer=lambda q, _p: seen.append(q), log_queries=False)
    try:
        use_hash_embedder(writer)
        writer.ingest(cname, [doc(1, "even", 1), doc(100, "odd"), doc(101, "new"), doc(2, "x", 1)])
        writer.delete(cname, ["d003"])
        writer.ingest(cname, [doc(2, "x", 2)])
    finally:
        writer.close()
    sid = int(engine.collection(cname).active_snapshot_id or 0)
    layout = read_layout(engine.db, sid)
    assert layout.ids[0] == first and len(layout.ids) == 3 and layout.dead_rows > 0
    made = [
        q
        for q in seen
        if q.startswith(('INSERT INTO "ranklock_data"."counts_', 'INSERT INTO "ranklock_data"."valuecounts_'))
        and "GROUP BY" in q
    ]
    tables = {q.split('"')[3] for q in made}
    # The counts of each new segment, and of each new snapshot's dead rows; never of the first segment.
    assert f"counts_{first}" not in tables
    assert {f"counts_{s}" for s in layout.ids[1:]} | {f"valuecounts_{sid}"} <= tables
    for q in made:
        table = q.split('"')[3]
        if table.startswith("counts_"):
            # A new segment's counts read its own chunk table; the dead rows' only the dead rows.
            assert f'FROM "ranklock_data"."chunks_{table.removeprefix("counts_")}" AS c GROUP BY' in q
        else:
            assert "JOIN ranklock.snapshot_dead_rows AS x" in q and "count(DISTINCT (c.seg, c.doc_id))" in q

    seen.clear()
    traced = Engine(dsn=engine.db.dsn, tracer=lambda q, _p: seen.append(q), log_queries=False)
    try:
        use_hash_embedder(traced)
        coll = traced.collection(cname)
        seen.clear()  # opening the engine checked the migrations
        for flt in flts:
            res = traced.search(cname, "w1", k=3, mode="semantic", filter=flt)
            f = compile_filter(coll, flt)
            spec = _count_spec(layout, f)
            q, p = count_matching_sql(spec, {"max_chunks_per_doc": 2})
            row = traced.db.fetchone(q, p)
            assert row is not None
            assert (res.matching_count, res.params["matching_chunks"]) == (row["documents"], row["chunks"]), flt
    finally:
        traced.close()
    assert _writes_to_data(seen) == []  # the searches only read
    # The one-field filters summed the value counts (no row of a chunk table counted).
    summed = [q for q in seen if '"#docs"' in q and "UNION ALL" in q]
    assert len(summed) >= 4


def test_a_purge_recounts_the_segments_it_edits(engine: Engine, hnsw_coll: str) -> None:
    """A purge edits a segment in place: its counts are dropped with the swap and made again from the
    rewritten tables, so the next filtered search sums the right counts."""
    flt = 'tag = "odd"'
    assert engine.search(hnsw_coll, "item", k=3, mode="semantic", filter=flt).matching_count == 60
    engine.purge(hnsw_coll, ["d001", "d003", "d004"])
    sid = engine.collection(hnsw_coll).active_snapshot_id
    assert engine.db.fetchone("SELECT stats -> 'counts' AS c FROM ranklock.segments WHERE id = %s", [sid]) == {
        "c": {"n": "values", "tag": "values"}
    }
    assert engine.search(hnsw_coll, "item", k=3, mode="semantic", filter=flt).matching_count == 58
    assert engine.search(hnsw_coll, "item", k=3, mode="semantic", filter='tag = "even"').matching_count == 59
