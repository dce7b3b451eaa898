"""Sharded collections on a real local Citus cluster (a coordinator and 2 workers): the same answers as one node.

Every comparison is between a collection on the embedded server (``engine``) and the same documents,
written by the same sequence of ingests and deletes, in a collection of the cluster whose segments are
distributed over its workers (ranklock.snapshot.shards).  Hits are compared whole (ids, chunks, every
branch's rank and raw score, the fused score, offsets, text) together with ``matching_count``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from typer.testing import CliRunner

from fakes import HashEmbedder, resolve_hash_embedder_by_id
from ranklock import AsyncEngine, Document, Engine
from ranklock.cli import app
from ranklock.errors import ConfigError, DatabaseUnavailable, SnapshotError
from ranklock.search.fusion import settings_fetches
from ranklock.search.pipeline import plan_steps
from ranklock.search.request import SearchRequest
from ranklock.snapshot.shards import MAX_SHARDS
from ranklock.store.cluster import LocalCluster
from ranklock.store.steps import run_steps

WORDS = ["citus", "shard", "worker", "vector", "lexeme", "merge", "replica", "snapshot", "segment", "tenant",
         "posting", "theta", "impact", "fusion", "ranker", "coordinator"]  # fmt: skip


def _docs(n: int, start: int = 0, tag: str = "") -> list[Document]:
    """Documents of a few repeated words: many equal scores, so ties are broken everywhere."""
    out = []
    for i in range(start, start + n):
        body = " ".join(WORDS[(i * j + j) % len(WORDS)] for j in range(1, 12 + i % 9))
        meta: dict[str, Any] = {"year": 2000 + i % 7, "team": "ab"[i % 2]}
        if i % 5 == 0:
            meta["effective_from"] = f"20{10 + i % 15:02d}-01-01T00:00:00Z"
        out.append(
            Document(f"d{i:04d}", f"{WORDS[i % len(WORDS)]} {WORDS[(i * 5) % len(WORDS)]}{tag}", body + tag, meta, {})
        )
    return out


CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("lexical", "shard merge tenant tenant", {}),
    ("semantic", "shard merge tenant", {}),
    ("hybrid", "shard merge tenant tenant", {}),
    ("lexical", "worker posting", {"filter": "year >= 2003"}),
    ("hybrid", "worker posting theta", {"filter": 'year >= 2003 and team = "b"'}),
    ("semantic", "coordinator impact", {"filter": "year = 2001"}),
    ("hybrid", "fusion ranker", {"as_of": "2018-06-01T00:00:00Z"}),
    ("lexical", '"shard merge" -tenant', {"query_syntax": "websearch"}),
    ("lexical", "replica snapshot", {"lexical_ranker": "ts_rank_cd"}),
    ("lexical", "replica snapshot segment", {"k1": 1.5, "b": 0.5}),
    ("hybrid", "citus citus lexeme", {"depth": 5}),
]


def _answers(eng: Engine, name: str) -> list[dict[str, Any]]:
    out = []
    for mode, query, kw in CASES:
        res = eng.search(name, query, k=15, mode=mode, **kw)
        out.append(
            {"hits": [h.model_dump() for h in res.hits], "matching": res.matching_count, "warnings": res.warnings}
        )
    return out


@pytest.fixture
def pair(citus_cluster: LocalCluster, engine: Engine, cname: str) -> Iterator[tuple[Engine, Engine]]:
    """(one node, the cluster) with the test embedder on both, and ``cname`` created by the same first ingest."""
    emb = HashEmbedder()
    on_cluster = Engine(dsn=citus_cluster.dsn, embedder=emb, log_queries=True)
    engine.embedders.register(emb)
    for eng in (engine, on_cluster):
        eng.ingest(cname, _docs(120), create={"embedder": emb.id, "index": "exact"})
    yield engine, on_cluster
    on_cluster.close()


def test_a_collection_on_a_cluster_is_sharded_and_answers_as_one_node(
    pair: tuple[Engine, Engine], citus_cluster: LocalCluster, cname: str
) -> None:
    one, cluster = pair
    info = cluster.collection(cname)
    # The default: two shards per worker; on one node, none.
    assert info.shards == 4 and one.collection(cname).shards is None
    manifest = cluster.manifest(cname)
    assert manifest["placement"] == {
        "engine": "citus",
        "shards": 4,
        "distribution_column": "doc_id",
        "reference_tables": ["terms", "dense"],
    }
    assert "placement" not in one.manifest(cname)
    seg = manifest["segmentation"]["segments"][0]["id"]
    with psycopg.connect(citus_cluster.dsn) as conn:
        placed = dict(
            conn.execute(
                "SELECT logicalrelid::text, partmethod::text || ':' || (SELECT count(*) FROM pg_dist_shard AS s "
                "WHERE s.logicalrelid = p.logicalrelid) FROM pg_dist_partition AS p "
                "WHERE logicalrelid::text LIKE %s",
                [f"ranklock_data.%\\_{seg}"],
            ).fetchall()
        )
        # The shards hold every row; the coordinator's own copies are empty.
        local = conn.execute(
            "SELECT pg_relation_size(%s::regclass) + pg_relation_size(%s::regclass)",
            [f"ranklock_data.chunks_{seg}", f"ranklock_data.postings_{seg}"],
        ).fetchone()
    assert placed == {
        f"ranklock_data.chunks_{seg}": "h:4",
        f"ranklock_data.forward_{seg}": "h:4",
        f"ranklock_data.postings_{seg}": "h:4",
        f"ranklock_data.terms_{seg}": "n:1",
        f"ranklock_data.dense_{seg}": "n:1",
    }
    assert local == (0,)
    # A single-field filter's count is read from the value counts, kept on the coordinator, as on one node.
    counts = cluster.rdb.fetchone("SELECT stats -> 'counts' AS c FROM ranklock.segments WHERE id = %s", [seg])
    assert counts is not None and counts["c"] == {"year": "values", "team": "values"}
    got, want = _answers(cluster, cname), _answers(one, cname)
    assert [len(a["hits"]) for a in got] == [len(a["hits"]) for a in want]
    assert all(a["hits"] for a in got[:7])
    assert got == want


def test_segments_dead_rows_and_a_merge_answer_as_one_node(pair: tuple[Engine, Engine], cname: str) -> None:
    """Writes add segments and mask replaced rows; a merge copies the live rows into one segment: same answers."""
    one, cluster = pair
    for eng in (one, cluster):
        eng.ingest(cname, _docs(30, start=100, tag=" tenant"))  # 20 replaced, 10 new: a second segment, dead rows
        eng.delete(cname, ["d0003", "d0004", "d0110"])
        eng.ingest(cname, _docs(5, start=300))
    layout = cluster.manifest(cname)["segmentation"]
    assert len(layout["segments"]) == 3 and layout["dead_rows"] > 0
    assert _answers(cluster, cname) == _answers(one, cname)
    for eng in (one, cluster):
        eng.merge(cname, everything=True)
    assert len(cluster.manifest(cname)["segmentation"]["segments"]) == 1
    assert _answers(cluster, cname) == _answers(one, cname)


@pytest.fixture
def levels_pair(citus_cluster: LocalCluster, engine: Engine, cname: str) -> Iterator[tuple[Engine, Engine]]:
    """(one node, the cluster) holding the same two segments (dead rows in the first), their impact quantiles at
    every 2nd, 4th, 8th ... posting, so the pruned plans read terms to many depths on small data."""
    import ranklock.snapshot.lexical_stats as stats_module

    emb = HashEmbedder()
    on_cluster = Engine(dsn=citus_cluster.dsn, embedder=emb, log_queries=True)
    engine.embedders.register(emb)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(stats_module, "LEVEL_BASE", 2)
        for eng in (engine, on_cluster):
            eng.ingest(cname, _docs(200), create={"embedder": emb.id, "index": "exact"})
            eng.ingest(cname, _docs(30, start=100, tag=" tenant"))
    yield engine, on_cluster
    on_cluster.close()


@pytest.mark.parametrize(
    ("plan", "knobs"),
    [
        ("full", {}),
        ("impact", {"FULL_SCAN_POSTINGS": 0, "DENSE_MAX_TERMS": 0}),
        ("impact", {"FULL_SCAN_POSTINGS": 0, "DENSE_MAX_TERMS": 0, "SEED_PER_TERM": 1}),
        (
            "impact",
            {"FULL_SCAN_POSTINGS": 0, "DENSE_MAX_TERMS": 0, "SEED_PER_TERM": 100_000, "DEEPER": 0, "SKIP_LEVEL": 0},
        ),
        ("dense", {"FULL_SCAN_POSTINGS": 0}),
        ("dense", {"FULL_SCAN_POSTINGS": 0, "DENSE_SEEDS": 1}),
        ("dense", {"FULL_SCAN_POSTINGS": 0, "DENSE_PROBE": 1}),
        ("admitted", {"FULL_SCAN_POSTINGS": 0, "CONSTRAINED_WAYS": ("admitted",)}),
        ("impact", {"FULL_SCAN_POSTINGS": 0, "DENSE_MAX_TERMS": 0, "CONSTRAINED_WAYS": ("probe",)}),
    ],
)
def test_every_plan_runs_on_each_shard_and_answers_as_one_node(
    levels_pair: tuple[Engine, Engine], cname: str, monkeypatch: pytest.MonkeyPatch, plan: str, knobs: dict[str, Any]
) -> None:
    """Each shard runs the one-node plan once, with the snapshot's statistics bound; the coordinator merges.

    Over two segments with dead rows, under filters and as_of, with seeds from one posting a term (theta often
    0: the fallback) to every posting; the match plan (websearch, other k1 and b) and ts_rank_cd in every run."""
    import ranklock.search.bm25.costs as bm25_module

    one, cluster = levels_pair
    assert cluster.manifest(cname)["segmentation"]["dead_rows"] > 0
    for name, value in knobs.items():
        monkeypatch.setattr(bm25_module, name, value)
    taken = set()
    for mode, query, kw in CASES:
        if mode == "semantic" or kw.get("query_syntax") or kw.get("lexical_ranker") or "k1" in kw:
            continue
        _, params = cluster.search_sql(cname, query, k=15, mode=mode, **kw)
        taken.add(params["bm25_plan"])
        # The snapshot's statistics travel to the shards bound: the plan's own and the query's terms.
        assert {"bm25_chunks", "bm25_avgdl", "bm25_qt", "bm25_qdf"} <= set(params)
    assert plan in taken, taken
    assert _answers(cluster, cname) == _answers(one, cname)


def _remote(dsn: str, text: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(worker port, command) of every command the coordinator sends to a node while it runs a statement."""
    got: list[tuple[str, str]] = []

    def notice(d: psycopg.errors.Diagnostic) -> None:
        m = re.search(r"on server \S+@127\.0\.0\.1:(\d+)", d.message_detail or "")
        if m and (d.message_primary or "").startswith("issuing "):
            got.append((m.group(1), (d.message_primary or "")[len("issuing ") :]))

    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        conn.add_notice_handler(notice)
        with conn.transaction():
            conn.execute("SET LOCAL citus.log_remote_commands = on")
            conn.execute(text, params)
    return got


