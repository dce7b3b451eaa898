"""The one schema of the served APIs: the HTTP routes and the MCP tools validate through these models.

Both ``POST /api/search`` and the MCP tool ``search`` take :class:`SearchArguments`;
``POST /api/ask`` and the tool ``ask`` take :class:`AskArguments`; ``GET
/api/search`` takes :class:`SearchQuery` (its values arrive as text).  They are
strict: an unknown key, a loosely typed value (``"k": true``) or a reserved key
inside ``params`` is refused with the same message on either transport
(:func:`request_error`), never dropped or coerced.

:func:`check_cost` is the cost cap of a served search (``RANKLOCK_MAX_COST``,
``RANKLOCK_MAX_FILTER_SIZE``): a local caller of :class:`ranklock.Engine` is the
operator and is not capped; a client of the server may be anyone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .errors import InputError, QueryError
from .settings import REQUEST, SearchParams, Settings
from .validation import describe_errors

__all__ = [
    "RESERVED_PARAMS",
    "AskArguments",
    "SearchQuery",
    "SearchArguments",
    "check_cost",
    "request_error",
    "search_cost",
]


class SearchArguments(BaseModel):
    """A search: ``POST /api/search`` body, MCP tool ``search`` arguments.

    Strict: unknown keys and loosely typed values (``"k": true``) are errors.
    ``snapshot_id`` is accepted for ``snapshot`` (results and documents call it so).
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        populate_by_name=True,
        # The OpenAPI document's request examples (tests/test_http_schema.py sends each one).
        json_schema_extra={
            "examples": [
                {"collection": "docs", "query": "how do vaccines work", "k": 3},
                {
                    "collection": "docs",
                    "query": "vaccines",
                    "k": 5,
                    "mode": "lexical",
                    "filter": 'year >= 2020 and tags has "vaccines"',
                    "params": {"depth": 100},
                },
                {"collection": "docs", "query": "vaccines", "k": 3, "offset": 3},
            ]
        },
    )

    collection: str
    query: str
    k: int = REQUEST.k
    mode: str = REQUEST.mode
    filter: Any = None
    snapshot: int | None = Field(None, validation_alias=AliasChoices("snapshot", "snapshot_id"))
    as_of: str | None = None
    offset: int = Field(0, description="Results to skip: the page after the first offset results.")
    params: dict[str, Any] = Field(default_factory=dict, description="Search parameter overrides (depth, ef_search…).")

    @model_validator(mode="before")
    @classmethod
    def _one_snapshot_key(cls, data: Any) -> Any:
        return _one_snapshot_key(data)

    @field_validator("params")
    @classmethod
    def _no_reserved_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(set(params) & RESERVED_PARAMS)
        if reserved:
            key = reserved[0]
            raise PydanticCustomError(
                "ranklock",
                "{message}",
                {
                    "message": f"params key {key!r} is reserved: it is a key of the request itself, not a search "
                    f"parameter; give it once, at the top level next to query, and keep params for "
                    f"{', '.join(sorted(SearchParams.model_fields))}"
                },
            )
        return params

    def arguments(self) -> dict[str, Any]:
        """The keywords of ``Engine.search`` / ``AsyncEngine.search`` after collection and query."""
        return {
            "k": self.k,
            "mode": self.mode,
            "filter": self.filter,
            "snapshot": self.snapshot,
            "as_of": self.as_of,
            "offset": self.offset,
            **self.params,
        }

    def check_cost(self, settings: Settings, defaults: Mapping[str, Any]) -> None:
        """:func:`check_cost` of this search; ``defaults``: its collection's search defaults.

        A page costs the search behind it: ``offset + k`` results."""
        k = self.k + self.offset if isinstance(self.offset, int) and self.offset > 0 else self.k
        check_cost(settings, k=k, mode=self.mode, params=self.params, defaults=defaults, filter=self.filter)


