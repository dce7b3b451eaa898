"""AsyncEngine: the same results as Engine, byte for byte, over psycopg's async pool.

Every test drives the AsyncEngine with ``asyncio.run`` (pytest-asyncio is not in the
environment) against the session's real embedded PostgreSQL.  The AsyncEngine is
built over the session Engine (``AsyncEngine.over``), as the HTTP server builds it,
except where the constructor itself is under test.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pytest

from fakes import HashEmbedder, use_hash_embedder
from ranklock import (
    AsyncEngine,
    DatabaseUnavailable,
    Document,
    Engine,
    NotFound,
    QueryError,
    RanklockError,
    SearchResult,
)

T = TypeVar("T")

FIELDS = ["years_exp:int!", "location:keyword"]
DOCS = [
    Document(
        "a1",
        "Volcano field guide",
        "Lava flows and volcano craters across the island, a guide for hikers.",
        {"years_exp": 3, "location": "Lisbon", "effective_from": "2020-01-01T00:00:00Z"},
    ),
    Document(
        "a2",
        "Ocean tides",
        "Tides rise and fall with the moon; the volcano island sees strong tides.",
        {"years_exp": 7, "location": "Berlin", "effective_from": "2021-01-01T00:00:00Z"},
    ),
    Document(
        "a3",
        "Lava lamp history",
        "A lava lamp is not a volcano, though its wax flows like lava.",
        {"years_exp": 5, "location": "Lisbon", "effective_to": "2022-01-01T00:00:00Z"},
    ),
    Document("a4", "Mountain huts", "Huts on the mountain trail offer hikers shelter and tea.", {"years_exp": 1}),
    Document("a5", "Crater lakes", "Crater lakes fill old volcano craters with rain water.", {"years_exp": 9}),
]
QUERIES = ["lava volcano", "volcano craters", "tides moon", "hikers shelter", "crater lakes rain"]


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    """One collection for the module (the tests only read it)."""
    name = "t_async_engine_module"
    emb = use_hash_embedder(engine)
    engine.ingest(name, DOCS, replace=True, create={"fields": FIELDS, "embedder": emb})
    return name


def run_async(engine: Engine, body: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Run ``body`` with an AsyncEngine over ``engine`` in a fresh event loop, closing its pool in that loop."""

    async def main() -> T:
        async with AsyncEngine.over(engine) as aeng:
            return await body(aeng)

    return asyncio.run(main())


@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid"])
def test_search_is_byte_identical_to_the_sync_engine(engine: Engine, coll: str, mode: str) -> None:
    kwargs: dict[str, Any] = {
        "k": 3,
        "mode": mode,
        "filter": 'location = "Lisbon" or years_exp >= 7',
        "as_of": "2021-06-01T00:00:00Z",
    }
    sync = engine.search(coll, "lava volcano", **kwargs)
    got = run_async(engine, lambda a: a.search(coll, "lava volcano", **kwargs))
    assert got.to_json() == sync.to_json()
    # The filter and as_of were applied (not a vacuous equality): a4 fails the filter.
    assert got.matching_count == 4 and len(got.hits) == 3
    assert {h.doc_id for h in got.hits} <= {"a1", "a2", "a3", "a5"}
    assert got.served_by == "primary" and got.query_id is not None and got.query_id != sync.query_id


def test_search_sql_is_the_sync_engines(engine: Engine, coll: str) -> None:
    kwargs: dict[str, Any] = {"k": 4, "mode": "hybrid", "filter": "years_exp >= 3"}
    text, params = run_async(engine, lambda a: a.search_sql(coll, "volcano craters", **kwargs))
    sync_text, sync_params = engine.search_sql(coll, "volcano craters", **kwargs)
    assert text == sync_text and sorted(params) == sorted(sync_params)
    for key, value in params.items():
        # The query vector is a numpy array (compared element-wise); every other value is plain.
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, sync_params[key]), key
        else:
            assert value == sync_params[key], key