def test_a_search_is_one_task_per_shard_then_a_fetch(pair: tuple[Engine, Engine], cname: str) -> None:
    """The query phase is one Citus task per shard (the shard runs every branch); the fetch reads the k hits."""
    one, cluster = pair
    for mode in ("lexical", "semantic", "hybrid"):
        text, params = cluster.search_sql(cname, "shard merge tenant", k=10, mode=mode, filter="year >= 2001")
        sent = _remote(cluster.rdb.dsn, text, params)
        queries = [port for port, cmd in sent if "ranklock.shard_search(" in cmd]
        fetches = [port for port, cmd in sent if "char_start, char_end, text FROM" in cmd]
        assert len(queries) == 4 and len(set(queries)) == 2, sent  # 4 shards on 2 workers
        assert 1 <= len(fetches) <= 4, sent
        res = cluster.search(cname, "shard merge tenant", k=10, mode=mode, filter="year >= 2001")
        want = one.search(cname, "shard merge tenant", k=10, mode=mode, filter="year >= 2001")
        assert [h.model_dump() for h in res.hits] == [h.model_dump() for h in want.hits]


def test_a_snapshot_placed_before_per_shard_search_says_how_to_place_it(
    pair: tuple[Engine, Engine], cname: str
) -> None:
    _, cluster = pair
    sid = cluster.collection(cname).active_snapshot_id
    cluster.rdb.execute("UPDATE ranklock.snapshots SET stats = stats - 'shard_search' WHERE id = %s", [sid])
    with pytest.raises(SnapshotError) as exc:
        cluster.search(cname, "shard merge", k=10)
    assert str(exc.value) == (
        f"snapshot {sid} was placed on the cluster before searches ran on each shard (issue 46), so it has no "
        "search anchors or placed dead rows. Write it once more: `ranklock snapshot merge COLLECTION --all` "
        "(or an ingest that changes a document) makes a snapshot placed for them."
    )
    cluster.merge(cname, everything=True)
    assert cluster.search(cname, "shard merge", k=10).hits


