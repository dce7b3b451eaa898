"""The code blocks of README.md and docs/*.md, and how tests/test_docs_run.py runs them.

Every fenced block either runs or says why not:

* ```` ```sh ```` / ```` ```bash ````: a shell script, run with ``bash -euo pipefail`` in the docs' working
  folder (a copy of ``examples/`` next to a fresh ``.ranklock``); every command must succeed.
* ```` ```console ````: a shell session.  ``$ command`` lines run one by one; the lines after each are the
  output it must print (stdout, then stderr; whitespace-insensitive; ``...`` stands for any text).
* ```` ```python ````: run with ``exec`` in one namespace per file, in order, so a later block may use what
  an earlier one made (``eng``); every Engine a file made is closed after it.
* anything else, and any block that must not run, carries ``<!-- not run: REASON -->`` on the line just
  above its fence.  The reason is required, and a not-run block is still checked: Python must compile,
  and every ``ranklock ...`` command in a shell block must parse with the real CLI (its command and
  options must exist).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = ("sh", "bash")
RUNNABLE = (*SHELL, "console", "python")

_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)\s*$")
_MARK = re.compile(r"^<!--\s*not run:(.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its info string, its text, and why it does not run (None: it runs)."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    not_run: str | None

    @property
    def where(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}"


def doc_files() -> list[Path]:
    """README.md, then docs/*.md by name: the order the blocks run in."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of ``path`` and the problems of its markers (a marker with no block under it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        mark = _MARK.match(lines[i])
        fence = _FENCE.match(lines[i])
        if mark and not (i + 1 < len(lines) and _FENCE.match(lines[i + 1])):
            problems.append(
                f"{path.relative_to(ROOT)}:{i + 1}: a <!-- not run --> marker must sit on the line just above a fence"
            )
        if fence is None:
            i += 1
            continue
        start, ticks, lang = i, fence.group(1), fence.group(2)
        j = i + 1
        while j < len(lines) and not lines[j].startswith(ticks):
            j += 1
        above = _MARK.match(lines[start - 1]) if start else None
        out.append(
            Block(
                path, start + 1, lang, "\n".join(lines[start + 1 : j]) + "\n", above.group(1).strip() if above else None
            )
        )
        i = j + 1
    return out, problems


def logical_lines(script: str) -> list[str]:
    """A shell script's lines with backslash continuations joined."""
    out: list[str] = []
    buf = ""
    for raw in script.splitlines():
        if raw.endswith("\\"):
            buf += raw[:-1] + " "
            continue
        out.append(buf + raw)
        buf = ""
    if buf:
        out.append(buf)
    return out


def console_steps(code: str) -> list[tuple[str, list[str]]]:
    """A console block as (command, expected output lines) pairs."""
    steps: list[tuple[str, list[str]]] = []
    for line in logical_lines(code):
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"output before the first '$ ' command: {line!r}")
    return steps


def ranklock_invocations(code: str, *, console: bool) -> list[list[str]]:
    """The argument lists of every ``ranklock`` command in a shell or console block."""
    lines = [c for c, _ in console_steps(code)] if console else logical_lines(code)
    found: list[list[str]] = []
    for line in lines:
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            continue  # an unbalanced quote in prose-like lines: the run itself would say so
        command: list[str] = []
        for tok in [*tokens, ";"]:
            if tok in ("&&", "||", ";", "|", "&"):
                words = [w for w in command if not re.match(r"^[A-Z_][A-Z0-9_]*=", w)]
                if words and words[0] == "ranklock":
                    found.append(words[1:])
                command = []
            else:
                command.append(tok)
    return found


def output_matches(expected: list[str], actual: str) -> bool:
    """Whether ``actual`` is ``expected`` up to whitespace, ``...`` matching any text (also across lines)."""
    want = " ".join(" ".join(expected).split())
    got = " ".join(actual.split())
    pattern = ".*?".join(re.escape(part.strip()) for part in want.split("..."))
    return re.fullmatch(pattern, got, re.DOTALL) is not None


def explain_mismatch(expected: list[str], actual: str) -> str:
    return "expected:\n  " + "\n  ".join(expected) + "\ngot:\n  " + "\n  ".join(actual.splitlines())


def is_runnable(b: Block) -> bool:
    return b.not_run is None and b.lang in RUNNABLE


def marker_problems(b: Block) -> list[str]:
    """Why ``b``'s marking is wrong: a block that neither runs nor says why, or a marker without a reason."""
    if b.not_run is None:
        if b.lang in RUNNABLE:
            return []
        kind = f"```{b.lang}" if b.lang else "a plain ```"
        return [
            f"{b.where}: {kind} block neither runs nor says why; give it a sh, console or python info string, "
            "or put <!-- not run: REASON --> on the line above"
        ]
    if not b.not_run:
        return [f"{b.where}: <!-- not run: --> needs a reason after the colon"]
    return []
