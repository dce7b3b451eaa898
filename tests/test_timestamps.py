"""The one date/timestamp parser (ranklock.ingest.timestamps) and the rules each caller keeps."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest

from ranklock.collection import FieldSpec
from ranklock.errors import IngestError, SnapshotError
from ranklock.ingest.document import Document
from ranklock.ingest.fields import check_effective_dates, coerce_value
from ranklock.ingest.timestamps import TimestampError, parse_date, parse_timestamp
from ranklock.snapshot.build import _ts

UTC = UTC


def _reason(fn: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(TimestampError) as exc:
        fn(*args, **kw)
    return exc.value.reason


def test_timestamps_parse_iso_text_with_z_or_an_offset() -> None:
    assert parse_timestamp("2026-01-31T12:00:00Z") == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_timestamp("2026-01-31T12:00:00+01:00") == datetime(2026, 1, 31, 11, tzinfo=UTC)
    aware = datetime(2026, 1, 31, tzinfo=timezone(timedelta(hours=-5)))
    assert parse_timestamp(aware) is aware


def test_timestamp_rules_are_parameters() -> None:
    assert _reason(parse_timestamp, "2026-01-31T12:00:00") == "naive"
    assert _reason(parse_timestamp, datetime(2026, 1, 31)) == "naive"
    assert parse_timestamp("2026-01-31T12:00:00", require_tz=False) == datetime(2026, 1, 31, 12)
    assert _reason(parse_timestamp, "yesterday") == "format"
    assert _reason(parse_timestamp, 20260131) == "type"
    # stringify: a JSON number is read as its text (ingest's rule), which is no timestamp.
    assert _reason(parse_timestamp, 1.5, stringify=True) == "format"


def test_dates_parse_iso_text_and_the_datetime_rule_is_a_parameter() -> None:
    assert parse_date("2026-01-31") == date(2026, 1, 31)
    assert parse_date(date(2026, 1, 31)) == date(2026, 1, 31)
    moment = datetime(2026, 1, 31, 8, tzinfo=UTC)
    assert parse_date(moment) is moment
    assert _reason(parse_date, moment, allow_datetime=False) == "type"
    assert _reason(parse_date, "31/01/2026") == "format"
    assert _reason(parse_date, 20260131) == "type"
    assert parse_date(20260131, stringify=True) == date(2026, 1, 31)


def test_ingest_fields_keep_their_messages() -> None:
    ts = FieldSpec(name="seen", type="timestamp")
    with pytest.raises(IngestError) as exc:
        coerce_value(ts, "2026-01-31T12:00:00", where="document 'd1'")
    assert str(exc.value) == (
        "document 'd1': field 'seen' must be a timestamp with a time zone (e.g. 2026-01-31T12:00:00Z), "
        "got '2026-01-31T12:00:00' (str); fix the document's metadata."
    )
    with pytest.raises(IngestError) as exc:
        coerce_value(ts, "soon", where="document 'd1'")
    assert str(exc.value) == (
        "document 'd1': field 'seen' must be an ISO 8601 timestamp, got 'soon' (str); fix the document's metadata."
    )
    day = FieldSpec(name="day", type="date")
    with pytest.raises(IngestError) as exc:
        coerce_value(day, "31/01/2026", where="document 'd1'")
    assert str(exc.value) == (
        "document 'd1': field 'day' must be an ISO date (YYYY-MM-DD), got '31/01/2026' (str); "
        "fix the document's metadata."
    )


def test_a_stored_naive_effective_date_is_read_as_utc_not_in_the_session_zone() -> None:
    # Only documents stored before ingest refused naive dates can reach the builder so.
    assert _ts("2026-01-31T00:00:00") == datetime(2026, 1, 31, tzinfo=UTC)
    assert _ts("2026-01-31T00:00:00+02:00") == datetime(2026, 1, 30, 22, tzinfo=UTC)
    assert _ts(None) is None
    with pytest.raises(SnapshotError) as exc:
        _ts("soon")
    assert str(exc.value) == "bad effective_from/effective_to value 'soon': use ISO 8601."


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (
            {"effective_from": "2026-01-31T00:00:00"},
            "document 'd1': effective_from '2026-01-31T00:00:00' has no time zone, so it would mean a different "
            "instant on a server in another zone; write it with Z (UTC) or an offset, e.g. '2026-01-31T00:00:00Z'.",
        ),
        (
            {"effective_to": "2026-01-31"},
            "document 'd1': effective_to '2026-01-31' has no time zone, so it would mean a different instant on a "
            "server in another zone; write it with Z (UTC) or an offset, e.g. '2026-01-31T00:00:00Z'.",
        ),
        (
            {"effective_from": "next tuesday"},
            "document 'd1': effective_from 'next tuesday' is not an ISO 8601 timestamp; write it like "
            "'2026-01-31T00:00:00Z'.",
        ),
        (
            {"effective_from": "2026-01-31T00:00:00Z", "effective_to": "2026-01-31T01:00:00+01:00"},
            "document 'd1': effective_to '2026-01-31T01:00:00+01:00' is not after effective_from "
            "'2026-01-31T00:00:00Z', so no as_of could ever find the document (effective_from is inclusive, "
            "effective_to exclusive); fix the dates, or leave effective_to out for no end.",
        ),
    ],
)
def test_ingest_refuses_a_naive_or_empty_effective_window(metadata: dict[str, Any], message: str) -> None:
    with pytest.raises(IngestError) as exc:
        check_effective_dates(Document("d1", "", "text", metadata))
    assert str(exc.value) == message


def test_effective_dates_with_a_zone_pass() -> None:
    check_effective_dates(Document("d1", "", "t", {"effective_from": "2026-01-31T00:00:00+05:30"}))
    check_effective_dates(Document("d1", "", "t", {"effective_to": "2026-01-31T00:00:00Z"}))
    check_effective_dates(
        Document("d1", "", "t", {"effective_from": "2020-01-01T00:00:00Z", "effective_to": "2020-01-01T00:00:01Z"})
    )
