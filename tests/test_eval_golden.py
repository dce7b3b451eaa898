"""Golden-set readers: BEIR folders, hand-labelled JSONL and YAML, and their error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranklock.errors import InputError
from ranklock.eval.golden import load_golden, load_queries


def _beir(root: Path, qrels: str) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": i, "text": t}) for i, t in [("1", "alpha"), ("2", "beta"), ("3", "gamma")]) + "\n"
    )
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


def test_beir_folder_with_graded_qrels(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\n1\td1\t2\n1\td2\t1\n1\td3\t0\n3\td9\t0\n")
    gs = load_golden(root)
    assert gs.format == "beir"
    assert [q.qid for q in gs.queries] == ["1"]
    assert gs.queries[0].text == "alpha"
    assert dict(gs.queries[0].judgments) == {"d1": 2, "d2": 1, "d3": 0}
    assert gs.queries[0].relevant == {"d1": 2, "d2": 1}
    assert gs.skipped == ["3"]  # judged, but nothing relevant: trec_eval cannot score it
    assert load_golden(root / "qrels" / "test.tsv").digest() == gs.digest()
    assert load_queries(root) == [("1", "alpha", None)]


def test_beir_errors_name_file_and_line(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\n1\td1\thigh\n")
    with pytest.raises(InputError) as exc:
        load_golden(root)
    assert str(exc.value) == f"{root}/qrels/test.tsv:2: relevance 'high' is not an integer; grades are 0, 1, 2, …"
    with pytest.raises(InputError, match=r"no such qrels file; available: test.tsv"):
        load_golden(root, split="dev")


def test_hand_labelled_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "g.jsonl"
    p.write_text(
        '{"query": "vaccines", "expected": ["d1", "d2"], "grades": [2, 1]}\n'
        "\n"
        '{"id": "q7", "query": "prices", "expected": {"d3": 1}, "filter": "year = 2024"}\n'
    )
    gs = load_golden(p)
    assert [(q.qid, q.text, dict(q.judgments), q.filter) for q in gs.queries] == [
        ("1", "vaccines", {"d1": 2, "d2": 1}, None),
        ("q7", "prices", {"d3": 1}, "year = 2024"),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"query": "x"}', '"expected" must be a non-empty list of document ids or a mapping id -> grade; got null.'),
        ('{"query": "", "expected": ["a"]}', '"query" must be a non-empty string; got "".'),
        ('{"query": "x", "expected": ["a"], "grades": [1, 2]}', '"grades" must be a list as long as "expected"'),
        ('{"query": "x", "expected": ["a"], "weight": 3}', "unknown key(s) weight; allowed: expected, filter, grades"),
        ("{not json", "not valid JSON"),
    ],
)
def test_hand_labelled_errors(tmp_path: Path, line: str, message: str) -> None:
    p = tmp_path / "g.jsonl"
    p.write_text('{"query": "ok", "expected": ["a"]}\n' + line + "\n")
    with pytest.raises(InputError) as exc:
        load_golden(p)
    assert str(exc.value).startswith(f"{p}:2: ")
    assert message in str(exc.value)


def test_hand_labelled_yaml_reports_lines(tmp_path: Path) -> None:
    p = tmp_path / "g.yaml"
    p.write_text(
        "queries:\n"
        "  - query: vaccines\n"
        "    expected: [d1, d2]\n"
        "  - query: prices\n"
        "    expected: {d3: 2}\n"
        "    filter: {year: 2024}\n"
        "  - query: broken\n"
    )
    with pytest.raises(InputError) as exc:
        load_golden(p)
    assert str(exc.value).startswith(f"{p}:7: ")
    p.write_text("\n".join(p.read_text().splitlines()[:6]) + "\n")
    gs = load_golden(p)
    assert [(q.qid, dict(q.judgments), q.filter) for q in gs.queries] == [
        ("2", {"d1": 1, "d2": 1}, None),
        ("4", {"d3": 2}, {"year": 2024}),
    ]


def test_query_files_for_stability(tmp_path: Path) -> None:
    t = tmp_path / "q.txt"
    t.write_text("first query\n\nsecond\n")
    assert load_queries(t) == [("1", "first query", None), ("3", "second", None)]
    j = tmp_path / "q.jsonl"
    j.write_text('{"_id": "a", "text": "x"}\n{"query": "y"}\n')
    assert load_queries(j) == [("a", "x", None), ("2", "y", None)]
    with pytest.raises(InputError, match="unknown format"):
        load_golden(tmp_path / "q.txt")
