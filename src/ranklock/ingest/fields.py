"""Typed document fields: validation and coercion of metadata values."""

from __future__ import annotations

import math
from typing import Any

from ..collection import CollectionInfo, FieldSpec
from ..errors import IngestError
from ..limits import BIGINT_MAX, BIGINT_MIN, MAX_KEYWORD_CHARS
from .document import Document
from .timestamps import TimestampError, parse_date, parse_timestamp

__all__ = ["coerce_document_fields", "coerce_value"]


def _check_keyword(spec: FieldSpec, value: str, where: str) -> None:
    if len(value) > MAX_KEYWORD_CHARS:
        raise IngestError(
            f"{where}: a value of field {spec.name!r} ({spec.type}) is {len(value):,} characters; the limit is "
            f"{MAX_KEYWORD_CHARS:,} (MAX_KEYWORD_CHARS), since each value is an index key. Keep labels short, "
            "or put long text in the document body."
        )


def coerce_value(spec: FieldSpec, value: Any, *, where: str) -> Any:
    """Turn a JSON value into the Python value of the field's SQL type, or raise IngestError."""
    t = spec.type

    def bad(expected: str) -> IngestError:
        return IngestError(
            f"{where}: field {spec.name!r} must be {expected}, got {value!r} ({type(value).__name__}); "
            "fix the document's metadata."
        )

    if value is None:
        return None
    if t == "int":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("an integer")
        if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
            raise bad("an integer")
        if not BIGINT_MIN <= int(value) <= BIGINT_MAX:
            raise bad(f"an integer from {BIGINT_MIN} to {BIGINT_MAX} (64-bit)")
        return int(value)
    if t == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        try:
            number = float(value)
        except OverflowError:
            raise bad("a number within the 64-bit float range") from None
        if not math.isfinite(number):
            raise bad("a finite number")
        return number
    if t == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if t == "keyword":
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise bad("a string")
        _check_keyword(spec, str(value), where)
        return str(value)
    if t == "keyword[]":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("a list of strings")
        for v in value:
            _check_keyword(spec, v, where)
        # Stored sorted and de-duplicated: a set, so order in the source never matters.
        return sorted(set(value))
    if t == "date":
        try:
            return parse_date(value, stringify=True)
        except TimestampError:
            raise bad("an ISO date (YYYY-MM-DD)") from None
    if t == "timestamp":
        try:
            return parse_timestamp(value, stringify=True)
        except TimestampError as exc:
            if exc.reason == "naive":
                raise bad("a timestamp with a time zone (e.g. 2026-01-31T12:00:00Z)") from None
            raise bad("an ISO 8601 timestamp") from None
    raise bad(t)  # pragma: no cover - FieldSpec restricts the type


def coerce_document_fields(coll: CollectionInfo, doc: Document) -> list[Any]:
    out: list[Any] = []
    for spec in coll.fields:
        where = f"document {doc.doc_id!r}"
        if spec.name not in doc.metadata or doc.metadata[spec.name] is None:
            if spec.required:
                raise IngestError(
                    f"{where}: required field {spec.name!r} ({spec.type}) is missing from its metadata; "
                    "add it, or declare the field optional."
                )
            out.append(None)
            continue
        out.append(coerce_value(spec, doc.metadata[spec.name], where=where))
    return out
