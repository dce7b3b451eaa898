"""The edge of a search: the query text, mode, k and snapshot checked before any SQL.

Limits come from :mod:`ranklock.limits`; each error names the value, the
limit and the fix, so the database never sees a query it would refuse.
"""

from __future__ import annotations

from typing import Any

from ..errors import QueryError
from ..ingest.normalize import unstorable
from ..limits import BIGINT_MAX, MAX_K, MAX_QUERY_CHARS
from ..validation import short_repr

__all__ = ["check_offset", "check_query", "check_request"]


def check_query(query: Any) -> None:
    """Raise QueryError unless ``query`` is non-empty text PostgreSQL can store, within MAX_QUERY_CHARS."""
    if not isinstance(query, str) or not query.strip():
        raise QueryError("the query is empty; pass the words or question to search for.")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,} (MAX_QUERY_CHARS). "
            "Shorten it to the words or question that matter."
        )
    problem = unstorable(query, "the query")
    if problem is not None:
        raise QueryError(f"{problem}; remove it from the query.")


def check_offset(offset: Any, k: Any) -> None:
    """Raise QueryError for an offset that is not a whole number, or one that puts ``offset + k`` past MAX_K."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise QueryError(f"offset must be a whole number of results to skip (0 or more), got {short_repr(offset)}.")
    if isinstance(k, int) and not isinstance(k, bool) and offset + k > MAX_K:
        raise QueryError(
            f"offset {offset} + k {k} = {offset + k:,} results, more than the {MAX_K:,} one search ranks; a page "
            "that deep is better reached with a narrower query or a filter."
        )


def check_request(*, mode: Any, k: Any, snapshot: Any) -> None:
    """Raise QueryError for an unknown mode, a k outside 1..10000, or a snapshot id that is not one."""
    from .branches import modes

    if not isinstance(mode, str) or mode not in modes():
        raise QueryError(f"unknown mode {short_repr(mode)}; use one of {', '.join(modes())}.")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1 or k > MAX_K:
        raise QueryError(f"k must be an integer from 1 to {MAX_K}, got {short_repr(k)}.")
    if snapshot is not None and (isinstance(snapshot, bool) or not isinstance(snapshot, int)):
        raise QueryError(f"snapshot must be a snapshot id (an integer), got {short_repr(snapshot)}.")
    if snapshot is not None and not 1 <= snapshot <= BIGINT_MAX:
        raise QueryError(f"snapshot {snapshot} is not a snapshot id (ids start at 1); see `ranklock snapshot list`.")
