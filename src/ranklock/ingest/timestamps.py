"""The one parser of dates and timestamps (ISO 8601), for every place that reads one.

Ingest (typed fields, ``effective_from``/``effective_to``), filters and
``as_of`` all read dates and timestamps here.  They differ only in what they
let through, so those rules are parameters; each caller keeps its own
message and error class, and maps :class:`TimestampError`'s ``reason`` onto
it::

    >>> parse_timestamp("2026-01-31T00:00:00Z")
    datetime.datetime(2026, 1, 31, 0, 0, tzinfo=datetime.timezone.utc)
    >>> parse_timestamp("2026-01-31T00:00:00")                 # TimestampError: reason 'naive'
    >>> parse_timestamp("2026-01-31T00:00:00", require_tz=False)
    datetime.datetime(2026, 1, 31, 0, 0)
    >>> parse_date("2026-01-31")
    datetime.date(2026, 1, 31)

Who passes what (unchanged from before the parsers were merged):

    caller                         require_tz  stringify  allow_datetime (dates)
    ingest typed field             yes         yes        yes
    effective_from / effective_to  yes         yes        -      (ingest; see ingest.fields)
    filter value                   yes         no         no
    as_of                          yes         no         -

``stringify`` parses ``str(value)`` of a value that is neither a string nor
a datetime (a JSON number in a document's metadata); without it such a
value is refused (reason ``"type"``).  A naive ``effective_from`` used to
land in a ``timestamptz`` column in the session's time zone (host-dependent);
ingest now refuses it, and one stored before that is read as UTC
(``ranklock.ingest.fields.effective_timestamp``).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

__all__ = ["TimestampError", "parse_date", "parse_timestamp"]

Reason = Literal["format", "naive", "type"]


class TimestampError(ValueError):
    """A value that is not a timestamp (or date) under the caller's rules; ``reason`` says why."""

    def __init__(self, reason: Reason, value: Any) -> None:
        super().__init__(f"{value!r}: {reason}")
        self.reason: Reason = reason
        self.value = value


def parse_timestamp(value: Any, *, require_tz: bool = True, stringify: bool = False) -> datetime:
    """``value`` (a datetime, or ISO 8601 text; ``Z`` means UTC) as a datetime.

    Raises :class:`TimestampError`: ``"type"`` for a value that is neither
    (unless ``stringify``), ``"format"`` for text that is not ISO 8601,
    ``"naive"`` for a timestamp without a time zone when ``require_tz``.
    """
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str) or stringify:
        try:
            ts = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise TimestampError("format", value) from None
    else:
        raise TimestampError("type", value)
    if require_tz and ts.tzinfo is None:
        raise TimestampError("naive", value)
    return ts


def parse_date(value: Any, *, allow_datetime: bool = True, stringify: bool = False) -> date:
    """``value`` (a date, or ISO text YYYY-MM-DD) as a date; a datetime is returned as it is if ``allow_datetime``.

    Raises :class:`TimestampError`: ``"type"`` for a datetime when not
    ``allow_datetime``, or a value that is neither a date nor text (unless
    ``stringify``); ``"format"`` for text that is not an ISO date.
    """
    if isinstance(value, datetime) and not allow_datetime:
        raise TimestampError("type", value)
    if isinstance(value, date):
        return value
    if not isinstance(value, str) and not stringify:
        raise TimestampError("type", value)
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise TimestampError("format", value) from None