def test_snapshots_rollback_and_replay_work_on_the_cluster(pair: tuple[Engine, Engine], cname: str) -> None:
    one, cluster = pair
    first = cluster.collection(cname).active_snapshot_id
    before = cluster.search(cname, "shard merge", k=10)
    cluster.ingest(cname, _docs(10, start=500, tag=" merge merge"))
    after = cluster.search(cname, "shard merge", k=10)
    assert [h.doc_id for h in after.hits] != [h.doc_id for h in before.hits]
    # An older snapshot still answers as it did; a rollback makes it the active one again.
    pinned = cluster.search(cname, "shard merge", k=10, snapshot=first)
    assert [h.model_dump() for h in pinned.hits] == [h.model_dump() for h in before.hits]
    cluster.rollback(cname)
    again = cluster.search(cname, "shard merge", k=10)
    assert [h.model_dump() for h in again.hits] == [h.model_dump() for h in before.hits]
    # The query log is on the coordinator; a replay reruns the logged query on its snapshot.
    assert after.query_id is not None
    replay = cluster.replay(after.query_id)
    assert replay.identical is True
    # The one-node collection, written the same way, answers the pinned query the same.
    assert [h.model_dump() for h in one.search(cname, "shard merge", k=10).hits] == [
        h.model_dump() for h in before.hits
    ]


