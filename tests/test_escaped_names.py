"""Names that would act on a terminal (issue 48, finding 12): ESC, BEL, a newline, a tab and U+202E in file
names reached the terminal raw (a cleared screen, a window title, a line that reads backwards) and broke
`--format trec` lines.  Every output shows them escaped (ranklock.phrasing.shown); TREC percent-encodes them
(ranklock.phrasing.trec_token), one line a hit; JSON escapes them as JSON does."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, resolve_hash_embedder_by_id
from ranklock.cli import app
from ranklock.phrasing import shown, shown_lines, trec_token


@pytest.fixture(autouse=True)
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its own Engine: let it resolve the test's hash embedder by id."""
    resolve_hash_embedder_by_id(monkeypatch)


NAMES = {
    "clear": "clear\x1b[2J\x1b]0;owned\x07.md",
    "bell": "bell\x07.md",
    "newline": "two\nlines.md",
    "tab": "tab\there.md",
    "rtl": "invoice\u202egpj.md",
    "space": "2024-03-04 standup.md",
}


@pytest.mark.usefixtures("engine")
def test_names_with_control_characters_are_shown_escaped_and_trec_keeps_one_line_a_hit(
    cname: str, rl_home: Path, tmp_path: Path
) -> None:
    """The issue: ESC, BEL, newline, tab and U+202E in file names reached the terminal raw (a cleared screen, a
    window title) and broke `--format trec` lines."""
    for i, name in enumerate(NAMES.values()):
        (tmp_path / name).write_text(f"Kiln note number {i}: bisque firing.\n")
    (tmp_path / "bad\x1b[31mred.md").write_bytes(b"\xff\xfe not UTF-8")
    home = ["--home", str(rl_home)]
    r = CliRunner().invoke(app, ["ingest", cname, str(tmp_path), *home, "--embedder", HashEmbedder.id])
    assert r.exit_code == 2
    assert "bad\\x1b[31mred.md: not UTF-8 text (byte 0)" in r.output
    r = CliRunner().invoke(
        app, ["ingest", cname, str(tmp_path), *home, "--embedder", HashEmbedder.id, "--skip-unreadable"]
    )
    assert r.exit_code == 0, r.output
    for shown_name in (
        "clear\\x1b[2J\\x1b]0;owned\\x07.md",
        "bell\\x07.md",
        "two\\nlines.md",
        "tab\\there.md",
        "invoice\\u202egpj.md",
        "2024-03-04 standup.md",
        "bad\\x1b[31mred.md",
    ):
        assert shown_name in r.output, (shown_name, r.output)
    raw = [c for c in "\x1b\x07\t\u202e" if c in r.output]
    assert raw == [], r.output
    lines = [line for line in r.output.splitlines() if line.startswith("read ")]
    assert len(lines) == len(NAMES)  # one line a file, a newline in a name or not
    r = CliRunner().invoke(app, ["search", cname, "kiln bisque", "-k", "10", "--format", "trec", *home])
    assert r.exit_code == 0, r.output
    rows = r.stdout.splitlines()
    assert len(rows) == len(NAMES) and all(len(row.split()) == 6 for row in rows), rows
    assert sorted(unquote(row.split()[2]) for row in rows) == sorted(NAMES.values())
    assert "2024-03-04%20standup.md" in r.stdout and "two%0Alines.md" in r.stdout
    r = CliRunner().invoke(app, ["search", cname, "kiln bisque", "-k", "10", *home])
    assert r.exit_code == 0 and not [c for c in "\x1b\x07\t\u202e" if c in r.stdout], r.stdout
    assert "clear\\x1b[2J\\x1b]0;owned\\x07.md" in r.stdout and "invoice\\u202egpj.md" in r.stdout
    r = CliRunner().invoke(app, ["search", cname, "kiln bisque", "-k", "10", "--json", *home])
    assert sorted(h["doc_id"] for h in json.loads(r.stdout)["hits"]) == sorted(NAMES.values())
    r = CliRunner().invoke(app, ["document", "get", cname, NAMES["clear"], *home])
    assert r.exit_code == 0 and "\x1b" not in r.stdout and "clear\\x1b[2J" in r.stdout


def test_shown_and_trec_token_escape_what_a_terminal_or_trec_eval_would_act_on() -> None:
    assert shown("clear\x1b[2J.md") == "clear\\x1b[2J.md"
    assert shown("a\nb\tc\x07d\u202ee\u00a0f") == "a\\nb\\tc\\x07d\\u202ee\\xa0f"
    assert shown("back\\slash") == "back\\\\slash" and shown("ok é 日本 x.md") == "ok é 日本 x.md"
    assert shown_lines("line \x1b one\nline two") == "line \\x1b one\nline two"
    for name in [*NAMES.values(), "100% done.md", "plain.md"]:
        token = trec_token(name)
        assert len(token.split()) == 1 and unquote(token) == name
    assert trec_token("plain.md") == "plain.md"


def test_the_unreadable_message_escapes_names_and_leaves_its_own_backslashes() -> None:
    from ranklock.ingest.formats import UnreadableFile, unreadable_error

    bad = [UnreadableFile("two\nlines.md", "markdown", "the key 'a\\x00b' holds a NUL character (\\u0000)")]
    message = str(unreadable_error(Path("/vault"), bad))
    assert message.splitlines()[1] == "  two\\nlines.md: the key 'a\\x00b' holds a NUL character (\\u0000)"
