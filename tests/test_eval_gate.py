"""The recall gate (eval compare) and the promotion gate."""

from __future__ import annotations

import json
from math import log2
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eval_corpus import documents, write_golden
from ranklock import Engine
from ranklock.cli import app
from ranklock.errors import InputError
from ranklock.eval.compare import compare_reports
from ranklock.eval.gate import promotion_gate
from ranklock.eval.run import REPORT_SCHEMA, aggregate, score_query

QRELS = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}}


def _report(rankings: dict[str, list[str]], ranker: str) -> dict[str, Any]:
    ks = [3, 10]
    per_query = {q: score_query(rankings[q], QRELS[q], ks) for q in QRELS}
    return {
        "schema": REPORT_SCHEMA,
        "golden": {"digest": "same", "path": "g.jsonl"},
        "snapshot": {"id": 1, "manifest_hash": "h-" + ranker},
        "manifest": {"search": {"lexical_ranker": ranker, "depth": 40}, "corpus": {"digest": "c"}},
        "ks": ks,
        "modes": {"hybrid": aggregate(per_query, ks)},
        "params": {"hybrid": {"lexical_ranker": ranker}},
        "per_query": {"hybrid": per_query},
    }


BASE = _report({"q1": ["x", "a", "b"], "q2": ["x", "y", "c"]}, "ts_rank_cd")
# q1 now finds a first but loses b; q2 moves c to the top: nDCG rises, recall falls.
NEW = _report({"q1": ["a", "y", "z"], "q2": ["c"]}, "bm25")


def test_gate_fails_on_recall_drop_even_when_ndcg_rises() -> None:
    ndcg_base = ((1 / log2(3) + 1 / log2(4)) / (1 + 1 / log2(3)) + 1 / log2(4)) / 2
    ndcg_new = (1 / (1 + 1 / log2(3)) + 1) / 2
    assert BASE["modes"]["hybrid"]["ndcg@10"] == pytest.approx(ndcg_base)
    assert NEW["modes"]["hybrid"]["ndcg@10"] == pytest.approx(ndcg_new)
    assert ndcg_new > ndcg_base

    res = compare_reports(BASE, NEW)
    assert not res.passed
    assert res.failures == [
        f"hybrid recall@3 dropped 1.0000 -> 0.7500 (-0.2500, tolerance 0) although ndcg@3 rose "
        f"{BASE['modes']['hybrid']['ndcg@3']:.4f} -> {NEW['modes']['hybrid']['ndcg@3']:.4f}",
        f"hybrid recall@10 dropped 1.0000 -> 0.7500 (-0.2500, tolerance 0) although ndcg@10 rose "
        f"{ndcg_base:.4f} -> {ndcg_new:.4f}",
    ]
    assert [(r["qid"], r["k"], r["lost"]) for r in res.lost] == [("q1", 3, ["b"]), ("q1", 10, ["b"])]
    assert res.manifest_diff == {"search.lexical_ranker": {"old": "ts_rank_cd", "new": "bm25"}}
    assert res.params_diff == {"hybrid": {"lexical_ranker": {"old": "ts_rank_cd", "new": "bm25"}}}
    # Within tolerance, or gated elsewhere, it passes.
    assert compare_reports(BASE, NEW, tolerance=0.25).passed
    assert compare_reports(NEW, BASE).passed


def test_gate_refuses_different_golden_sets_and_missing_cutoffs() -> None:
    other = {**NEW, "golden": {"digest": "other", "path": "h.jsonl"}}
    with pytest.raises(InputError, match="the reports used different golden sets"):
        compare_reports(BASE, other)
    with pytest.raises(InputError, match=r"cutoff\(s\) 50 are not in both reports \(common: 3, 10\)"):
        compare_reports(BASE, NEW, ks=[50])


def test_cli_compare_exit_code_and_lost_queries(tmp_path: Path) -> None:
    (tmp_path / "base.json").write_text(json.dumps(BASE))
    (tmp_path / "new.json").write_text(json.dumps(NEW))
    runner = CliRunner()
    res = runner.invoke(app, ["eval", "compare", str(tmp_path / "base.json"), str(tmp_path / "new.json")])
    assert res.exit_code == 1
    assert "hybrid k=10 query q1: lost b" in res.output
    assert "manifest search.lexical_ranker" in res.output
    assert "FAIL" in res.output
    js = runner.invoke(app, ["eval", "compare", str(tmp_path / "base.json"), str(tmp_path / "new.json"), "--json"])
    assert js.exit_code == 1
    assert json.loads(js.stdout)["passed"] is False
    ok = runner.invoke(
        app, ["eval", "compare", str(tmp_path / "base.json"), str(tmp_path / "new.json"), "--tolerance", "0.3"]
    )
    assert ok.exit_code == 0, ok.output
    missing = runner.invoke(app, ["eval", "compare", str(tmp_path / "nope.json"), str(tmp_path / "new.json")])
    assert missing.exit_code == 2
    assert "no such report" in missing.output


def test_promotion_gate_refuses_a_snapshot_that_loses_recall(engine: Engine, cname: str, tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "golden.jsonl")
    docs = documents()
    engine.ingest(cname, docs)
    active = engine.collection(cname).active_snapshot_id
    # Same documents again: a candidate that retrieves identically.
    same = engine.ingest(cname, docs, replace=True, activate=False).snapshot_id
    rep = promotion_gate(engine, cname, same, golden, ks=(5, 10))
    assert rep.passed, rep.reasons
    assert rep.active == {"id": active, "manifest_hash": rep.active["manifest_hash"] if rep.active else None}
    assert rep.stability["rsi"] == 1.0
    assert rep.rsi_vs_active is not None and rep.rsi_vs_active["rsi"] == 1.0
    d = rep.to_dict()
    assert d["passed"] is True and d["candidate"]["id"] == same

    # Drop relevant documents: recall falls, activation must be refused.
    kept = [d for d in docs if d.doc_id not in ("volcano-0", "chess-3", "river-4")]
    worse = engine.ingest(cname, kept, replace=True, activate=False).snapshot_id
    rep = promotion_gate(engine, cname, worse, golden, ks=(5, 10))
    assert not rep.passed
    assert any("recall@10 dropped" in r for r in rep.reasons)
    lost = {(r["qid"], tuple(r["lost"])) for r in rep.to_dict()["recall_gate"]["lost"] if r["k"] == 10}
    assert ("q2", ("volcano-0",)) in lost
    assert "corpus.digest" in rep.to_dict()["recall_gate"]["manifest_diff"]
    assert engine.collection(cname).active_snapshot_id == active