def test_the_scan_settings_reach_the_workers(pair: tuple[Engine, Engine], cname: str) -> None:
    """set_config changes the coordinator only; the sharded settings statement reaches every shard's transaction."""
    _, cluster = pair
    req = SearchRequest.of(cname, "shard merge", k=10, mode="semantic", ef_search=123)
    services = cluster.searching.services()

    def steps() -> Any:
        ctx = yield from services.contexts.steps(cname, None)
        plan = yield from plan_steps(services, ctx, req, timeout=None, store_vector=False)
        return plan.spec

    spec = run_steps(cluster.rdb, steps())
    statements = settings_fetches(spec)
    assert all(f.params is None for f in statements)
    seg = spec.layout.segments[0].id
    probe = (
        "SELECT string_agg(DISTINCT current_setting('work_mem'), ',') "
        f"FROM (SELECT doc_id FROM ranklock_data.chunks_{seg} GROUP BY doc_id) AS d"
    )
    with psycopg.connect(cluster.rdb.dsn) as conn:
        with conn.transaction():
            default = conn.execute(probe).fetchone()
        with conn.transaction():
            for f in statements:
                conn.execute(f.query)  # type: ignore[arg-type]
            set_here = conn.execute(probe).fetchone()
    assert default is not None and default[0] != "64MB"
    assert set_here == ("64MB",)


