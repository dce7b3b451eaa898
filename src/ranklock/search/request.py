"""One search as the caller asked for it: a frozen :class:`SearchRequest`, the one declaration of a search's keywords.

Every interface builds one (``Engine.search``, ``AsyncEngine.search``, the CLI,
HTTP and MCP through the engines), with the defaults declared once in
:data:`ranklock.settings.REQUEST`.  It is echoed in the result and the query log.

>>> SearchRequest.of("docs", "pump seals", k=5, ef_search=200).params
{'ef_search': 200}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from ..errors import QueryError
from ..settings import REQUEST

__all__ = ["SearchRequest", "parse_as_of"]


@dataclass(frozen=True)
class SearchRequest:
    """One search: collection, query, ``k``, mode, hard constraints, snapshot, and any search parameter."""

    collection: str
    query: str
    k: int = REQUEST.k
    mode: str = REQUEST.mode
    filter: Any = None
    snapshot: int | None = None
    as_of: datetime | str | None = None
    #: Search parameters (ranklock.settings.SearchParams fields) given by the caller.
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, collection: str, query: str, **keywords: Any) -> SearchRequest:
        """The request of a call with ``Engine.search``'s keywords: this class's fields by name, the rest ``params``.

        The keywords are this class's fields (the one declaration; scripts/check_twins.py holds
        every signature that spells them out to it), so none is repeated here.
        """
        own = {f.name: keywords.pop(f.name) for f in fields(cls)[2:-1] if f.name in keywords}
        return cls(collection, query, **own, params=keywords)

    def check(self) -> None:
        """Refuse a bad query, mode, k or snapshot id before any SQL (ranklock.search.inputs)."""
        from .inputs import check_query, check_request

        check_query(self.query)
        check_request(mode=self.mode, k=self.k, snapshot=self.snapshot)

    def as_log(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "query": self.query,
            "k": self.k,
            "mode": self.mode,
            "filter": self.filter,
            "snapshot": self.snapshot,
            "as_of": self.as_of,
            "params": dict(self.params),
        }


def parse_as_of(value: datetime | str | None) -> datetime | None:
    """``as_of`` as an aware datetime; QueryError for a naive one or text that is not ISO 8601."""
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is None:
            raise QueryError(f"as_of {value.isoformat()} has no time zone; pass an aware datetime (e.g. UTC).")
        return value
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise QueryError(f"as_of {value!r} is not an ISO 8601 timestamp; e.g. 2026-01-31T00:00:00Z.") from exc
    if re.search(r"[.,]\d{7,}", value):
        # fromisoformat keeps microseconds and drops the rest: the search would run at another instant.
        raise QueryError(
            f"as_of {value!r} is finer than a microsecond, which timestamps keep; round it to at most 6 "
            "fractional digits (e.g. 2026-01-31T00:00:00.123456Z)."
        )
    if dt.tzinfo is None:
        raise QueryError(f"as_of {value!r} has no time zone; append Z or an offset like +01:00.")
    return dt
