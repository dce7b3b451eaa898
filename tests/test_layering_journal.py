"""One-way layers: the journal domain and the evaluation code never import the engine (or the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ranklock

SRC = Path(ranklock.__file__).parent
FORBIDDEN = ("ranklock.engine", "ranklock.cli", "ranklock.http")


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports, relative imports resolved."""
    package = ".".join(("ranklock", *path.relative_to(SRC).parent.parts))
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("package", ["domains", "eval"])
def test_domain_and_eval_modules_do_not_import_the_engine(package: str) -> None:
    files = sorted((SRC / package).rglob("*.py"))
    assert files
    bad = {
        str(f.relative_to(SRC)): sorted(m for m in _imports(f) if m.startswith(FORBIDDEN))
        for f in files
        if any(m.startswith(FORBIDDEN) for m in _imports(f))
    }
    assert bad == {}


def test_the_import_scan_sees_relative_imports() -> None:
    assert "ranklock.ingest.loaders.Document" in _imports(SRC / "domains" / "journal" / "generate.py")
    assert "ranklock.settings.ASK_DEPTH" in _imports(SRC / "eval" / "answers.py")