def test_twenty_concurrent_searches_equal_sequential_ones(engine: Engine, coll: str) -> None:
    requests = [(QUERIES[i % len(QUERIES)], ["lexical", "semantic", "hybrid"][i % 3]) for i in range(20)]
    sequential = [engine.search(coll, q, k=3, mode=m).to_json() for q, m in requests]

    async def body(aeng: AsyncEngine) -> list[str]:
        results = await asyncio.wait_for(
            asyncio.gather(*(aeng.search(coll, q, k=3, mode=m) for q, m in requests)), timeout=120
        )
        # Twenty searches shared the pool: it never held more connections than its limit.
        assert 1 <= len(aeng.adb.backend_pids()) <= aeng.adb.max_size
        return [r.to_json() for r in results]

    assert run_async(engine, body) == sequential


def _refusal(call: Callable[[], object]) -> RanklockError:
    with pytest.raises(RanklockError) as exc:
        call()
    return exc.value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "fuzzy"},
        {"k": 0},
        {"as_of": "yesterday"},
        {"filter": "salary > 3"},
        {"snapshot": 999_999_999},
    ],
    ids=["mode", "k", "as_of", "filter", "snapshot"],
)
def test_bad_input_raises_the_sync_engines_error(engine: Engine, coll: str, kwargs: dict[str, Any]) -> None:
    sync = _refusal(lambda: engine.search(coll, "lava", **kwargs))
    got = _refusal(lambda: run_async(engine, lambda a: a.search(coll, "lava", **kwargs)))
    assert (type(got), str(got)) == (type(sync), str(sync))


def test_unknown_collection_is_the_same_not_found(engine: Engine) -> None:
    sync = _refusal(lambda: engine.search("t_no_such_async", "lava"))
    got = _refusal(lambda: run_async(engine, lambda a: a.search("t_no_such_async", "lava")))
    assert isinstance(got, NotFound) and str(got) == str(sync)
    assert str(got).startswith("no collection named 't_no_such_async'; existing: ")


def test_reads_return_what_the_sync_engine_returns(engine: Engine, coll: str) -> None:
    async def body(aeng: AsyncEngine) -> tuple[Any, ...]:
        return (
            await aeng.collection(coll),
            await aeng.collections(),
            await aeng.document(coll, "a2"),
            await aeng.list_snapshots(coll),
        )

    info, listed, doc, snapshots = run_async(engine, body)
    assert info == engine.collection(coll)
    assert listed == engine.collections()
    assert doc == engine.document(coll, "a2") and doc.title == "Ocean tides"
    assert snapshots == engine.list_snapshots(coll)
    missing = _refusal(lambda: run_async(engine, lambda a: a.document(coll, "zz")))
    assert str(missing) == (
        f"collection {coll!r} has no document 'zz' in snapshot {info.active_snapshot_id}; "
        "use a doc_id from a search hit of that snapshot."
    )


def test_replay_of_a_logged_search_is_identical(engine: Engine, coll: str) -> None:
    logged = run_async(engine, lambda a: a.search(coll, "tides moon", k=3, filter="years_exp >= 3"))
    assert logged.query_id is not None
    query_id = logged.query_id
    report = run_async(engine, lambda a: a.replay(query_id))
    assert report.identical and report.differences == []
    assert report.to_dict() == engine.replay(query_id).to_dict()
    bad = _refusal(lambda: run_async(engine, lambda a: a.replay(0)))
    assert isinstance(bad, QueryError) and str(bad) == "query id must be a positive integer, got 0."


class ThreadRecordingEmbedder(HashEmbedder):
    """A HashEmbedder that notes which thread each query embedding ran on."""

    def __init__(self, id: str) -> None:
        super().__init__(id)
        self.threads: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.threads.append(threading.get_ident())
        return super().embed(texts)


