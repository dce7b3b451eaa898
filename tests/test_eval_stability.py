"""Retrieval Stability Index, configuration comparison and the canary on a real collection."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_corpus import GOLDEN, documents
from ranklock import Engine
from ranklock.cli import app
from ranklock.errors import InputError
from ranklock.eval.canary import run_canary
from ranklock.eval.stability import compare_configurations, measure_stability

QUERIES = [(f"q{i}", q, None) for i, (q, _) in enumerate(GOLDEN, 1)]


@pytest.fixture
def small(engine: Engine, cname: str) -> str:
    engine.ingest(cname, documents())
    return cname


def test_ranklock_is_stable_under_concurrency(engine: Engine, small: str) -> None:
    rep = measure_stability(engine, small, QUERIES, runs=4, concurrency=4, k=10)
    assert rep.rsi == 1.0
    assert rep.rbo == pytest.approx(1.0)
    # The product promise is stronger than the RSI: the same bytes every time.
    assert rep.identical_share == 1.0, (
        f"same top-10 ids but responses not byte-identical for {rep.unstable}: a score differs between runs"
    )
    assert rep.passed and rep.unstable == []
    d = rep.to_dict()
    assert d["rsi"] == 1.0 and d["runs"] == 4 and d["concurrency"] == 4 and d["queries"] == len(QUERIES)
    with pytest.raises(InputError, match="at least 2 runs"):
        measure_stability(engine, small, QUERIES, runs=1)


def test_compare_two_configurations(engine: Engine, small: str) -> None:
    rep = compare_configurations(
        engine, small, QUERIES, a={"ef_search": 10}, b={"ef_search": 200}, k=5, mode="semantic"
    )
    assert rep.kind == "configurations"
    assert 0.0 <= rep.rsi <= 1.0
    assert rep.extra["a"]["overrides"] == {"ef_search": 10}
    assert rep.extra["b"]["overrides"] == {"ef_search": 200}
    assert rep.snapshot["id"] == engine.collection(small).active_snapshot_id


def test_canary_records_then_detects_drift(engine: Engine, small: str, tmp_path: Path) -> None:
    record = tmp_path / "canary.json"
    first = run_canary(engine, small, QUERIES, record=record)
    assert first.passed and first.verdict == "recorded"
    second = run_canary(engine, small, QUERIES, record=record)
    assert second.passed and second.verdict == "identical" and second.rsi == 1.0
    # Pretend the last recorded run had answered q1 differently on the same snapshot.
    data = json.loads(record.read_text())
    data["results"]["q1"]["ids"] = list(reversed(data["results"]["q1"]["ids"]))[:3]
    data["results"]["q1"]["digest"] = "00" * 32
    record.write_text(json.dumps(data))
    drift = run_canary(engine, small, QUERIES, record=record)
    assert not drift.passed and drift.verdict == "drift"
    assert [c["qid"] for c in drift.changed] == ["q1"]
    assert json.loads(record.read_text())["results"]["q1"]["digest"] == "00" * 32  # baseline kept
    assert record.with_suffix(".failed.json").exists()


@pytest.mark.usefixtures("engine")
def test_cli_stability_and_canary(small: str, tmp_path: Path, rl_home: Path) -> None:
    dsn = os.environ.get("RANKLOCK_TEST_DSN")
    db = ["--dsn", dsn] if dsn else ["--home", str(rl_home)]
    qfile = tmp_path / "queries.txt"
    qfile.write_text("\n".join(q for q, _ in GOLDEN) + "\n")
    runner = CliRunner()
    res = runner.invoke(
        app, ["stability", small, "--queries", str(qfile), "--runs", "3", "--concurrency", "2", "--json", *db]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["rsi"] == 1.0 and out["runs"] == 3 and out["concurrency"] == 2
    res = runner.invoke(app, ["stability", small, "--queries", str(qfile), "--runs", "1", *db])
    assert res.exit_code == 2 and "at least 2 runs" in res.output
    record = tmp_path / "c.json"
    for verdict in ("recorded", "identical"):
        res = runner.invoke(app, ["canary", small, "--queries", str(qfile), "--record", str(record), "--json", *db])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["verdict"] == verdict
