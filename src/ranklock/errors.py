"""The ranklock exception tree.

Every error ranklock raises on purpose derives from :class:`RanklockError`.
Messages state the facts (the bad value, the allowed ones, sorted so the
message is stable) and end with what to do about it::

    RanklockError
    ├── ConfigError            bad setting, bad parameter value
    ├── DatabaseError          cannot reach or use PostgreSQL
    │   ├── DatabaseUnavailable    the server cannot be reached or started, or the connection was lost
    │   ├── InsufficientResources  SQLSTATE class 53: disk full, out of memory, too many connections (503)
    │   ├── QueryTimeout           a search ran past the statement timeout (504)
    │   └── ExtensionError         pgvector missing or too old, Citus not built (`make citus`)
    ├── NotFound               unknown collection, snapshot, query id
    ├── InputError             a document, file or query that cannot be used
    │   ├── IngestError            a corpus file or document is broken
    │   ├── QueryError             empty query, bad mode, bad k
    │   └── FilterError            malformed filter, unknown field, type mismatch
    ├── EmbedderError          model cannot load, checksum or dimension mismatch
    ├── SnapshotError          a snapshot cannot be built, activated or rolled back
    ├── AccessError            a served request (HTTP) that may not be answered
    │   ├── Unauthorized           no token, a malformed, unknown or revoked one (401)
    │   ├── Forbidden              the token lacks the scope the request needs (403)
    │   └── HostNotAllowed         a Host header the server does not answer to: DNS rebinding (421)
    ├── LimitExceeded          a served request over one of its limits (ranklock.settings)
    │   ├── RequestTooLarge        a body over RANKLOCK_MAX_BODY_BYTES (413)
    │   ├── RequestTimeout         a body not received within RANKLOCK_BODY_TIMEOUT (408)
    │   └── TooManyRequests        over the token's rate or concurrency limit (429)
    ├── GenerationError        an Ask generator failed: endpoint down, reply not in the asked format
    │   └── CitationError          an answer cites something it was not given: rejected, never shown
    └── RerankError            a reranker failed: model cannot load, endpoint down, reply not a ranking
"""

from __future__ import annotations

__all__ = [
    "AccessError",
    "CitationError",
    "ConfigError",
    "DatabaseError",
    "DatabaseUnavailable",
    "EmbedderError",
    "ExtensionError",
    "FilterError",
    "Forbidden",
    "GenerationError",
    "HostNotAllowed",
    "IngestError",
    "InputError",
    "InsufficientResources",
    "LimitExceeded",
    "NotFound",
    "QueryError",
    "QueryTimeout",
    "RanklockError",
    "RequestTimeout",
    "RequestTooLarge",
    "RerankError",
    "SnapshotError",
    "TooManyRequests",
    "Unauthorized",
    "public_name",
]


class RanklockError(Exception):
    """Root of every error ranklock raises on purpose."""

    #: HTTP status the HTTP layer maps this error to.
    http_status = 500


class ConfigError(RanklockError):
    http_status = 400


class DatabaseError(RanklockError):
    http_status = 503


class DatabaseUnavailable(DatabaseError):
    pass


class ConnectionLost(DatabaseUnavailable):
    """A connection broke under a request; the server was reached again, so a read may be retried at once.

    Internal: the search retries on it (ranklock.search.pipeline); anything it reaches reports it as the
    public :class:`DatabaseUnavailable` it is (:func:`public_name`).
    """


def public_name(exc: BaseException) -> str:
    """The name an interface reports ``exc`` by: its class's, or the nearest public ranklock class it derives from."""
    for cls in type(exc).__mro__:
        if cls.__module__ == __name__ and cls.__name__ in __all__:
            return cls.__name__
    return type(exc).__name__


class ExtensionError(DatabaseError):
    pass


class InsufficientResources(DatabaseError):
    """PostgreSQL ran out of something (SQLSTATE class 53): disk, memory, connections; nothing was stored."""


class QueryTimeout(DatabaseError):
    """PostgreSQL cancelled a statement at the statement timeout; the connection is released."""

    http_status = 504


class NotFound(RanklockError):
    http_status = 404


class InputError(RanklockError):
    http_status = 400


class IngestError(InputError):
    pass


class QueryError(InputError):
    pass


class FilterError(InputError):
    pass


class EmbedderError(RanklockError):
    http_status = 409


class SnapshotError(RanklockError):
    http_status = 409


class GenerationError(RanklockError):
    # The generator is upstream of ranklock (a model server, a local model):
    # its failure is a bad gateway, not a bad request.
    http_status = 502


class CitationError(GenerationError):
    pass


class RerankError(RanklockError):
    # Like a generator, a reranker is upstream of ranklock (a model, an endpoint): a bad gateway.
    http_status = 502


class AccessError(RanklockError):
    http_status = 403


class Unauthorized(AccessError):
    http_status = 401


class Forbidden(AccessError):
    http_status = 403


class HostNotAllowed(AccessError):
    # 421 Misdirected Request: the request names a host this server is not for.
    http_status = 421


class LimitExceeded(RanklockError):
    http_status = 400


class RequestTooLarge(LimitExceeded):
    http_status = 413


class RequestTimeout(LimitExceeded):
    http_status = 408


class TooManyRequests(LimitExceeded):
    """Over a per-token limit; ``retry_after`` (seconds) is sent as the Retry-After header."""

    http_status = 429

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after