def test_query_embedding_runs_off_the_event_loop(engine: Engine, cname: str) -> None:
    emb = ThreadRecordingEmbedder("test:hash-8-threads")
    engine.embedders.register(emb)
    engine.ingest(cname, DOCS[:2], create={"embedder": emb.id})
    emb.threads.clear()

    async def body(aeng: AsyncEngine) -> int:
        # A query text never embedded before: the embedding cache cannot answer it.
        await aeng.search(cname, f"volcano tides {time.time_ns()}", k=2, mode="semantic")
        return threading.get_ident()

    loop_thread = run_async(engine, body)
    assert len(emb.threads) == 1 and emb.threads[0] != loop_thread


def _backends(engine: Engine, pids: list[int]) -> list[int]:
    rows = engine.db.fetchall("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s) ORDER BY pid", [pids])
    return [r["pid"] for r in rows]


def test_close_releases_every_connection(engine: Engine, coll: str) -> None:
    async def body() -> tuple[list[int], list[int]]:
        aeng = AsyncEngine.over(engine)
        await asyncio.gather(*(aeng.search(coll, q, k=2) for q in QUERIES))
        pids = aeng.adb.backend_pids()
        await aeng.close()
        return pids, aeng.adb.backend_pids()

    pids, left = asyncio.run(body())
    assert pids and left == []
    deadline = time.monotonic() + 10  # a backend ends a moment after its client hangs up
    while _backends(engine, pids):
        assert time.monotonic() < deadline, _backends(engine, pids)
        time.sleep(0.05)
    assert engine.search(coll, "lava volcano", k=1).hits  # the sync engine it was built over still serves


def test_a_closed_async_engine_says_so(engine: Engine, coll: str) -> None:
    async def body() -> None:
        aeng = AsyncEngine.over(engine)
        await aeng.close()
        await aeng.search(coll, "lava")

    err = _refusal(lambda: asyncio.run(body()))
    assert isinstance(err, DatabaseUnavailable)
    assert str(err) == "the async connection pool is closed; open a new AsyncEngine."


def test_constructor_takes_the_engines_arguments_and_opens_off_the_loop(engine: Engine, coll: str) -> None:
    async def main() -> tuple[list[str], str]:
        async with AsyncEngine(dsn=engine.db.dsn, embedder=HashEmbedder(), log_queries=False) as aeng:
            names = [c.name for c in await aeng.collections()]
            res = await aeng.search(coll, "lava volcano", k=2, mode="hybrid")
            return names, res.to_json()

    names, got = asyncio.run(main())
    assert coll in names
    # log_queries=False: no query id, so compare with a sync search made the same way.
    with Engine(dsn=engine.db.dsn, embedder=HashEmbedder(), log_queries=False) as plain:
        assert got == plain.search(coll, "lava volcano", k=2, mode="hybrid").to_json()


def test_both_engines_send_the_same_statements(engine: Engine, coll: str) -> None:
    """One search path: a tracer hears the same statements, in the same order, from either engine."""
    heard: list[str] = []
    with Engine(
        dsn=engine.db.dsn, embedder=HashEmbedder(), log_queries=False, tracer=lambda q, _p: heard.append(q)
    ) as eng:
        kwargs: dict[str, Any] = {"k": 3, "mode": "hybrid", "filter": "years_exp >= 3"}
        eng.search(coll, "volcano craters", **kwargs)  # warm: the query vector and value counts now exist
        heard.clear()
        sync = eng.search(coll, "volcano craters", **kwargs)
        sync_statements = list(heard)

        async def body(aeng: AsyncEngine) -> SearchResult:
            await aeng.ping()  # the new pool's connection set-up (pgvector types, plan_cache_mode) is not the search
            heard.clear()
            return await aeng.search(coll, "volcano craters", **kwargs)

        got = run_async(eng, body)
    assert got.to_json() == sync.to_json()
    # A pool may open a connection in the background at any moment (its set-up statements are
    # heard too): compare what the searches sent.
    assert len(sync_statements) > 3 and _searching(heard) == _searching(sync_statements)


def _searching(statements: list[str]) -> list[str]:
    """``statements`` without a new connection's set-up (pgvector's type lookup, plan_cache_mode)."""
    return [q for q in statements if "plan_cache_mode" not in q and "pg_type" not in q]


