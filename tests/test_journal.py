"""The generated journal and its labelled question set (ranklock.domains.journal)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, use_hash_embedder
from ranklock import Engine
from ranklock.domains.journal import (
    JOURNAL_CREATE,
    QUESTION_CLASSES,
    generate_journal,
    generate_questions,
    questions_jsonl,
)
from ranklock.domains.journal.generate import END, START
from ranklock.domains.journal.questions import load_questions, shipped_questions_path
from ranklock.domains.journal.wording import content_words, shared_content_words
from ranklock.eval.answer_correctness import normalise_answer

_DIGEST_SCRIPT = (
    "import hashlib\n"
    "from ranklock.domains.journal import generate_journal, generate_questions, questions_jsonl\n"
    "j = generate_journal()\n"
    "print(hashlib.sha256(j.jsonl().encode()).hexdigest(), "
    "hashlib.sha256(questions_jsonl(generate_questions(j)).encode()).hexdigest())\n"
)


def test_journal_is_byte_identical_across_runs_and_hash_seeds() -> None:
    first, second = generate_journal(), generate_journal()
    assert first.jsonl() == second.jsonl()
    here = (
        hashlib.sha256(first.jsonl().encode()).hexdigest(),
        hashlib.sha256(questions_jsonl(generate_questions(first)).encode()).hexdigest(),
    )
    # Another interpreter with another string-hash seed: set or dict iteration
    # order leaking into the output would change these bytes.
    for seed in ("4242",):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", _DIGEST_SCRIPT], env=env, capture_output=True, text=True, check=True
        )
        assert tuple(out.stdout.split()) == here


def test_another_seed_gives_another_journal() -> None:
    assert generate_journal(seed=13).jsonl() != generate_journal().jsonl()


def test_journal_shape_and_typed_fields() -> None:
    j = generate_journal()
    ids = [n.doc_id for n in j.notes]
    assert len(ids) == len(set(ids)) == 2000
    assert [n.date for n in j.notes] == sorted(n.date for n in j.notes)
    assert all(START <= n.date <= END for n in j.notes)
    assert {n.date.year for n in j.notes} == {2023, 2024, 2025}
    assert {n.lang for n in j.notes} == {"en", "pt", "es"}
    assert all(n.doc_id.startswith(n.date.isoformat() + "-") for n in j.notes)
    rec = j.notes[0].record()
    assert set(rec["metadata"]) == {"date", "people", "tags", "lang"}
    assert any("XJ-900" in n.text for n in j.notes)


def test_reversed_decisions_come_after_the_decision_they_contradict() -> None:
    j = generate_journal()
    hosting = [f for f in j.facts if f.kind == "hosting"]
    assert len(hosting) == 20
    for f in hosting:
        first, second = (j.note(i) for i in f.note_ids)
        assert first.date < second.date
        assert f"host it on {f.data['first']}" in first.text
        assert f"from {f.data['first']} to {f.data['second']}" in second.text


def test_shipped_question_file_is_what_the_generator_produces() -> None:
    shipped = shipped_questions_path().read_text(encoding="utf-8")
    assert shipped == questions_jsonl(generate_questions(generate_journal())), (
        "questions.jsonl drifted from the generator; regenerate it with `python -m ranklock.domains.journal`"
    )


def test_question_set_invariants() -> None:
    j = generate_journal()
    qs = load_questions(shipped_questions_path())
    assert len(qs) >= 200
    assert {q.cls for q in qs} == set(QUESTION_CLASSES)
    assert len({q.id for q in qs}) == len(qs)
    notes = {n.doc_id: n for n in j.notes}
    for q in qs:
        if q.cls == "unanswerable":
            assert q.gold == () and q.answer == ""
            continue
        assert q.gold and all(g in notes for g in q.gold), q.id
        # Every part of the gold answer is stated by a gold note.
        gold_text = normalise_answer(" ".join(notes[g].text for g in q.gold))
        for part in q.answer.split(";"):
            assert normalise_answer(part) in gold_text, (q.id, part)
    assert {q.lang for q in qs if q.cls == "pt_es"} == {"pt", "es"}
    assert all(notes[g].lang == q.lang for q in qs if q.cls == "pt_es" for g in q.gold)


def test_date_bounded_questions_have_their_gold_notes_inside_the_filter() -> None:
    j = generate_journal()
    qs = [q for q in load_questions(shipped_questions_path()) if q.filter is not None]
    assert {q.cls for q in qs} == {"date", "multi", "unanswerable"}
    for q in qs:
        lo, hi = (date.fromisoformat(s) for s in q.filter.split('"')[1::2])
        assert all(lo <= j.note(g).date <= hi for g in q.gold), q.id
        if q.cls == "unanswerable":
            assert not any(lo <= n.date <= hi for n in j.notes), q.id


def test_paraphrase_questions_share_no_content_word_with_their_notes() -> None:
    j = generate_journal()
    qs = [q for q in load_questions(shipped_questions_path()) if q.cls == "paraphrase"]
    assert len(qs) >= 25
    for q in qs:
        assert content_words(q.question), q.id
        for g in q.gold:
            assert shared_content_words(q.question, j.note(g).text) == set(), (q.id, q.question)


def test_content_word_rule_catches_inflected_copies() -> None:
    assert shared_content_words("Who named the dogs?", "We name a dog") == {"nam", "dog"}
    assert content_words("What is it?") == set()


def test_journal_slice_ingests_with_typed_fields_and_date_filters(engine: Engine, cname: str) -> None:
    j = generate_journal()
    docs = j.documents()[:120]
    emb = use_hash_embedder(engine)
    engine.ingest(cname, docs, create={**JOURNAL_CREATE, "embedder": emb})
    coll = engine.collection(cname)
    assert (coll.language, coll.accent) == ("english", "insensitive")
    assert [f.name for f in coll.fields] == ["date", "people", "tags", "lang"]
    first_month = [d.doc_id for d in docs if d.metadata["date"] < "2023-02-01"]
    res = engine.search(cname, "walk river weather", k=50, filter='date between "2023-01-01" and "2023-01-31"')
    assert res.hits and {h.doc_id for h in res.hits} <= set(first_month)


def test_demo_journal_builds_the_collection(engine: Engine, rl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ranklock.embed.loaded
    from ranklock.cli import app

    # The demo's own Engine embeds with the hash embedder: the pipeline is real, the meaning is not needed.
    monkeypatch.setattr(ranklock.embed.loaded, "resolve_embedder", lambda _spec: HashEmbedder())
    dsn = os.environ.get("RANKLOCK_TEST_DSN")
    res = CliRunner().invoke(app, ["demo", "journal", *(["--dsn", dsn] if dsn else ["--home", str(rl_home)])])
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert "ranklock demo journal: 2000 generated notes (seed 12) into collection 'journal'" in out
    assert "2000 documents, 2000 chunks" in out
    coll = engine.collection("journal")
    assert [f.name for f in coll.fields] == ["date", "people", "tags", "lang"]
    res2 = engine.search("journal", "XJ-900", k=50, mode="lexical")
    assert res2.hits and all("XJ-900" in h.text for h in res2.hits)


def test_unstated_questions_share_words_with_the_journal_but_name_nothing() -> None:
    """The everyday unanswerable questions mostly use the journal's own words (so the lexical branch
    finds near-misses too and only the generator's evidence can abstain); none has a gold note or a filter.
    The 8 that share no content word with any note (by ranklock.domains.journal.wording) are the
    semantic branch's alone: "Which vet treated the dog's ear infection?" against the greyhound note."""
    from ranklock.domains.journal.facts import UNSTATED_QUESTIONS

    j = generate_journal()
    vocabulary = set().union(*(content_words(n.text) for n in j.notes))
    qs = {q.question: q for q in load_questions(shipped_questions_path()) if q.cls == "unanswerable"}
    assert len(UNSTATED_QUESTIONS) == 30 and {lang for lang, _q in UNSTATED_QUESTIONS} == {"en", "pt", "es"}
    for lang, text in UNSTATED_QUESTIONS:
        assert qs[text].lang == lang and qs[text].gold == () and qs[text].filter is None
    sharing = [text for _lang, text in UNSTATED_QUESTIONS if content_words(text) & vocabulary]
    assert len(sharing) == 22
