"""``ranklock eval COLLECTION --golden QUESTIONS --answers`` end to end on a slice of the journal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, use_hash_embedder
from ranklock import Engine
from ranklock.domains.journal import JOURNAL_CREATE, QUESTION_CLASSES, generate_journal, questions_jsonl
from ranklock.domains.journal.questions import load_questions, shipped_questions_path
from ranklock.eval.answer_correctness import answer_correct
from ranklock.eval.reranker_trigger import explain_verdict


def _cli_db(rl_home: Path) -> list[str]:
    dsn = os.environ.get("RANKLOCK_TEST_DSN")
    return ["--dsn", dsn] if dsn else ["--home", str(rl_home)]


@pytest.fixture
def journal_slice(engine: Engine, cname: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """Two questions of every class, their gold notes plus 80 others, ingested with the hash embedder."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )
    j = generate_journal()
    qs = load_questions(shipped_questions_path())
    picked = [q for c in QUESTION_CLASSES for q in [x for x in qs if x.cls == c][:2]]
    # The date-filtered unanswerable questions (2022, before the journal starts) are the last ones.
    picked[-1] = next(q for q in reversed(qs) if q.cls == "unanswerable" and q.filter is not None)
    keep = {g for q in picked for g in q.gold} | {n.doc_id for n in j.notes[:80]}
    docs = [d for d in j.documents() if d.doc_id in keep]
    engine.ingest(cname, docs, create={**JOURNAL_CREATE, "embedder": use_hash_embedder(engine)})
    path = tmp_path / "questions.jsonl"
    path.write_text(questions_jsonl(picked), encoding="utf-8")
    return cname, path


def test_eval_answers_end_to_end(
    engine: Engine, journal_slice: tuple[str, Path], tmp_path: Path, rl_home: Path
) -> None:
    from ranklock.cli import app

    coll, path = journal_slice
    out = tmp_path / "out"
    args = ["eval", coll, "--golden", str(path), "--answers", "--modes", "hybrid,lexical", "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--json", *_cli_db(rl_home)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["files"] == [str(out / "answers.json"), str(out / "answers.md")]
    rep = json.loads((out / "answers.json").read_text(encoding="utf-8"))
    questions = {q.id: q for q in load_questions(path)}
    assert [(r["mode"], r["generator"]) for r in rep["runs"]] == [("hybrid", "extractive"), ("lexical", "extractive")]
    for run in rep["runs"]:
        assert set(run["by_class"]) == set(QUESTION_CLASSES)
        # Recall comes from the same search, in the run's mode.
        for qid, row in rep["retrieval"][run["mode"]]["per_question"].items():
            q = questions[qid]
            hits = engine.search(coll, q.question, k=10, mode=run["mode"], filter=q.filter).hits
            ranking = list(dict.fromkeys(h.doc_id for h in hits))
            assert row["ranks"] == {d: r for r, d in enumerate(ranking, 1) if d in q.gold}
            if q.gold:
                assert row["recall@10"] == sum(1 for d in ranking[:10] if d in q.gold) / len(q.gold)
        # Ask ran with the run's retrieval mode: its chunks are that mode's top 8.
        for qid, row in run["per_question"].items():
            q = questions[qid]
            if row["chunks"]:
                hits = engine.search(coll, q.question, k=8, mode=run["mode"], filter=q.filter).hits
                assert row["chunks"] == [h.doc_id for h in hits]
            assert set(row["cited"]) <= set(row["chunks"])
            if q.gold:
                assert row["correct"] == ((not row["abstained"]) and answer_correct(row["answer"], q.answer))
        answerable = [q for q in questions.values() if q.gold]
        correct = sum(1 for q in answerable if run["per_question"][q.id]["correct"])
        assert run["overall"]["correctness"] == correct / len(answerable)
        # The question filtered to 2022 retrieves nothing: abstaining is right.
        dated = [q for q in questions.values() if q.cls == "unanswerable" and q.filter is not None]
        assert dated and all(run["per_question"][q.id]["abstained"] for q in dated)
        for cls, t in run["trigger"].items():
            m = run["by_class"][cls]
            assert t["message"] == explain_verdict(
                t["verdict"], m["recall@10"], m["correctness"], t["buried"], t["generator_missed"]
            )
    assert "## extractive over lexical retrieval" in (out / "answers.md").read_text(encoding="utf-8")

    table = CliRunner().invoke(app, ["eval", coll, "--golden", str(path), "--answers", *_cli_db(rl_home)])
    assert table.exit_code == 0, table.output
    assert "extractive over hybrid retrieval" in table.stdout
    assert "extractive over lexical retrieval" in table.stdout


def test_eval_answers_reports_a_broken_question_file(tmp_path: Path, rl_home: Path) -> None:
    from ranklock.cli import app

    bad = tmp_path / "questions.jsonl"
    bad.write_text('{"id": "q1", "class": "gossip", "question": "x?", "gold": [], "answer": ""}\n', encoding="utf-8")
    res = CliRunner().invoke(app, ["eval", "journal", "--golden", str(bad), "--answers", *_cli_db(rl_home)])
    assert res.exit_code == 2
    assert (
        f"{bad}:1: unknown question class 'gossip'; use one of person, codename, date, paraphrase, multi, pt_es, "
        "unanswerable." in " ".join(res.stderr.split())
    )
