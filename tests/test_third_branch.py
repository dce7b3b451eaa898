"""A third branch, defined here and nowhere in ranklock, fused with the other two (issue 23).

The branch ranks chunks by Euclidean distance to the query vector (pgvector's
``<->``), an exact scan: a second opinion on the same vectors.  It is written
against the Branch protocol alone; registering it is the one line a new branch
adds to ranklock.search.branches, done here with monkeypatch.  Everything else
(the statement, fusion, ranks, ties, hits, the query log, replay) must take it
as it is.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from psycopg import sql

from fakes import use_hash_embedder
from ranklock import Document, Engine
from ranklock.search import branches
from ranklock.search.lexical import LexicalBranch
from ranklock.search.results import BranchSignal, Hit
from ranklock.search.rrf import rrf_weight_sql, tie_window
from ranklock.search.semantic import SemanticBranch
from ranklock.search.spec import BranchContext, SearchSpec, Signal, where_sql
from ranklock.store.steps import Steps

K = 60


@dataclass(frozen=True)
class EuclidBranch:
    name: ClassVar[str] = "euclid"
    alias: ClassVar[str] = "e"
    cte: ClassVar[str] = "euc"
    signal: ClassVar[Signal] = Signal("euclid_rank", "euclid_distance", "dist", "float8")
    ranks_every_document: ClassVar[bool] = True
    can_fall_short: ClassVar[bool] = False
    echo_keys: ClassVar[tuple[str, ...]] = ()

    qvec: Any

    @classmethod
    def prepare(cls, ctx: BranchContext) -> Steps[tuple[EuclidBranch, None]]:
        sem, _ = yield from SemanticBranch.prepare(ctx)  # the same query vector, from the embedding cache
        return cls(sem.qvec), None

    def constrained(self, scope: Any, sp: Any, spec: SearchSpec) -> EuclidBranch:  # noqa: ARG002 (the Branch protocol)
        return self

    @property
    def approximate(self) -> bool:
        return False

    def settings(self) -> list[tuple[str, str]]:
        return []

    def echo(self) -> dict[str, Any]:
        return {}

    def params(self, spec: SearchSpec) -> Mapping[str, Any]:
        return {"euc_qvec": self.qvec, "euc_fetch": spec.depth * max(1, spec.max_chunks_per_doc)}

    def ctes(self, spec: SearchSpec) -> sql.Composable:
        return sql.SQL(
            """euc_cand AS MATERIALIZED (
    SELECT doc_id, chunk, dist FROM (
        SELECT c.doc_id, c.chunk, (c.embedding <-> %(euc_qvec)s)::float8 AS dist FROM {table} AS c WHERE {where}
        OFFSET 0) AS e ORDER BY dist + 0, doc_id, chunk LIMIT %(euc_fetch)s::bigint
),
euc_best AS (
    SELECT doc_id, chunk, dist, row_number() OVER (PARTITION BY doc_id ORDER BY dist, chunk) AS rn FROM euc_cand
),
euc_top AS (
    SELECT doc_id, chunk, dist, rank() OVER (ORDER BY dist) AS rank,
           row_number() OVER (ORDER BY dist, doc_id, chunk) AS pos
    FROM euc_best WHERE rn = 1 ORDER BY dist, doc_id, chunk LIMIT %(depth)s::bigint
),
euc AS (SELECT doc_id, chunk, dist, rank, {rrf} AS rrf FROM euc_top{window})"""
        ).format(table=spec.table, where=where_sql(spec), rrf=rrf_weight_sql(spec), window=tie_window(spec))


DOCS = [
    Document("a", "Lamps", "Lighthouse keepers trimmed the lamps every evening."),
    Document("b", "Lamps", "Lighthouse keepers trimmed the lamps every evening."),
    Document("c", "Tides", "Tide tables and the keepers of the harbour lights."),
    Document("d", "Tax", "Tax law for small shops, and nothing about lamps."),
    Document("e", "Bread", "Sourdough bread rises slowly overnight."),
]


@pytest.fixture
def three(engine: Engine, cname: str, monkeypatch: pytest.MonkeyPatch) -> str:
    engine.ingest(cname, DOCS, replace=True, create={"embedder": use_hash_embedder(engine), "index": "exact"})
    monkeypatch.setattr(branches, "REGISTRY", (LexicalBranch, SemanticBranch, EuclidBranch))
    return cname


def signal(hit: Hit, name: str) -> BranchSignal:
    """The signals of branch ``name`` in ``hit`` (every registry branch has some)."""
    sig = hit.signal(name)
    assert sig is not None, name
    return sig


def _weights(ranks: dict[str, int]) -> dict[str, float]:
    """rrf/2 by hand (see tests/test_search.py): a tie block shares the weights of its positions."""
    blocks: dict[int, int] = {}
    for r in ranks.values():
        blocks[r] = blocks.get(r, 0) + 1
    out = {}
    for d, r in ranks.items():
        total = 0.0
        for p in range(r, r + blocks[r]):
            total += 1.0 / (K + p)
        out[d] = total / blocks[r]
    return out


def test_hybrid_fuses_the_third_branch_exactly(engine: Engine, three: str) -> None:
    q = "lighthouse keepers lamps"
    hyb = engine.search(three, q, k=5)
    single = {m: engine.search(three, q, k=5, mode=m) for m in ("lexical", "semantic", "euclid")}
    per_branch = {
        m: _weights({h.doc_id: rank for h in res.hits if (rank := signal(h, m).rank) is not None})
        for m, res in single.items()
    }
    fused: dict[str, float] = {}
    for m in ("lexical", "semantic", "euclid"):  # registry order: the order the statement adds them
        for d, w in per_branch[m].items():
            fused[d] = fused.get(d, 0.0) + w
    expected = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
    assert [(h.doc_id, h.score) for h in hyb.hits] == expected
    for h in hyb.hits:
        assert [s.name for s in h.signals] == ["lexical", "semantic", "euclid"]  # registry order
        alone = single["euclid"].hits[[x.doc_id for x in single["euclid"].hits].index(h.doc_id)]
        # The same rank and distance; the tie groups are each result's own.
        assert signal(h, "euclid")[:3] == signal(alone, "euclid")[:3]
    # The two identical documents tie in all three branches: one tie group, one score.
    a, b = (next(h for h in hyb.hits if h.doc_id == d) for d in ("a", "b"))
    assert a.score == b.score and a.tie_group == b.tie_group is not None
    # The JSON keeps today's keys, and shows the third branch under the keys its Signal names, after them.
    keys = list(json.loads(hyb.to_json())["hits"][0])
    assert keys[keys.index("score") + 1 : keys.index("char_start")] == [
        "lexical_rank",
        "lexical_score",
        "semantic_rank",
        "semantic_distance",
        "euclid_rank",
        "euclid_distance",
    ]
    # The two identical documents tie in every branch too: each branch's signal carries the group.
    assert [s.tie_group for s in a.signals] == [s.tie_group for s in b.signals] == [a.tie_group] * 3


def test_a_result_read_back_from_its_json_or_the_cache_is_the_same_result(engine: Engine, three: str) -> None:
    res = engine.search(three, "bread harbour", k=5)
    # Its signals, each branch's tie groups with them, come back from the keys the branches name.
    back = branches.read_result(json.loads(res.to_json(timings=True)))
    assert back == res and back.hits[0].euclid_rank == signal(res.hits[0], "euclid").rank
    engine.settings.result_cache = True
    try:
        first = engine.search(three, "bread harbour", k=5)
        cached = engine.search(three, "bread harbour", k=5)
    finally:
        engine.settings.result_cache = False
    assert "cache_ms" in cached.timings and "cache_ms" not in first.timings
    assert [h.signals for h in cached.hits] == [h.signals for h in first.hits] == [h.signals for h in res.hits]


def test_the_page_and_the_cli_show_the_third_branch(
    engine: Engine, three: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from fastapi.testclient import TestClient

    from ranklock.cli.render import render_search
    from ranklock.http import create_app

    page = TestClient(create_app(engine)).get("/").text
    listed = json.loads(page.split('<script id="branches" type="application/json">')[1].split("</script>")[0])
    assert [(b["name"], b["rank_key"], b["raw_key"]) for b in listed] == [
        ("lexical", "lexical_rank", "lexical_score"),
        ("semantic", "semantic_rank", "semantic_distance"),
        ("euclid", "euclid_rank", "euclid_distance"),
    ]
    res = engine.search(three, "bread", k=1, mode="euclid")
    capsys.readouterr()
    render_search(res, "text")
    line = capsys.readouterr().out.splitlines()[0]
    sig = signal(res.hits[0], "euclid")
    assert f"lex -  sem -  euc #{sig.rank} ({sig.raw:.3f})" in line


def test_the_third_branch_is_logged_and_replays(engine: Engine, three: str) -> None:
    res = engine.search(three, "harbour lights", k=5)
    assert res.query_id is not None
    row = engine.db.fetchone("SELECT result FROM ranklock.query_log WHERE id = %s", [res.query_id])
    assert row is not None
    assert set(row["result"]["branches"]) == {"lexical", "semantic", "euclid"}  # jsonb: keys sorted
    assert len(row["result"]["final"][0]) == 4 + 2 * 3
    assert engine.replay(res.query_id).identical


def test_the_mode_of_the_third_branch_runs_it_alone(engine: Engine, three: str) -> None:
    res = engine.search(three, "bread", k=5, mode="euclid")
    assert [signal(h, "lexical").rank for h in res.hits] == [None] * 5
    dists = [signal(h, "euclid").raw for h in res.hits]
    assert dists == sorted(dists)
    assert res.complete is True
    text, _ = engine.search_sql(three, "bread", k=5, mode="euclid")
    assert "euc_top AS" in text and "lex_hits" not in text


def test_without_the_registration_the_branch_does_not_exist(engine: Engine, cname: str) -> None:
    engine.ingest(cname, DOCS, replace=True, create={"embedder": use_hash_embedder(engine), "index": "exact"})
    from ranklock import QueryError

    with pytest.raises(QueryError, match="unknown mode 'euclid'; use one of hybrid, lexical, semantic."):
        engine.search(cname, "bread", mode="euclid")
    assert dataclasses.is_dataclass(EuclidBranch)