def test_shards_asked_for_where_there_is_no_cluster_or_out_of_range(
    engine: Engine, pair: tuple[Engine, Engine], cname: str
) -> None:
    _, cluster = pair
    emb = HashEmbedder()
    with pytest.raises(ConfigError) as exc:
        engine.create_collection(f"{cname}_n", embedder=emb.id, shards=4)
    assert str(exc.value) == (
        "shards=4 needs a Citus cluster, and this database has no Citus extension. Point RANKLOCK_DSN at a "
        "coordinator with workers (`ranklock db cluster create --workers 2` makes a local one), or leave "
        "shards unset."
    )
    for bad in (-1, MAX_SHARDS + 1):
        with pytest.raises(ConfigError, match=f"shards={bad} is out of range; use 1 to {MAX_SHARDS}"):
            cluster.create_collection(f"{cname}_x", embedder=emb.id, shards=bad)
    with pytest.raises(ConfigError, match="shards must be a whole number, not 'four'"):
        cluster.create_collection(f"{cname}_x", embedder=emb.id, shards="four")  # type: ignore[arg-type]
    # 0: ordinary tables even on a cluster; an explicit count is kept.
    assert cluster.create_collection(f"{cname}_l", embedder=emb.id, shards=0).shards is None
    assert cluster.create_collection(f"{cname}_6", embedder=emb.id, shards=6).shards == 6


def test_a_killed_worker_fails_the_search_naming_it_and_an_ingest_leaves_nothing_half_visible(
    pair: tuple[Engine, Engine], citus_cluster: LocalCluster, cname: str
) -> None:
    _, cluster = pair
    before = cluster.search(cname, "shard merge", k=10)
    active = cluster.collection(cname).active_snapshot_id
    worker = citus_cluster.nodes()[2]
    server = worker.server(citus_cluster.home)
    pid = server.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    try:
        deadline = time.monotonic() + 10
        while server.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        for mode in ("lexical", "semantic", "hybrid"):
            with pytest.raises(DatabaseUnavailable) as exc:
                cluster.search(cname, "shard merge", k=10, mode=mode)
            assert f"127.0.0.1:{worker.port}" in str(exc.value)
        with pytest.raises((DatabaseUnavailable, SnapshotError)) as exc2:
            cluster.ingest(cname, _docs(5, start=900))
        assert f"127.0.0.1:{worker.port}" in str(exc2.value)
    finally:
        citus_cluster.start()
    # The failed write left the active snapshot as it was, and no half-built one visible.
    assert cluster.collection(cname).active_snapshot_id == active
    again = cluster.search(cname, "shard merge", k=10)
    assert [h.model_dump() for h in again.hits] == [h.model_dump() for h in before.hits]
    assert [s.status for s in cluster.list_snapshots(cname)].count("building") == 0


