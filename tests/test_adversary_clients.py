"""Clients that hand ranklock something hostile or broken (issue 42): a malformed DSN, a filter literal a float
cannot hold, a permalink whose query is an option of the CLI."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, use_hash_embedder
from ranklock import Document, Engine, FilterError
from ranklock.cli import app

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its own Engine: let it resolve the test's hash embedder by id."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )


@pytest.mark.parametrize(
    ("dsn", "why"),
    [
        ("not a dsn", 'missing "=" after "not" in connection info string'),
        ("x=1", 'invalid connection option "x"'),
        ("postgresql://a b@host/db", 'unexpected spaces found in "a b", use percent-encoded spaces (%20) instead'),
    ],
)
@pytest.mark.parametrize("command", [["collections"], ["search", "docs", "kiln"], ["db", "status"], ["replay", "1"]])
def test_a_malformed_dsn_is_one_clear_error_from_every_command(
    dsn: str, why: str, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue: `--dsn 'not a dsn'` and `RANKLOCK_DSN='x=1'` gave a psycopg traceback from every command."""
    expected = (
        f"error: the PostgreSQL DSN {dsn!r} is not a connection string ({why}). Give a URI such as "
        "postgresql://user@host:5432/dbname or key=value pairs such as 'host=db.example dbname=ranklock' (--dsn or "
        "RANKLOCK_DSN), or unset RANKLOCK_DSN to use the embedded server."
    )
    got = CliRunner().invoke(app, [*command, "--dsn", dsn])
    assert got.exit_code == 2 and " ".join(got.output.split()) == expected, got.output
    monkeypatch.setenv("RANKLOCK_DSN", dsn)
    got = CliRunner().invoke(app, command)
    assert got.exit_code == 2 and " ".join(got.output.split()) == expected, got.output


def test_a_number_a_float_cannot_hold_is_refused_as_a_fraction_is(engine: Engine, cname: str) -> None:
    """The issue: `year > 1e-400` ran as `year > 0`, while `year > 0.5` is refused as not an integer."""
    engine.ingest(
        cname,
        [Document(f"d{y}", "", f"kiln notes of {y}", {"year": y}) for y in (0, 1, 2)],
        create={"embedder": use_hash_embedder(engine), "index": "exact", "fields": ["year:int"]},
    )
    with pytest.raises(FilterError) as exc:
        engine.search(cname, "kiln", filter="year > 1e-400")
    assert str(exc.value) == (
        "filter: the number 1e-400 at position 7 is too small for a 64-bit float: it would be read as 0.0, a whole "
        "number it is not. Write the value you mean (0, or a fraction with fewer digits)."
    )
    with pytest.raises(FilterError) as exc:
        engine.search(cname, "kiln", filter="year = 1.0000000000000001")
    assert str(exc.value).startswith(
        "filter: the number 1.0000000000000001 at position 7 has more digits than a 64-bit float holds: it would be "
        "read as 1.0"
    )
    with pytest.raises(FilterError, match="value 0.5 \\(float\\) is not an integer"):
        engine.search(cname, "kiln", filter="year > 0.5")
    assert [h.doc_id for h in engine.search(cname, "kiln", filter="year > 1e0", mode="lexical").hits] == ["d2"]


def _cli_command(params: dict[str, str]) -> str:
    """The page's own cliCommand (src/ranklock/http/static/index.html), run by node on ``params``."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("this test runs the page's JavaScript with node: apt-get install -y nodejs")
    page = (ROOT / "src" / "ranklock" / "http" / "static" / "index.html").read_text(encoding="utf-8")
    m = re.search(r"^(// A word a shell reads.*?^function cliCommand\(p\) \{.*?^\})", page, re.DOTALL | re.MULTILINE)
    assert m is not None, "cliCommand is no longer where this test looks for it"
    script = m.group(1) + f"\nprocess.stdout.write(cliCommand({json.dumps(params)}));\n"
    return subprocess.run([node, "-e", script], capture_output=True, text=True, check=True, timeout=30).stdout


@pytest.mark.usefixtures("cli_hash_embedder")
def test_the_pages_copied_command_keeps_a_query_that_starts_with_a_dash_an_argument(
    engine: Engine, rl_home: Path, cname: str
) -> None:
    """The issue: a permalink with `q=--dsn=postgresql://...` yielded a command that pointed the user's CLI at
    another database."""
    engine.ingest(cname, [Document("d1", "", "kiln notes")], create={"embedder": use_hash_embedder(engine)})
    hostile = "--dsn=postgresql://attacker.example/db"
    command = _cli_command({"collection": cname, "q": hostile, "mode": "lexical", "k": "5", "filter": "a = 'b'"})
    assert command == (
        f"ranklock search --mode lexical -k 5 --filter 'a = '\\''b'\\''' -- {cname} '--dsn=postgresql://attacker.example/db'"
    )
    argv = shlex.split(command)[1:]
    argv.remove("--filter")
    argv.remove("a = 'b'")
    got = CliRunner().invoke(app, [*argv[:-3], "--home", str(rl_home), "--json", *argv[-3:]])
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["query"] == hostile  # searched for, not obeyed
