"""Docs that cannot drift: the CLI reference is generated and checked here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ranklock

ROOT = Path(__file__).resolve().parents[1]


def test_cli_reference_is_current() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_public_api_is_pinned() -> None:
    assert sorted(ranklock.__all__) == sorted(
        [
            "AccessError",
            "AsyncEngine",
            "ChunkerParams",
            "CollectionInfo",
            "ConfigError",
            "DatabaseError",
            "DatabaseUnavailable",
            "Document",
            "EmbedderError",
            "Engine",
            "ExtensionError",
            "FieldSpec",
            "FilterError",
            "Forbidden",
            "Hit",
            "HostNotAllowed",
            "IngestError",
            "IngestReport",
            "InputError",
            "InsufficientResources",
            "LimitExceeded",
            "NotFound",
            "QueryError",
            "QueryTimeout",
            "RanklockError",
            "RequestTimeout",
            "RequestTooLarge",
            "SearchParams",
            "SearchResult",
            "Settings",
            "SnapshotDetail",
            "SnapshotError",
            "SnapshotInfo",
            "TooManyRequests",
            "Unauthorized",
            "__version__",
        ]
    )
    for name in ranklock.__all__:
        assert hasattr(ranklock, name)


def test_the_readme_set_up_puts_ranklock_on_the_path() -> None:
    """Issue 41: after `make install demo` a new shell said `ranklock: command not found`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme[readme.index("## Set-up") : readme.index("## Use")]
    assert "make install demo\n. .venv/bin/activate" in setup
    # And the integrations' extras, which `make install` leaves out, are named with their install command.
    assert "pip install -c constraints.txt -e '.[langchain,llamaindex]'" in readme