def test_purge_drop_and_lexical_stats_on_shards(
    pair: tuple[Engine, Engine], citus_cluster: LocalCluster, cname: str
) -> None:
    """A purge deletes rows on the shards; a dropped snapshot's segments go with their shards; no rebuild in place."""
    one, cluster = pair
    for eng in (one, cluster):
        eng.ingest(cname, _docs(10, start=100, tag=" theta"))
    sid = cluster.collection(cname).active_snapshot_id
    placed = f"ranklock_data.dead_{sid}"
    with psycopg.connect(citus_cluster.dsn) as conn:
        # d0105's first version is dead in the new snapshot: placed beside its chunks, by its doc_id.
        before = conn.execute(f"SELECT count(*) FROM {placed} WHERE key = 'd0105'").fetchone()
    assert before is not None and before[0] > 0
    for eng in (one, cluster):
        eng.purge(cname, ["d0007", "d0105"])
    with psycopg.connect(citus_cluster.dsn) as conn:
        after = conn.execute(f"SELECT count(*) FROM {placed} WHERE key = ANY (%s)", [["d0007", "d0105"]]).fetchone()
    assert after == (0,)
    assert _answers(cluster, cname) == _answers(one, cname)
    with pytest.raises(SnapshotError) as exc:
        cluster.lexical_stats(cname, force=True)
    assert "is distributed over a Citus cluster" in str(exc.value)
    assert "`ranklock snapshot merge COLLECTION --all`" in str(exc.value)
    cluster.merge(cname, everything=True)
    old = [s.id for s in cluster.list_snapshots(cname) if not s.active]
    before = {g["id"] for g in cluster.manifest(cname, old[0])["segmentation"]["segments"]}
    for sid in old:
        cluster.drop_snapshot(cname, sid)
    live = {g["id"] for g in cluster.manifest(cname)["segmentation"]["segments"]}
    with psycopg.connect(citus_cluster.dsn) as conn:
        left = {
            r[0]
            for r in conn.execute(
                "SELECT logicalrelid::text FROM pg_dist_partition WHERE logicalrelid::text = ANY (%s)",
                [[f"ranklock_data.{k}_{g}" for g in before for k in ("chunks", "forward", "postings", "terms")]],
            )
        }
    assert before and not before & live and left == set()
    one.merge(cname, everything=True)
    assert _answers(cluster, cname) == _answers(one, cname)


def test_ask_and_the_async_engine_on_the_cluster_answer_as_one_node(pair: tuple[Engine, Engine], cname: str) -> None:
    one, cluster = pair
    question = "which documents mention shard merge?"
    got, want = cluster.ask(cname, question), one.ask(cname, question)
    layers = ("answer", "citations", "chunks", "abstained", "generator", "prompt_sha256")
    assert {k: got.to_dict()[k] for k in layers} == {k: want.to_dict()[k] for k in layers}
    assert got.chunks and cluster.replay_answer(got.answer_id).identical is True

    async def both() -> tuple[Any, Any]:
        async with AsyncEngine.over(cluster) as aeng:
            return await aeng.search(cname, "shard merge tenant", k=10), await aeng.search(
                cname, "worker posting", k=10, mode="lexical", filter="year >= 2003"
            )

    a, b = asyncio.run(both())
    assert [h.model_dump() for h in a.hits] == [
        h.model_dump() for h in one.search(cname, "shard merge tenant", k=10).hits
    ]
    assert [h.model_dump() for h in b.hits] == [
        h.model_dump() for h in one.search(cname, "worker posting", k=10, mode="lexical", filter="year >= 2003").hits
    ]


def test_hnsw_on_shards_is_flagged_approximate_and_stable(citus_cluster: LocalCluster, cname: str) -> None:
    """One graph per shard: answers depend on the placement (the manifest records it), flagged, the same every time."""
    emb = HashEmbedder()
    with Engine(dsn=citus_cluster.dsn, embedder=emb, log_queries=False) as cluster:
        cluster.ingest(cname, _docs(400), create={"embedder": emb.id, "index": "hnsw"})
        manifest = cluster.manifest(cname)
        assert manifest["placement"]["shards"] == 4
        runs = [cluster.search(cname, "shard merge tenant", k=10, mode="semantic", exact_threshold=1) for _ in range(3)]
    # The graphs were built on the shards, by their workers, once each (not on the coordinator first).
    seg = manifest["segmentation"]["segments"][0]["id"]
    with psycopg.connect(citus_cluster.dsn) as conn:
        graphs = conn.execute(
            "SELECT result FROM run_command_on_shards(%s, $$SELECT count(*) FROM pg_index AS i JOIN pg_class AS c "
            "ON c.oid = i.indexrelid JOIN pg_am AS a ON a.oid = c.relam WHERE i.indrelid = '%%s'::regclass "
            "AND a.amname = 'hnsw'$$)",
            [f"ranklock_data.chunks_{seg}"],
        ).fetchall()
    assert [g[0] for g in graphs] == ["1"] * 4
    assert manifest["index"]["build"]["bytes"] > 0
    assert runs[0].params["vector_strategy"] == "hnsw"
    assert runs[0].complete is False and runs[0].truncation == "approximate_index"
    assert len(runs[0].hits) == 10
    assert all([h.model_dump() for h in r.hits] == [h.model_dump() for h in runs[0].hits] for r in runs)


