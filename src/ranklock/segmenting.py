"""How a collection cuts its documents into segments: by a time window, by a partition key, or not at all.

A collection may declare, when it is created, a *window* (a date or
timestamp field and a unit: day, week, month, year) and/or a *partition key*
(a keyword or int field: a tenant, a workspace).  A write then puts each
document in the segment of its key: the ``[start, end)`` interval its window
field falls in (UTC), and its partition value.  The keys are recorded with
each segment (``ranklock.segments``) and so in every manifest, and a search
whose filter pins the field reads only the segments whose key it can match,
decided from the keys alone (:func:`route`).  A document without a value
goes to the segment of no key, which every search reads.

>>> Segmenting.of({"window": {"field": "published", "unit": "month"}}).key(
...     {"published": "2024-03-15"})
SegmentKey(window_start=datetime.datetime(2024, 3, 1, 0, 0, tzinfo=datetime.timezone.utc), window_end=datetime.datetime(2024, 4, 1, 0, 0, tzinfo=datetime.timezone.utc), partition=None)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from .errors import ConfigError

__all__ = ["UNITS", "SegmentKey", "Segmenting", "route"]

#: The units a window can have.
UNITS = ("day", "week", "month", "year")
_WINDOW_TYPES = ("date", "timestamp")
_PARTITION_TYPES = ("keyword", "int")


@dataclass(frozen=True)
class SegmentKey:
    """The key of a segment: its window interval (UTC) and its partition value, each None when not cut by it."""

    window_start: datetime | None = None
    window_end: datetime | None = None
    partition: str | None = None


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    text = str(value)
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00")) if "T" in text or " " in text else None
    if parsed is None:
        d = date.fromisoformat(text)
        return datetime(d.year, d.month, d.day, tzinfo=UTC)
    return _utc(parsed)


def _interval(at: datetime, unit: str) -> tuple[datetime, datetime]:
    day = datetime(at.year, at.month, at.day, tzinfo=UTC)
    if unit == "day":
        return day, day + timedelta(days=1)
    if unit == "week":  # ISO weeks: from Monday
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if unit == "month":
        start = day.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        return start, end
    start = day.replace(month=1, day=1)
    return start, start.replace(year=start.year + 1)


@dataclass(frozen=True)
class Segmenting:
    """A collection's segmenting: its window field and unit, its partition field (each optional)."""

    window_field: str | None = None
    window_unit: str | None = None
    partition_field: str | None = None

    @classmethod
    def of(cls, value: Mapping[str, Any] | None) -> Segmenting:
        value = value or {}
        window = value.get("window") or {}
        return cls(window.get("field"), window.get("unit"), value.get("partition"))

    @classmethod
    def declare(cls, window: str | None, partition: str | None, fields: Mapping[str, str]) -> Segmenting:
        """The segmenting ``--window FIELD:UNIT`` and ``--partition FIELD`` declare, checked against ``fields``
        (name -> type); ConfigError names the problem and the fix."""
        wf = wu = None
        if window:
            wf, _, wu = window.partition(":")
            if wu not in UNITS:
                raise ConfigError(
                    f"window {window!r}: write FIELD:UNIT with a unit of {', '.join(UNITS)}, e.g. 'published:month'."
                )
            if fields.get(wf) not in _WINDOW_TYPES:
                raise ConfigError(
                    f"window field {wf!r} is {'not declared' if wf not in fields else 'a ' + fields[wf] + ' field'}; "
                    f"a window needs a date or timestamp field, e.g. --field {wf}:date! --window {wf}:{wu}."
                )
        if partition and fields.get(partition) not in _PARTITION_TYPES:
            raise ConfigError(
                f"partition field {partition!r} is "
                f"{'not declared' if partition not in fields else 'a ' + fields[partition] + ' field'}; "
                f"a partition key needs a keyword or int field, e.g. --field {partition}:keyword --partition {partition}."
            )
        return cls(wf, wu, partition)

    @property
    def cuts(self) -> bool:
        return self.window_field is not None or self.partition_field is not None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.window_field:
            out["window"] = {"field": self.window_field, "unit": self.window_unit}
        if self.partition_field:
            out["partition"] = self.partition_field
        return out

    def key(self, metadata: Mapping[str, Any]) -> SegmentKey:
        """The segment key of a document with these typed field values."""
        start = end = None
        part = None
        if self.window_field and metadata.get(self.window_field) is not None:
            start, end = _interval(_utc(metadata[self.window_field]), str(self.window_unit))
        if self.partition_field and metadata.get(self.partition_field) is not None:
            part = str(metadata[self.partition_field])
        return SegmentKey(start, end, part)


def route(segments: Sequence[Any], seg: Segmenting, structured: Mapping[str, Any] | None) -> list[int]:
    """The ids of the ``segments`` (with ``id``, ``window_start``, ``window_end``, ``partition_key``) a filter
    can match, from their keys alone: conditions on the window or partition field in the filter's top-level
    ``and`` rule out the others.  Everything else (``or``, ``not``, other fields) rules out nothing."""
    if not seg.cuts or not structured:
        return [g.id for g in segments]
    conds = _conjuncts(structured)
    lo: datetime | None = None
    hi: datetime | None = None  # the window field's values are >= lo and <= hi (< hi when ``below``)
    below = False
    parts: set[str] | None = None
    for c in conds:
        name, op, value = c.get("field"), c.get("op"), c.get("value")
        if seg.window_field and name == seg.window_field:
            for a, b in _bounds(op, value):
                if a is not None:
                    lo = a if lo is None else max(lo, a)
                if b is not None and (hi is None or b < hi or (b == hi and op == "<")):
                    hi, below = b, op == "<"
        if seg.partition_field and name == seg.partition_field and op in ("=", "in"):
            values = {str(v) for v in (value or [] if op == "in" else [value])}
            parts = values if parts is None else parts & values
    keep = []
    for g in segments:
        if (
            g.window_start is not None
            and g.window_end is not None
            and (
                (lo is not None and _utc(g.window_end) <= lo)
                or (hi is not None and (_utc(g.window_start) >= hi if below else _utc(g.window_start) > hi))
            )
        ):
            continue
        # A segment without a partition value holds the documents without the field (NULL): none of
        # them can equal a value the filter asks for.
        if parts is not None and g.partition_key not in parts:
            continue
        keep.append(g.id)
    return keep


def _conjuncts(node: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    if "and" in node:
        for sub in node["and"]:
            yield from _conjuncts(sub)
    elif "field" in node:
        yield node


def _bounds(op: Any, value: Any) -> list[tuple[datetime | None, datetime | None]]:
    """Inclusive (low, high) bounds a comparison puts on a date or timestamp field."""
    if op in ("=",):
        v = _utc(value)
        return [(v, v)]
    if op in (">", ">="):
        return [(_utc(value), None)]
    if op in ("<", "<="):
        return [(None, _utc(value))]
    if op == "between":
        return [(_utc(value[0]), _utc(value[1]))]
    if op == "in" and value:
        vs = [_utc(v) for v in value]
        return [(min(vs), max(vs))]
    return []
