"""Every example of README.md and docs/*.md runs, as written, on a real embedded PostgreSQL.

The blocks run in one session, README first, then docs/*.md by name, in a working folder that holds a
copy of ``examples/`` and nothing else: a fresh data directory (its own embedded PostgreSQL), the
``ranklock`` command of this checkout, the embedding service on as for any user.  README's tour
ingests the small ``examples/corpus.jsonl`` once and the other pages search what it made.
tests/docs_blocks.py says which blocks run and how; a block that must not run says why, and the
test of the markers fails on a block that does neither.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from docs_blocks import (
    ROOT,
    SHELL,
    Block,
    blocks,
    console_steps,
    doc_files,
    explain_mismatch,
    is_runnable,
    marker_problems,
    output_matches,
    ranklock_invocations,
)
from ranklock import Engine
from ranklock.cli import app

#: Longest one block may run (a first command starts PostgreSQL and the embedding service).
BLOCK_TIMEOUT_S = 600


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks(path)[0]]


def test_every_block_runs_or_says_why_not() -> None:
    problems = [p for path in doc_files() for p in blocks(path)[1]]
    problems += [p for b in all_blocks() for p in marker_problems(b)]
    assert problems == []
    # The scan sees what it polices: README's tour and Python API, and blocks marked on purpose.
    assert sum(is_runnable(b) for b in blocks(ROOT / "README.md")[0]) >= 5
    assert any(b.not_run for b in all_blocks())


def _parse_cli(args: list[str]) -> None:
    """Parse ``ranklock ARGS`` as the CLI would, down to the command, without running it."""
    from typer.core import TyperGroup

    cmd: Any = typer.main.get_command(app)
    ctx = cmd.make_context("ranklock", list(args))
    while isinstance(cmd, TyperGroup):
        name, sub, rest = cmd.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        ctx = sub.make_context(name, rest, parent=ctx)
        cmd = sub


def test_blocks_that_do_not_run_still_compile_and_parse() -> None:
    checked = 0
    failures: list[str] = []
    for b in all_blocks():
        if b.not_run is None:
            continue
        if b.lang == "python":
            try:
                compile(b.code, b.where, "exec")
            except SyntaxError as exc:
                failures.append(f"{b.where}: {exc}")
            checked += 1
        elif b.lang in (*SHELL, "console", ""):
            console = any(line.startswith("$ ") for line in b.code.splitlines())
            for args in ranklock_invocations(b.code, console=console):
                try:
                    _parse_cli(args)
                except (Exception, SystemExit) as exc:
                    failures.append(f"{b.where}: ranklock {' '.join(args)}: {type(exc).__name__}: {exc}")
                checked += 1
    assert failures == []
    assert checked >= 10  # the demos, the replicas, the resume commands, the filters' illustrations


class DocsSession:
    """The working folder, the environment of its shell, and the namespace of each page's Python."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        shutil.copytree(ROOT / "examples", workdir / "examples")
        bindir = str(Path(sys.executable).parent)
        # A new user's environment: no RANKLOCK_* from the test run (its DSN, its service setting).
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOCK_")}
        # And a per-user data folder of its own: the home every command of the pages finds (ranklock.home).
        self.data_home = str(workdir / "user-data")
        self.env.update(
            PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            COLUMNS="100",
            NO_COLOR="1",
            XDG_DATA_HOME=self.data_home,
        )
        self.env.pop("FORCE_COLOR", None)

    def shell(self, command: str, *, check: bool) -> tuple[int, str]:
        """Exit status, and stdout followed by stderr (so a page shows results before notes and bars)."""
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command] if check else ["bash", "-o", "pipefail", "-c", command],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
        )
        return proc.returncode, proc.stdout + proc.stderr

    def run_block(self, b: Block, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
        if b.lang in SHELL:
            rc, out = self.shell(b.code, check=True)
            assert rc == 0, f"{b.where}: the block exited {rc}:\n{b.code}\n--- output ---\n{out[-4000:]}"
        elif b.lang == "console":
            for command, expected in console_steps(b.code):
                rc, out = self.shell(command, check=False)
                if expected:
                    assert output_matches(expected, out), f"{b.where}: $ {command}\n{explain_mismatch(expected, out)}"
                else:
                    assert rc == 0, f"{b.where}: $ {command} exited {rc}:\n{out[-4000:]}"
        else:
            self.run_python(b, ns, monkeypatch)

    def run_python(self, b: Block, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(self.workdir)
        for key in [k for k in os.environ if k.startswith("RANKLOCK_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("PATH", self.env["PATH"])
        monkeypatch.setenv("XDG_DATA_HOME", self.data_home)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(b.code, b.where, "exec"), ns)
        except Exception:
            pytest.fail(
                f"{b.where}: the block raised\n{traceback.format_exc()}\n--- output ---\n{out.getvalue()[-4000:]}"
            )


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsSession]:
    s = DocsSession(tmp_path_factory.mktemp("docs-run"))
    yield s
    # A page that starts a server in the background writes its pid to NAME.pid (docs/http.md) and stops it in
    # its last block; a page that failed before that block leaves it running: stopped here.
    for pidfile in s.workdir.glob("*.pid"):
        with contextlib.suppress(ValueError, OSError):
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
    # `ranklock db stop` as a user would: the embedded server and the embedding service of the folder.
    s.shell("ranklock db stop", check=False)


@pytest.fixture
def page_engines(monkeypatch: pytest.MonkeyPatch) -> list[Engine]:
    """Every Engine a page makes (``eng = Engine()``, a retriever's ``Engine()``), to close after it."""
    made: list[Engine] = []
    init = Engine.__init__

    def recording(self: Engine, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Engine, "__init__", recording)
    return made


@pytest.mark.parametrize(
    "page", [p.relative_to(ROOT).as_posix() for p in doc_files() if any(is_runnable(b) for b in blocks(p)[0])]
)
def test_page_runs_as_written(
    session: DocsSession, page: str, monkeypatch: pytest.MonkeyPatch, page_engines: list[Engine]
) -> None:
    ns: dict[str, Any] = {"__name__": "__docs__"}
    try:
        for b in blocks(ROOT / page)[0]:
            if is_runnable(b):
                session.run_block(b, ns, monkeypatch)
    finally:
        for eng in page_engines:  # closed, so no pool outlives the page
            eng.close()


def test_what_the_pages_leave_in_their_folder_is_ignored_by_git(session: DocsSession) -> None:
    """Issue 45: the README's tour, run from the clone's root, left an untracked `report/`; all it writes is ignored.

    After the pages ran (the tests above, in this module's session), whatever they left beside
    ``examples/`` and the user's data folder is an output, and ``.gitignore`` must say so.
    """
    left = sorted(
        p.name + ("/" if p.is_dir() else "")
        for p in session.workdir.iterdir()
        if p.name not in ("examples", Path(session.data_home).name)
    )
    got = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(left),
        capture_output=True,
        text=True,
    )
    assert sorted(got.stdout.split()) == left


#: Lines README.md cannot lose: without each, a later block fails (so a README that drifts from the
#: code, or loses a step, fails `make check`).  (line, the page's block that then fails, what it says)
LOAD_BEARING = [
    (
        "ranklock ingest docs examples/corpus.jsonl        # BEIR corpus.jsonl, plain JSONL, or a folder of files\n",
        # Without it nothing is written before the first search: the home does not exist (ranklock.home).
        "error: no ranklock home at ",
    ),
    (
        "eng = Engine()                      # embedded server in the home (above); Engine(dsn=...) or RANKLOCK_DSN for your own\n",
        "NameError: name 'eng' is not defined",
    ),
]


@pytest.mark.parametrize(("line", "failure"), LOAD_BEARING, ids=["shell-ingest", "python-engine"])
def test_a_readme_without_a_line_it_depends_on_fails(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, line: str, failure: str
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count(line) == 1
    mutated = tmp_path_factory.mktemp("readme") / "README.md"
    mutated.write_text(readme.replace(line, ""), encoding="utf-8")
    s = DocsSession(tmp_path_factory.mktemp("docs-mutant"))
    ns: dict[str, Any] = {"__name__": "__docs__"}
    try:
        with pytest.raises(pytest.fail.Exception if "Error" in failure else AssertionError) as e:
            for b in blocks(mutated)[0]:
                # The Python blocks alone for a Python line: the shell's ingest would only add time.
                if is_runnable(b) and (b.lang == "python") == ("Error" in failure):
                    s.run_block(b, ns, monkeypatch)
        assert failure in str(e.value)
    finally:
        s.shell("ranklock db stop", check=False)
