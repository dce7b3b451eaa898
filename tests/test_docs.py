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