def test_cli_shards_option(
    citus_cluster: LocalCluster,
    engine: Engine,
    rl_home: Path,
    tmp_path: Path,
    cname: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolve_hash_embedder_by_id(monkeypatch)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": d.doc_id, "title": d.title, "text": d.body}) + "\n" for d in _docs(20)),
        encoding="utf-8",
    )
    runner = CliRunner()
    emb = ["--embedder", HashEmbedder().id]
    res = runner.invoke(
        app, ["ingest", cname, str(corpus), "--shards", "3", "--dsn", citus_cluster.dsn, *emb, "--json"]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["collection", "show", cname, "--dsn", citus_cluster.dsn, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["shards"] == 3
    # On one node a shard count is refused before anything is written: exit 2, the message, no collection.
    res = runner.invoke(app, ["collection", "create", f"{cname}_n", "--shards", "2", "--home", str(rl_home), *emb])
    assert res.exit_code == 2
    assert "shards=2 needs a Citus cluster, and this database has no Citus extension" in " ".join(res.output.split())
    assert f"{cname}_n" not in [c.name for c in engine.collections()]


def _tenant_docs(n: int) -> list[Document]:
    docs = _docs(n)
    for i, d in enumerate(docs):
        if i % 7 != 0:  # every seventh document has no tenant: a segment of its own ('' on the cluster)
            d.metadata["tenant"] = "abc"[i % 3]
    return docs


def test_a_partitioned_collection_puts_each_tenant_on_one_node(
    citus_cluster: LocalCluster, engine: Engine, cname: str
) -> None:
    """By the partition key: a tenant's segments are one shard, so a search routed to the tenant reads one node."""
    emb = HashEmbedder()
    engine.embedders.register(emb)
    create = {"embedder": emb.id, "index": "exact", "fields": ["tenant:keyword", "year:int", "team:keyword"],
              "partition": "tenant"}  # fmt: skip
    with Engine(dsn=citus_cluster.dsn, embedder=emb, log_queries=False) as cluster:
        for eng in (engine, cluster):
            eng.ingest(cname, _tenant_docs(150), create=create)
            eng.ingest(cname, [d for d in _tenant_docs(40) if d.metadata.get("tenant") == "a"])
        assert cluster.manifest(cname)["placement"]["distribution_column"] == "shard_key"
        for mode, query, kw in CASES[:7]:
            for filt in (None, 'tenant = "a"', 'tenant = "b" and year >= 2002'):
                extra = dict(kw)
                if filt is not None:
                    extra["filter"] = filt if "filter" not in kw else f"({kw['filter']}) and {filt}"
                got = cluster.search(cname, query, k=15, mode=mode, **extra)
                want = engine.search(cname, query, k=15, mode=mode, **extra)
                assert [h.model_dump() for h in got.hits] == [h.model_dump() for h in want.hits], (mode, extra)
                assert got.matching_count == want.matching_count
        routed = cluster.search(cname, "shard merge", k=10, filter='tenant = "a"')
        assert routed.hits and routed.params["segments"]["read"] < routed.params["segments"]["of"]
        text, params = cluster.search_sql(cname, "shard merge", k=10, filter='tenant = "a"')
    # Every command of the search (the shard's query, the fetch) goes to the one worker holding the tenant.
    sent = _remote(citus_cluster.dsn, text, params)
    ports = {port for port, cmd in sent if "ranklock.shard_search(" in cmd or "char_start, char_end, text FROM" in cmd}
    assert [cmd for _, cmd in sent if "ranklock.shard_search(" in cmd] and len(ports) == 1, sent
    assert ports <= {str(n.port) for n in citus_cluster.nodes()[1:]}, sent
