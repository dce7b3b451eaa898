"""The query log, exact replay, the result cache and the embedder checksum at query time."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb
from typer.testing import CliRunner

from ranklock import Document, EmbedderError, Engine, NotFound

QUERY = "how does the immune system respond to a vaccine"

BODIES = [
    ("vaccines", "A vaccine trains the immune system to recognise a pathogen before infection."),
    ("immunity", "Memory B cells let the immune system respond faster to a second exposure."),
    ("volcano", "Magma rises through the crust and erupts as lava from a volcano."),
    ("bread", "Yeast ferments the sugars in dough and the gas makes the bread rise."),
    ("tides", "The gravity of the moon raises tides in the oceans twice a day."),
    ("fever", "A fever after a vaccine dose is the immune system responding."),
]


def corpus(tag: str) -> list[Document]:
    return [Document(i, i.title(), f"{b} ({tag})") for i, b in BODIES]


def cli(engine: Engine, rl_home: Path, *args: str) -> tuple[int, str]:
    from ranklock.cli import app

    res = CliRunner().invoke(app, [*args, "--dsn", engine.db.dsn, "--home", str(rl_home)])
    return res.exit_code, res.output


@pytest.fixture
def result_cache(engine: Engine) -> Iterator[None]:
    engine.settings.result_cache = True
    try:
        yield
    finally:
        engine.settings.result_cache = False


@pytest.fixture(scope="module")
def shared(engine: Engine) -> str:
    """A collection the read-only tests of this module share (one ingest instead of one each)."""
    name = "t_replay_module"
    engine.ingest(name, corpus(name), replace=True)
    return name


def log_row(engine: Engine, query_id: int) -> dict[str, Any]:
    row = engine.db.fetchone("SELECT * FROM ranklock.query_log WHERE id = %s", [query_id])
    assert row is not None
    return row


def test_search_is_logged_with_everything_needed_to_replay(engine: Engine, shared: str, rl_home: Path) -> None:
    cname = shared
    info = engine.snapshot_info(cname)
    res = engine.search(cname, "  How does the immune system respond to a VACCINE ", k=3, depth=5)
    assert res.query_id is not None
    row = log_row(engine, res.query_id)
    expected_fp = hashlib.sha256(b"english\x00How does the immune system respond to a VACCINE").hexdigest()
    assert row["fingerprint"] == expected_fp
    assert (row["collection"], row["snapshot_id"], row["manifest_hash"]) == (cname, info.id, info.manifest_hash)
    assert row["request"] == {
        "collection": cname,
        "query": "  How does the immune system respond to a VACCINE ",
        "k": 3,
        "mode": "hybrid",
        "filter": None,
        "snapshot": None,
        "as_of": None,
        "params": {"depth": 5},
    }
    assert row["result_digest"] == hashlib.sha256(res.to_json().encode()).hexdigest()
    final = row["result"]["final"]
    assert final == [
        [h.doc_id, h.chunk, h.rank, h.score, h.lexical_rank, h.lexical_score, h.semantic_rank, h.semantic_distance]
        for h in res.hits
    ]
    branches = row["result"]["branches"]
    assert set(branches) == {"lexical", "semantic"}
    assert [c[2] for c in branches["semantic"]] == [1, 2, 3, 4, 5]  # depth 5, ranks from 1
    # Only three documents contain the query's words; the lexical branch holds exactly those.
    assert sorted(c[0] for c in branches["lexical"]) == ["fever", "immunity", "vaccines"]
    by_branch = {(b, c[0]): c for b, cs in branches.items() for c in cs}
    for h in res.hits:
        if h.lexical_rank is not None:
            assert by_branch[("lexical", h.doc_id)][2:] == [h.lexical_rank, h.lexical_score]
        if h.semantic_rank is not None:
            assert by_branch[("semantic", h.doc_id)][2:] == [h.semantic_rank, h.semantic_distance]
    assert {"sql_ms", "total_ms"} <= set(row["timings"])
    print(f"logged query {res.query_id}: timings {row['timings']}")

    report = engine.replay(res.query_id)
    assert report.identical and report.differences == []
    assert report.replayed_digest == report.logged_digest == row["result_digest"]
    # A replay is not itself logged.
    assert engine.db.fetchone("SELECT max(id) AS m FROM ranklock.query_log") == {"m": res.query_id}
    code, out = cli(engine, rl_home, "replay", str(res.query_id), "--json")
    assert code == 0, out
    assert json.loads(out)["identical"] is True


def test_replay_reports_differences_and_exits_nonzero(engine: Engine, shared: str, rl_home: Path) -> None:
    cname = shared
    res = engine.search(cname, QUERY, k=3)
    assert res.query_id is not None
    row = log_row(engine, res.query_id)
    tampered = row["result"]
    first, second = tampered["final"][0], tampered["final"][1]
    tampered["final"][0], tampered["final"][1] = second, first
    engine.db.execute("UPDATE ranklock.query_log SET result = %s WHERE id = %s", [Jsonb(tampered), res.query_id])
    report = engine.replay(res.query_id)
    assert not report.identical
    assert [(d["where"], d["position"]) for d in report.differences] == [("final", 1), ("final", 2)]
    assert report.differences[0]["logged"] == second and report.differences[0]["replayed"] == first
    code, out = cli(engine, rl_home, "replay", str(res.query_id))
    assert code == 1
    assert "NOT identical" in out


def test_replay_of_unknown_or_dropped_is_a_clear_error(engine: Engine, cname: str) -> None:
    r1 = engine.ingest(cname, corpus(cname))
    res = engine.search(cname, QUERY, k=2)
    assert res.query_id is not None
    engine.ingest(cname, [Document("comets", "Comets", f"Comets are icy bodies ({cname})")])
    engine.drop_snapshot(cname, r1.snapshot_id)
    with pytest.raises(NotFound) as exc:
        engine.replay(res.query_id)
    assert str(exc.value) == (
        f"query {res.query_id} ran against snapshot {r1.snapshot_id} of {cname!r}, which has been dropped (by "
        "`snapshot drop` or by snapshot retention); a replay needs the snapshot it ran against. Pin an entry "
        "whose replay must keep working: `ranklock log pin ID` keeps it and its snapshot."
    )
    with pytest.raises(NotFound, match="no logged query with id 999999999"):
        engine.replay(999_999_999)


def test_logging_can_be_turned_off(engine: Engine, shared: str) -> None:
    cname = shared
    quiet = Engine(dsn=engine.db.dsn, log_queries=False)
    try:
        before = engine.db.fetchone("SELECT count(*) AS n FROM ranklock.query_log")
        res = quiet.search(cname, QUERY, k=2)
        assert res.query_id is None
        assert engine.db.fetchone("SELECT count(*) AS n FROM ranklock.query_log") == before
        assert res.to_json() == engine.search(cname, QUERY, k=2).to_json()
        # The statement asks for the branch candidates only when they are logged.
        assert "NULL::json AS branches" in quiet.search_sql(cname, QUERY, k=2)[0]
        assert "json_agg" in engine.search_sql(cname, QUERY, k=2)[0]
    finally:
        quiet.close()


@pytest.mark.usefixtures("result_cache")
def test_cached_result_is_byte_identical_and_keyed_by_every_parameter(engine: Engine, cname: str) -> None:
    r = engine.ingest(cname, corpus(cname))
    fresh = engine.search(cname, QUERY, k=3)
    assert "cache_ms" not in fresh.timings
    again = engine.search(cname, QUERY + "  ", k=3)  # same fingerprint: normalised text
    assert "cache_ms" in again.timings
    print(f"fresh {fresh.timings['total_ms']:.1f} ms, cached {again.timings['total_ms']:.1f} ms")
    assert again.query == QUERY + "  "
    assert again.model_copy(update={"query": QUERY}).to_json() == fresh.to_json()
    same = engine.search(cname, QUERY, k=3)
    assert "cache_ms" in same.timings and same.to_json() == fresh.to_json()
    assert same.query_id is not None and same.query_id != fresh.query_id
    assert log_row(engine, same.query_id)["result"]["cached"] is True
    assert engine.replay(same.query_id).identical
    for other in ({"k": 2}, {"mode": "semantic"}, {"depth": 7}, {"as_of": "2030-01-01T00:00:00Z"}):
        res = engine.search(cname, QUERY, **{"k": 3, **other})
        assert "cache_ms" not in res.timings, other
    n = engine.db.fetchone("SELECT count(*) AS n FROM ranklock.result_cache WHERE snapshot_id = %s", [r.snapshot_id])
    assert n == {"n": 5}
    # Entries belong to their snapshot: dropping it drops them.
    engine.ingest(cname, [Document("comets", "Comets", f"Comets are icy bodies ({cname})")])
    engine.drop_snapshot(cname, r.snapshot_id)
    n = engine.db.fetchone("SELECT count(*) AS n FROM ranklock.result_cache WHERE snapshot_id = %s", [r.snapshot_id])
    assert n == {"n": 0}


class Impostor:
    """The real model's vectors under the collection's embedder id, but other weights (checksum)."""

    def __init__(self, real: Any) -> None:
        self.id = real.id
        self.dim = real.dim
        self._real = real

    @property
    def sha256(self) -> str:
        return "0" * 64

    @property
    def tokenizer(self) -> Any:
        return self._real.tokenizer

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out: np.ndarray = self._real.embed(texts)
        return out


@pytest.mark.parametrize("cached", [False, True], ids=["fresh", "result-cache-on"])
def test_query_with_other_embedder_weights_is_refused_even_from_caches(
    engine: Engine, shared: str, cached: bool
) -> None:
    cname = shared
    engine.search(cname, QUERY, k=2)  # the query vector is now in the embedding cache
    coll = engine.collection(cname)
    impostor = Engine(dsn=engine.db.dsn, embedder=Impostor(engine.embedder_for(coll.embedder_id)))
    impostor.settings.result_cache = cached
    try:
        if cached:
            engine.settings.result_cache = True
            engine.search(cname, QUERY, k=2)  # fills the result cache
        with pytest.raises(EmbedderError) as exc:
            impostor.search(cname, QUERY, k=2)
        assert str(exc.value) == (
            f"collection {cname!r} was embedded with {coll.embedder_id} weights {coll.embedder_sha256[:12]}…, "
            f"but the embedder loaded now has weights {'0' * 12}…; vectors of two models are never compared. "
            "Reinstall the original model, or re-ingest into a new collection with the new model."
        )
        with pytest.raises(EmbedderError):
            impostor.search(cname, QUERY, k=2, mode="semantic")
        # The lexical branch compares no vectors: it stays available.
        assert impostor.search(cname, QUERY, k=2, mode="lexical").hits
    finally:
        engine.settings.result_cache = False
        impostor.close()