def test_http_server_keeps_one_pool_for_its_lifespan_and_closes_it(engine: Engine, coll: str) -> None:
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    aeng = AsyncEngine.over(engine)
    params = {"collection": coll, "q": "lava volcano", "k": 2, "mode": "lexical"}
    with TestClient(create_app(aeng)) as client:  # runs the lifespan, as uvicorn does
        first = client.get("/api/search", params=params)
        pids = aeng.adb.backend_pids()
        second = client.get("/api/search", params=params)
        assert aeng.adb.backend_pids() == pids and pids  # the same pooled connections served both
    assert first.status_code == second.status_code == 200
    assert [h["doc_id"] for h in first.json()["hits"]] == [h.doc_id for h in engine.search(coll, **_q(params)).hits]
    assert aeng.adb.backend_pids() == []  # shutdown closed the pool
    # Without a lifespan (an in-process client without `with`), each request's loop gets its own pool.
    r = TestClient(create_app(aeng)).get("/api/search", params=params)
    assert r.status_code == 200 and aeng.adb.backend_pids() == []


def _q(params: dict[str, Any]) -> dict[str, Any]:
    return {"query": params["q"], "k": params["k"], "mode": params["mode"]}


def test_the_derived_twins_write_and_read_as_the_engines_methods(engine: Engine, cname: str) -> None:
    """Issue 37: every public Engine method has an awaitable twin; the writes and the snapshot reads run here."""
    emb = use_hash_embedder(engine)

    async def body(aeng: AsyncEngine) -> tuple[Any, ...]:
        # ingest and create_collection spell out Engine's keywords (no **kwargs): create=, replace=, ...
        first = await aeng.ingest(cname, DOCS[:3], create={"fields": FIELDS, "embedder": emb})
        second = await aeng.ingest(cname, DOCS[3:])
        deleted = await aeng.delete(cname, ["a1"])
        merged = await aeng.merge(cname, everything=True)
        return (
            first,
            second,
            deleted,
            merged,
            await aeng.snapshot_info(cname),
            await aeng.manifest(cname),
            await aeng.diff_snapshots(cname, first.snapshot_id, deleted.snapshot_id),
            await aeng.replica_status(),
            await aeng.logs_status(),
        )

    first, second, deleted, merged, info, manifest, diff, replicas, logs = run_async(engine, body)
    assert (first.documents, first.added, second.documents, second.added) == (3, 3, 5, 2)
    assert deleted.deleted == ("a1",) and deleted.parent_id == second.snapshot_id
    assert merged.snapshot_id is not None and merged.segments
    assert info == engine.snapshot_info(cname) and info.id == merged.snapshot_id
    assert manifest == engine.manifest(cname)
    assert diff == engine.diff_snapshots(cname, first.snapshot_id, deleted.snapshot_id)
    assert diff.removed == ("a1",) and set(diff.added) == {"a4", "a5"}
    assert [r.node for r in replicas] == [r.node for r in engine.replica_status()] == ["primary"]
    assert set(logs) == {"query_log", "answer_log"}
    assert [h.doc_id for h in engine.search(cname, "crater lakes", k=5).hits if h.doc_id == "a1"] == []


def test_a_derived_twin_raises_the_engines_error(engine: Engine, cname: str) -> None:
    async def body(aeng: AsyncEngine) -> Any:
        return await aeng.ingest(cname, [Document("e1", "", "   ", {})])

    err = _refusal(lambda: run_async(engine, body))
    sync = _refusal(lambda: engine.ingest(cname, [Document("e1", "", "   ", {})]))
    assert type(err) is type(sync) and str(err) == str(sync)
    assert str(err) == (
        f"this ingest would make a snapshot of {cname!r} with no documents: it holds no document with text; "
        "document 'e1' had empty text and was skipped. Nothing was changed. Check the input file, or pass --allow-empty "
        "(allow_empty=True) to make an empty snapshot on purpose."
    )
