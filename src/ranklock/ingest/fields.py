"""Typed document fields: validation and coercion of metadata values."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from ..collection import CollectionInfo, FieldSpec
from ..errors import IngestError
from ..limits import BIGINT_MAX, BIGINT_MIN, MAX_KEYWORD_CHARS
from .document import Document
from .timestamps import TimestampError, parse_date, parse_timestamp

__all__ = ["check_effective_dates", "coerce_document_fields", "coerce_value", "effective_timestamp"]


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


def effective_timestamp(value: Any) -> datetime | None:
    """An ``effective_from``/``effective_to`` value as an aware datetime; a naive one is read as UTC.

    New documents never get here naive (:func:`check_effective_dates` refuses
    them); documents stored before that rule was enforced may.  Those are read
    as UTC here, not in the database session's time zone, which follows the
    server's configuration or the client's ``PGTZ``: the same document must
    not mean a different instant on another host.
    """
    if value is None:
        return None
    ts = parse_timestamp(value, require_tz=False, stringify=True)
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def check_effective_dates(doc: Document) -> None:
    """Refuse an ``effective_from``/``effective_to`` that is not an ISO 8601 timestamp with a zone, or an empty window.

    A timestamp without a zone would be read in the session's time zone, so
    ``as_of`` could select different documents on different hosts; a window
    that ends where (or before) it starts holds a document no ``as_of`` can
    ever find.  Both are errors, named with their fix, before anything is stored.
    """
    where = f"document {doc.doc_id!r}"
    bounds: dict[str, datetime] = {}
    for key in ("effective_from", "effective_to"):
        value = doc.metadata.get(key)
        if value is None:
            continue
        try:
            bounds[key] = parse_timestamp(value, stringify=True)
        except TimestampError as exc:
            if exc.reason == "naive":
                raise IngestError(
                    f"{where}: {key} {value!r} has no time zone, so it would mean a different instant on a server "
                    f"in another zone; write it with Z (UTC) or an offset, e.g. '{_with_zone(value)}'."
                ) from None
            raise IngestError(
                f"{where}: {key} {value!r} is not an ISO 8601 timestamp; write it like '2026-01-31T00:00:00Z'."
            ) from None
    start, end = bounds.get("effective_from"), bounds.get("effective_to")
    if start is not None and end is not None and end <= start:
        raise IngestError(
            f"{where}: effective_to {doc.metadata['effective_to']!r} is not after effective_from "
            f"{doc.metadata['effective_from']!r}, so no as_of could ever find the document (effective_from is "
            "inclusive, effective_to exclusive); fix the dates, or leave effective_to out for no end."
        )


def _with_zone(value: Any) -> str:
    """``value`` with a UTC zone appended, for a message's example (a date gets midnight)."""
    text = str(value)
    return f"{text}T00:00:00Z" if len(text) == 10 else f"{text}Z"