class AskArguments(BaseModel):
    """An ask: ``POST /api/ask`` body, MCP tool ``ask`` arguments (the options of ``ranklock ask``)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {"collection": "docs", "question": "who reviewed the XJ-900 budget?"},
                {"collection": "docs", "question": "how do vaccines work?", "chunks": 4, "filter": "year >= 2020"},
            ]
        },
    )

    collection: str
    question: str
    filter: str | dict[str, Any] | list[Any] | None = None
    as_of: str | None = None
    snapshot: int | None = Field(None, validation_alias=AliasChoices("snapshot", "snapshot_id"))
    chunks: int = Field(REQUEST.chunks, ge=1, le=40, description="Chunks handed to the generator, numbered [1]..[N].")
    generator: str = Field("extractive", description="extractive, openai or local.")

    @model_validator(mode="before")
    @classmethod
    def _one_snapshot_key(cls, data: Any) -> Any:
        return _one_snapshot_key(data)

    def arguments(self) -> dict[str, Any]:
        """The keywords of ``Engine.ask`` / ``AsyncEngine.ask`` after collection and question."""
        return {
            "filter": self.filter,
            "as_of": self.as_of,
            "snapshot": self.snapshot,
            "chunks": self.chunks,
            "generator": self.generator,
        }

    def check_cost(self, settings: Settings) -> None:
        """An ask retrieves a fixed number of candidates (ranklock.ask.retrieve): only its filter is checked."""
        check_cost(settings, k=1, mode=REQUEST.mode, params={}, defaults={}, filter=self.filter)


class SearchQuery(BaseModel):
    """``GET /api/search`` query string.  Values arrive as text, so types are parsed; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    collection: str
    q: str
    k: int = REQUEST.k
    mode: str = REQUEST.mode
    filter: str | None = None
    snapshot: int | None = None
    as_of: str | None = None
    offset: int = 0


#: Keys of a search request that ``params`` may not hold: Engine.search takes them as keywords of their own.
RESERVED_PARAMS = frozenset(set(SearchArguments.model_fields) - {"params"} | {"q", "snapshot_id", "query"})


def _one_snapshot_key(data: Any) -> Any:
    if isinstance(data, Mapping) and "snapshot" in data and "snapshot_id" in data:
        raise PydanticCustomError(
            "ranklock",
            "{message}",
            {"message": "snapshot and snapshot_id are the same key (a snapshot id); give one of them"},
        )
    return data


def request_error(exc: ValidationError, model: type[BaseModel], *, what: str) -> InputError:
    """The one message for a request that does not fit ``model``; ``what`` names its keys ("body key", "argument")."""
    valid = sorted(model.model_fields)
    return InputError(describe_errors(exc.errors(), model=model, what=what, valid=valid))


def search_cost(k: int, mode: str, depth: int) -> int:
    """What a search's size costs: ``k`` x the candidates each branch ranks.

    Hybrid ranks ``depth`` candidates a branch; a single-branch mode ranks
    max(depth, k) (ranklock.search.pipeline.plan_steps), so k alone raises it.
    """
    return k * (depth if mode == "hybrid" else max(depth, k))


def check_cost(
    settings: Settings, *, k: int, mode: str, params: Mapping[str, Any], defaults: Mapping[str, Any], filter: Any
) -> None:
    """Raise QueryError when a served search is over ``RANKLOCK_MAX_COST`` or ``RANKLOCK_MAX_FILTER_SIZE``.

    ``defaults`` are the collection's search defaults (its ``depth`` applies when the request gives none).
    """
    depth = params.get("depth", defaults.get("depth", SearchParams.model_fields["depth"].default))
    if isinstance(depth, int) and not isinstance(depth, bool) and isinstance(k, int) and not isinstance(k, bool):
        cost = search_cost(k, mode, depth)
        if cost > settings.max_cost:
            raise QueryError(
                f"this search costs k x depth = {k:,} x {depth if mode == 'hybrid' else max(depth, k):,} = {cost:,}; "
                f"the server allows {settings.max_cost:,} (RANKLOCK_MAX_COST). Lower k or depth."
            )
    if filter is not None:
        size = len(filter) if isinstance(filter, str) else len(_compact(filter))
        if size > settings.max_filter_size:
            raise QueryError(
                f"the filter is {size:,} characters; the server allows {settings.max_filter_size:,} "
                "(RANKLOCK_MAX_FILTER_SIZE). Narrow it to fewer conditions or values."
            )


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except RecursionError:
        raise QueryError(
            "the filter is nested too deeply to read; a filter nests at most 32 levels (MAX_FILTER_DEPTH)."
        ) from None
