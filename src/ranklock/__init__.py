"""ranklock: deterministic hybrid retrieval on PostgreSQL.

The same query against the same corpus snapshot returns the same results,
every time, and never silently returns less than it should.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .async_engine import AsyncEngine
    from .collection import CollectionInfo, FieldSpec
    from .engine import Engine
    from .errors import (
        AccessError,
        ConfigError,
        DatabaseError,
        DatabaseUnavailable,
        EmbedderError,
        ExtensionError,
        FilterError,
        Forbidden,
        HostNotAllowed,
        IngestError,
        InputError,
        InsufficientResources,
        LimitExceeded,
        NotFound,
        QueryError,
        QueryTimeout,
        RanklockError,
        RequestTimeout,
        RequestTooLarge,
        SnapshotError,
        TooManyRequests,
        Unauthorized,
    )
    from .ingest.document import Document
    from .search.results import Hit, SearchResult
    from .settings import ChunkerParams, SearchParams, Settings
    from .snapshot.info import SnapshotDetail, SnapshotInfo
    from .snapshot.reports import IngestReport

#: Where each public name lives.  They are imported on first use (PEP 562), not here: every
#: ``ranklock`` process runs this file, and a CLI search must not pay for importing the async
#: engine, the loaders and the model stack it never uses (bench/cli_startup.py).
_EXPORTS = {
    "AsyncEngine": "async_engine",
    "CollectionInfo": "collection",
    "FieldSpec": "collection",
    "Engine": "engine",
    "IngestReport": "snapshot.reports",
    "ConfigError": "errors",
    "DatabaseError": "errors",
    "DatabaseUnavailable": "errors",
    "EmbedderError": "errors",
    "ExtensionError": "errors",
    "FilterError": "errors",
    "IngestError": "errors",
    "InputError": "errors",
    "NotFound": "errors",
    "QueryError": "errors",
    "QueryTimeout": "errors",
    "RanklockError": "errors",
    "SnapshotError": "errors",
    "AccessError": "errors",
    "Forbidden": "errors",
    "HostNotAllowed": "errors",
    "InsufficientResources": "errors",
    "LimitExceeded": "errors",
    "RequestTimeout": "errors",
    "RequestTooLarge": "errors",
    "TooManyRequests": "errors",
    "Unauthorized": "errors",
    "Document": "ingest.document",
    "Hit": "search.results",
    "SearchResult": "search.results",
    "ChunkerParams": "settings",
    "SearchParams": "settings",
    "Settings": "settings",
    "SnapshotDetail": "snapshot.info",
    "SnapshotInfo": "snapshot.info",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ranklock' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup is a plain global
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
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
