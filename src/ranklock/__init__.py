"""ranklock: deterministic hybrid retrieval on PostgreSQL.

The same query against the same corpus snapshot returns the same results,
every time, and never silently returns less than it should.
"""

from __future__ import annotations

from ._version import __version__
from .async_engine import AsyncEngine
from .collection import CollectionInfo, FieldSpec
from .engine import Engine, IngestReport
from .errors import (
    ConfigError,
    DatabaseError,
    DatabaseUnavailable,
    EmbedderError,
    ExtensionError,
    FilterError,
    IngestError,
    InputError,
    NotFound,
    QueryError,
    QueryTimeout,
    RanklockError,
    SnapshotError,
)
from .ingest.loaders import Document
from .search.results import Hit, SearchResult
from .settings import ChunkerParams, SearchParams, Settings

__all__ = [
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
    "Hit",
    "IngestError",
    "IngestReport",
    "InputError",
    "NotFound",
    "QueryError",
    "QueryTimeout",
    "RanklockError",
    "SearchParams",
    "SearchResult",
    "Settings",
    "SnapshotError",
    "__version__",
]
