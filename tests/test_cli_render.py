"""Terminal output a person can read at 80 columns, plain text through a pipe, and --format for tools."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, use_hash_embedder
from ranklock import Document, Engine
from ranklock.cli import app

COLL = "t_cli_render"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BOX = set("─│┃━┏┓┗┛┡┩╇╈┼├┤┌┐└┘╭╮╰╯")
FILLER = (
    "The archive keeps letters, ledgers and maps from the old port authority, catalogued by year and by ship. "
    "Visitors may read them in the reading room on weekdays; copies are made on request for a small fee. "
)
DOCS = [
    ("harbour-ledger-1887", 1887, "Harbour ledger of 1887. " + FILLER * 2 + "The harbour master signed each page."),
    ("lighthouse-log", 1902, "Lighthouse keeper's log. " + FILLER + "Storms closed the harbour twice that winter."),
    ("ship-manifest-schooner-ada", 1899, "Manifest of the schooner Ada: salt, timber and coffee. " + FILLER),
    ("customs-letters", 1911, "Letters from the customs office about tariffs on coffee. " + FILLER * 3),
    ("map-of-the-bay", 1875, "A survey map of the bay and its harbour, with soundings in fathoms."),
]


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    emb = use_hash_embedder(engine)
    engine.create_collection(COLL, fields=["year:int"], embedder=emb)
    engine.ingest(COLL, [Document(i, "", body, {"year": y}) for i, y, body in DOCS], replace=True)
    return COLL


@pytest.fixture(autouse=True)
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its own Engine: let it resolve the test's hash embedder by id."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )


def cli(rl_home: Path, *args: str, terminal: bool = False) -> tuple[int, str, str]:
    # FORCE_COLOR makes rich treat stdout as a terminal (colour on); without it CliRunner's stdout is a pipe.
    env = {"COLUMNS": "80", "TERM": "xterm-256color", "FORCE_COLOR": "1" if terminal else None}
    r = CliRunner().invoke(app, [*args, "--home", str(rl_home)], env=env)
    return r.exit_code, r.stdout, r.stderr


def test_search_at_80_columns_is_one_short_block_per_hit(engine: Engine, coll: str, rl_home: Path) -> None:
    rc, out, err = cli(rl_home, "search", coll, "harbour coffee ledger", "-k", "4", terminal=True)
    assert rc == 0, err
    res = engine.search(coll, "harbour coffee ledger", k=4)
    plain = ANSI.sub("", out)
    lines = plain.splitlines()
    assert max(len(line) for line in lines) <= 80
    for h in res.hits:
        lex = "lex -" if h.lexical_rank is None else f"lex #{h.lexical_rank} ({h.lexical_score:.3f})"
        sem = "sem -" if h.semantic_rank is None else f"sem #{h.semantic_rank} (d {h.semantic_distance:.3f})"
        head = f"{h.rank:>2}. {h.doc_id}  fused {h.score:.5f}  {lex}  {sem}"
        i = lines.index(head)
        n = next(j for j in range(i + 1, len(lines)) if not lines[j].startswith("    ")) - i - 1
        # The snippet: two lines for a long text, one for a short one.
        assert n == (2 if len(h.text) > 2 * 76 else 1)
    summary = next(line for line in lines if not line.startswith(" "))
    assert summary.startswith(f"{len(res.hits)} of k=4 from snapshot {res.snapshot.id}")
    # No filter: the documents searched, never "match the filter" (issue 45); one document is "1 document".
    footer = " ".join(lines[lines.index(summary) :])
    assert f"; {res.matching_count} documents searched, complete=" in footer and "filter" not in footer
    _, filtered, _ = cli(rl_home, "search", coll, "harbour", "--filter", "year = 1902")
    assert "; 1 document matches the filter, complete=True" in " ".join(filtered.split())
    # Long texts are cut to two lines with an ellipsis; the query terms are bold.
    ledger = lines[lines.index(next(x for x in lines if "harbour-ledger-1887" in x)) + 2]
    assert ledger.endswith("…")
    assert re.search(r"\x1b\[1;33mharbour\x1b\[0m", out) and re.search(r"\x1b\[1;33mcoffee\x1b\[0m", out)


def test_search_is_plain_when_stdout_is_not_a_terminal(coll: str, rl_home: Path) -> None:
    rc, out, err = cli(rl_home, "search", coll, "harbour coffee ledger", "-k", "4")
    assert rc == 0, err
    assert "\x1b" not in out and not BOX & set(out)
    _, tty, _ = cli(rl_home, "search", coll, "harbour coffee ledger", "-k", "4", terminal=True)
    assert hits_part(out) == hits_part(tty)


def hits_part(out: str) -> list[str]:
    """The hit blocks, without the summary lines (timings and the query-log id vary run to run)."""
    lines = ANSI.sub("", out).splitlines()
    return lines[: next(i for i, line in enumerate(lines) if " of k=" in line)]


def test_search_format_trec_parses_as_a_run(engine: Engine, coll: str, rl_home: Path) -> None:
    rc, out, err = cli(rl_home, "search", coll, "harbour coffee", "-k", "5", "--format", "trec", "--qid", "q7")
    assert rc == 0, err
    rows = [line.split() for line in out.splitlines()]
    res = engine.search(coll, "harbour coffee", k=5)
    assert [r[0] for r in rows] == ["q7"] * len(res.hits) and {r[1] for r in rows} == {"Q0"}
    assert [r[2] for r in rows] == [h.doc_id for h in res.hits]
    assert [int(r[3]) for r in rows] == list(range(1, len(res.hits) + 1))
    # The fused scores themselves, every digit (issue 45: a later page once wrote 0, -1, -2).
    assert [float(r[4]) for r in rows] == [h.score for h in res.hits]
    assert {r[5] for r in rows} == {"ranklock-hybrid"} and all(len(r) == 6 for r in rows)
    # A later page: ranks go on from the offset, with that page's real scores.
    rc, out, err = cli(rl_home, "search", coll, "harbour coffee", "-k", "2", "--offset", "2", "--format", "trec")
    assert rc == 0, err
    page = [line.split() for line in out.splitlines()]
    assert [(r[2], int(r[3]), float(r[4])) for r in page] == [(h.doc_id, h.rank, h.score) for h in res.hits[2:4]]
    assert [int(r[3]) for r in page] == [3, 4] and all(float(r[4]) > 0 for r in page)


def test_search_format_json_is_the_json_flag_and_jsonl_is_one_hit_per_line(
    engine: Engine, coll: str, rl_home: Path
) -> None:
    _, by_flag, _ = cli(rl_home, "search", coll, "harbour", "--json")
    _, by_format, _ = cli(rl_home, "search", coll, "harbour", "--format", "json")
    assert by_flag == by_format == engine.search(coll, "harbour").to_json(served_by=True) + "\n"
    rc, out, _ = cli(rl_home, "search", coll, "harbour", "--format", "jsonl")
    assert rc == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["doc_id"] for r in rows] == [h["doc_id"] for h in json.loads(by_flag)["hits"]]
    assert {r["query"] for r in rows} == {"harbour"} and {r["collection"] for r in rows} == {coll}


def test_format_errors_exit_2_with_the_fix(coll: str, rl_home: Path) -> None:
    rc, out, err = cli(rl_home, "search", coll, "harbour", "--json", "--format", "trec")
    assert rc == 2 and err == ""  # asked for JSON: the error is JSON (tests/test_cli_json_errors.py)
    assert json.loads(out)["error"]["message"] == (
        "--json and --format trec disagree; pass one of them (--json means --format json)."
    )
    rc, _, err = cli(rl_home, "snapshot", "list", coll, "--format", "trec")
    assert rc == 2 and "snapshot list has no --format 'trec'; use one of table, json, jsonl." in err
    rc, _, err = cli(rl_home, "search", coll, "harbour", "--format", "xml")
    assert rc == 2 and "search has no --format 'xml'; use one of table, json, jsonl, trec." in err
    assert "Traceback" not in err


def test_snapshot_list_fits_80_columns(engine: Engine, coll: str, rl_home: Path) -> None:
    rc, out, err = cli(rl_home, "snapshot", "list", coll, terminal=True)
    assert rc == 0, err
    lines = ANSI.sub("", out).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == ["id", "status", "parent", "docs", "chunks", "manifest", "built", "(UTC)"]
    snaps = engine.list_snapshots(coll)
    active = next(s.as_dict() for s in snaps if s.active)
    row = next(line for line in lines if line.split()[:1] == [str(active["id"])])
    assert "ready (active)" in row and str(active["manifest_hash"])[:12] in row
    rc, plain, _ = cli(rl_home, "snapshot", "list", coll)
    assert "\x1b" not in plain and not BOX & set(plain)
    _, jl, _ = cli(rl_home, "snapshot", "list", coll, "--format", "jsonl")
    assert [json.loads(x)["id"] for x in jl.splitlines()] == [s.id for s in snaps]


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    p = tmp_path / "golden.jsonl"
    rows = [
        {"id": "q1", "query": "harbour ledger", "expected": ["harbour-ledger-1887"]},
        {"id": "q2", "query": "schooner salt timber", "expected": ["ship-manifest-schooner-ada"]},
        {"id": "q3", "query": "survey soundings", "expected": ["map-of-the-bay"]},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_eval_summary_fits_80_columns_with_whole_headers(coll: str, rl_home: Path, golden: Path) -> None:
    rc, out, err = cli(rl_home, "eval", coll, "--golden", str(golden), terminal=True)
    assert rc == 0, err
    lines = ANSI.sub("", out).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == ["metric", "hybrid", "lexical", "semantic"]
    names = [line[:16].strip() for line in lines[2:10]]
    assert names == ["recall@10", "recall@50", "recall@100", "ndcg@10", "ndcg@50", "ndcg@100", "mrr", "lexical ranker"]
    assert lines[10].startswith("3 queries from ")
    _, plain, _ = cli(rl_home, "eval", coll, "--golden", str(golden))
    assert "\x1b" not in plain and not BOX & set(plain)
    rc, jl, _ = cli(rl_home, "eval", coll, "--golden", str(golden), "--format", "jsonl")
    assert rc == 0 and [json.loads(x)["mode"] for x in jl.splitlines()] == ["hybrid", "lexical", "semantic"]


def test_eval_format_trec_is_one_run(engine: Engine, coll: str, rl_home: Path, golden: Path) -> None:
    rc, out, err = cli(rl_home, "eval", coll, "--golden", str(golden), "--modes", "lexical", "--format", "trec")
    assert rc == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert {r[0] for r in rows} == {"q1", "q2", "q3"} and {r[5] for r in rows} == {"ranklock-lexical"}
    q1 = [r[2] for r in rows if r[0] == "q1"]
    assert q1 == [h.doc_id for h in engine.search(coll, "harbour ledger", k=100, mode="lexical").hits]
    rc, _, err = cli(rl_home, "eval", coll, "--golden", str(golden), "--format", "trec")
    assert rc == 2
    assert "--format trec writes one run, and this evaluation has 3 modes (hybrid, lexical, semantic); " in err


def test_spinner_on_stderr_only_for_a_terminal(coll: str, rl_home: Path) -> None:
    wait = "searching (the first search starts the embedding service: a few seconds)…"
    rc, out, err = cli(rl_home, "search", coll, "ledger spinner", "-k", "1", terminal=True)
    assert rc == 0 and wait in err and wait not in out
    rc, out, err = cli(rl_home, "search", coll, "ledger spinner", "-k", "1")
    assert rc == 0 and err == "" and wait not in out
    rc, _, err = cli(rl_home, "search", coll, "ledger spinner", "-k", "1", "--mode", "lexical", terminal=True)
    assert rc == 0 and "searching…" in err and wait not in err


def test_collection_list_is_collections(rl_home: Path, coll: str) -> None:
    rc, listed, _ = cli(rl_home, "collection", "list", "--json")
    rc2, plain, _ = cli(rl_home, "collections", "--json")
    assert rc == rc2 == 0 and listed == plain and coll in [c["name"] for c in json.loads(listed)["collections"]]


def test_text_cut_in_a_table_ends_with_an_ellipsis_at_a_word() -> None:
    from ranklock.cli.render import clip

    text = "Recall is the ceiling:\na retrieval-augmented generator cannot cite a passage it never retrieved."
    assert clip(text, 70) == "Recall is the ceiling: a retrieval-augmented generator cannot cite a…"
    assert len(clip(text, 70)) <= 70
    assert clip("pump seals", 70) == "pump seals"
    assert clip("x" * 100, 10) == "x" * 9 + "…"  # one long word: cut inside it, still marked
