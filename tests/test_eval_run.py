"""Evaluation runs on a real collection: reports, TREC run files agreeing with trec_eval, the plot, the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import pytrec_eval
from typer.testing import CliRunner

from eval_corpus import GOLDEN, documents, write_golden
from ranklock import Engine
from ranklock.cli import app
from ranklock.eval.golden import load_golden
from ranklock.eval.run import evaluate

KS = (1, 3, 5, 10)


@pytest.fixture
def small(engine: Engine, cname: str) -> str:
    engine.ingest(cname, documents())
    return cname


def _cli_db(rl_home: Path) -> list[str]:
    dsn = os.environ.get("RANKLOCK_TEST_DSN")
    return ["--dsn", dsn] if dsn else ["--home", str(rl_home)]


def test_report_files_and_trec_eval_agreement(engine: Engine, small: str, tmp_path: Path) -> None:
    golden = load_golden(write_golden(tmp_path / "golden.jsonl"))
    run = evaluate(engine, small, golden, ks=KS)
    out = tmp_path / "out"
    paths = run.write(out)
    names = sorted(p.name for p in paths)
    assert names == [
        "plot.png",
        "report.json",
        "run-hybrid.trec",
        "run-lexical.trec",
        "run-semantic.trec",
        "summary.md",
    ]
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "plot.png").stat().st_size > 10_000

    report = json.loads((out / "report.json").read_text())
    snap = engine.collection(small).active_snapshot_id
    assert report["snapshot"]["id"] == snap
    assert report["snapshot"]["manifest_hash"] == report["manifest"]["manifest_hash"]
    assert set(report["modes"]) == {"hybrid", "lexical", "semantic"}
    for mode in report["modes"]:
        assert {"ndcg@10", "recall@10", "recall@1", "mrr"} <= set(report["modes"][mode])
        assert report["params"][mode]["lexical_ranker"] in ("bm25", "ts_rank_cd")
    assert "| hybrid |" in (out / "summary.md").read_text()

    # trec_eval on the run files and a qrels file, per query, to 1e-6.
    qrels_file = tmp_path / "qrels.txt"
    qrels_file.write_text(
        "".join(f"q{i} 0 {d} {g}\n" for i, (_, grades) in enumerate(GOLDEN, 1) for d, g in grades.items())
    )
    with qrels_file.open() as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    measures = {"recip_rank", *(f"recall.{k}" for k in KS), *(f"ndcg_cut.{k}" for k in KS)}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    compared = 0
    for mode in ("hybrid", "lexical", "semantic"):
        with (out / f"run-{mode}.trec").open() as fh:
            trec_run = pytrec_eval.parse_run(fh)
        ref = evaluator.evaluate(trec_run)
        for qid, ours in report["per_query"][mode].items():
            theirs = ref.get(qid)
            if theirs is None:  # trec_eval skips a query with no results; ours scores it 0
                assert ours["returned"] == 0 and ours["rr"] == 0.0
                continue
            assert ours["rr"] == pytest.approx(theirs["recip_rank"], abs=1e-6)
            for k in KS:
                assert ours[f"recall@{k}"] == pytest.approx(theirs[f"recall_{k}"], abs=1e-6)
                assert ours[f"ndcg@{k}"] == pytest.approx(theirs[f"ndcg_cut_{k}"], abs=1e-6)
            compared += 1
        # The means in the report are the means of the per-query values.
        m = report["modes"][mode]
        assert m["mrr"] == pytest.approx(sum(r["rr"] for r in report["per_query"][mode].values()) / len(GOLDEN))
    assert compared >= 2 * len(GOLDEN)
    # The evaluation is good enough to mean something on this corpus.
    assert report["modes"]["hybrid"]["recall@10"] > 0.8


@pytest.mark.usefixtures("engine")
def test_cli_eval_and_compare(small: str, tmp_path: Path, rl_home: Path) -> None:
    golden = write_golden(tmp_path / "golden.jsonl")
    runner = CliRunner()
    out = tmp_path / "base"
    res = runner.invoke(
        app, ["eval", small, "--golden", str(golden), "--k", "5,1", "--out", str(out), "--json", *_cli_db(rl_home)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["ks"] == [1, 5]
    assert set(data["modes"]) == {"hybrid", "lexical", "semantic"}
    assert sorted(Path(f).name for f in data["files"])[0] == "plot.png"
    # `eval run` is the same command.
    res2 = runner.invoke(
        app,
        [
            "eval",
            "run",
            small,
            "--golden",
            str(golden),
            "--k",
            "1,5",
            "--modes",
            "semantic",
            "--json",
            *_cli_db(rl_home),
        ],
    )
    assert res2.exit_code == 0, res2.output
    assert json.loads(res2.output)["modes"]["semantic"] == data["modes"]["semantic"]
    # Same report twice: the gate passes, nothing differs.
    ok = runner.invoke(app, ["eval", "compare", str(out / "report.json"), str(out / "report.json")])
    assert ok.exit_code == 0, ok.output
    assert "PASS" in ok.output and "no manifest field or search parameter differs" in ok.output
    bad = runner.invoke(app, ["eval", small, "--golden", str(golden), "--k", "0", *_cli_db(rl_home)])
    assert bad.exit_code == 2
    assert "cutoff 0 is out of range" in bad.output
