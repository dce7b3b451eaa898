"""Pydantic validation errors as one ranklock message.

The Python API (``Engine.search(**params)``), the CLI (``--set KEY=VALUE``)
and the HTTP API (request bodies) all validate through pydantic models; this
module turns their errors into the same sentence everywhere: the key, the bad
value, what is valid (sorted), and the fix.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import QueryError, RanklockError
from .settings import SearchParams

__all__ = ["describe_errors", "parse_search_params", "repeated_key", "short_repr"]


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters so a huge input never floods a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Repeated(Exception):
    def __init__(self, key: str, first: Any, second: Any) -> None:
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Repeated(key, out[key], value)
        out[key] = value
    return out


def repeated_key(text: str | bytes) -> str | None:
    """What is wrong when one object of the JSON ``text`` gives a key twice, or None (also for text that is no
    JSON at all: its own parser says why).

    Python's json, as most parsers, keeps the last of ``{"k": 1, "k": 2}`` without a word, so a request would
    run with a value its sender may never have meant; a repeated query parameter is refused for the same reason.

    >>> repeated_key('{"k": 10, "query": "x", "k": 20}')
    "the key 'k' is given twice in one object (10 and 20); give each key once"
    """
    try:
        json.loads(text, object_pairs_hook=_refuse_repeats)
    except _Repeated as rep:
        first, second = short_repr(rep.first, 40), short_repr(rep.second, 40)
        return (
            f"the key {short_repr(rep.key, 60)} is given twice in one object ({first} and {second}); give each key once"
        )
    except (ValueError, RecursionError):
        return None
    return None


def _choices(model: type[BaseModel] | None, name: str) -> list[str] | None:
    if model is None or name not in model.model_fields:
        return None
    args = typing.get_args(model.model_fields[name].annotation)
    return [str(a) for a in args] if args and all(isinstance(a, str) for a in args) else None


def describe_errors(
    errors: Iterable[Mapping[str, Any]],
    *,
    model: type[BaseModel] | None = None,
    what: str = "key",
    valid: Sequence[str] | None = None,
    skip_loc: int = 0,
) -> str:
    """One message for a list of pydantic error dicts (``ValidationError.errors()``).

    ``what`` names the keys ("search parameter", "field"), ``valid`` lists the
    accepted keys for an unknown one (default: the model's fields, sorted), and
    ``skip_loc`` drops leading location parts (FastAPI's "body").
    """
    names = sorted(valid if valid is not None else (model.model_fields if model is not None else []))
    parts: list[str] = []
    for err in errors:
        loc = [str(p) for p in tuple(err.get("loc", ()))[skip_loc:]]
        key = ".".join(loc) or "(the whole input)"
        kind = err.get("type", "")
        value = err.get("input")
        if kind == "ranklock":
            # A validator of ours wrote the whole sentence (ranklock.api): keep it as it is.
            parts.append(str(err.get("msg", "")))
        elif kind == "extra_forbidden":
            listing = f"; valid {what}s: {', '.join(names)}" if names else ""
            parts.append(f"unknown {what} {key!r}{listing}")
        elif kind == "missing":
            parts.append(f"{what} {key!r} is required")
        elif kind == "literal_error" and (choices := _choices(model, loc[-1] if loc else "")):
            parts.append(f"unknown {loc[-1].replace('_', ' ')} {short_repr(value)}; use one of {', '.join(choices)}")
        else:
            msg = str(err.get("msg", "is not valid"))
            msg = msg[:1].lower() + msg[1:]
            parts.append(f"{what} {key!r}: {msg}, got {short_repr(value)} ({type(value).__name__}); fix the value")
    return "; ".join(parts) + "."


def parse_search_params(
    values: Mapping[str, Any], *, error: type[RanklockError] = QueryError, strings: bool = False
) -> SearchParams:
    """Validate search parameters (``strings=True``: CLI text values, parsed by the model) or raise ``error``.

    >>> parse_search_params({"ef_serach": 400})   # doctest: +SKIP
    QueryError: unknown search parameter 'ef_serach'; valid search parameters: b, depth, ef_search, ...
    """
    try:
        if strings:
            return SearchParams.model_validate_strings(dict(values))
        return SearchParams.model_validate(dict(values))
    except ValidationError as exc:
        raise error(describe_errors(exc.errors(), model=SearchParams, what="search parameter")) from None
