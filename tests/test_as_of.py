"""Time is a parameter: ``as_of`` selects the documents in force then, and ranking never calls now()."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ranklock import Document, Engine, IngestError, QueryError

QUERY = "remote work policy for employees"


def corpus(tag: str) -> list[Document]:
    return [
        Document(
            "policy_v1",
            "Remote work policy (2020)",
            f"Employees may work remotely two days a week. ({tag})",
            {"effective_from": "2020-01-01T00:00:00Z", "effective_to": "2023-01-01T00:00:00Z"},
        ),
        Document(
            "policy_v2",
            "Remote work policy (2023)",
            f"Employees may work remotely every day of the week. ({tag})",
            {"effective_from": "2023-01-01T00:00:00Z"},
        ),
        Document("handbook", "Employee handbook", f"The handbook covers policy for all employees. ({tag})"),
        Document(
            "pilot",
            "Remote work pilot",
            f"A pilot let employees try remote work. ({tag})",
            {"effective_to": "2019-06-30T00:00:00+02:00"},
        ),
    ]


@pytest.fixture(scope="module")
def coll(engine: Engine) -> str:
    """One collection for the whole module: these tests only read it."""
    name = "t_as_of_module"
    engine.ingest(name, corpus(name), replace=True)
    return name


def ids(engine: Engine, cname: str, as_of: str | None, mode: str = "hybrid") -> list[str]:
    res = engine.search(cname, QUERY, k=10, as_of=as_of, mode=mode)
    return sorted(h.doc_id for h in res.hits)


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "semantic"])
def test_as_of_selects_documents_in_force(engine: Engine, coll: str, mode: str) -> None:
    cname = coll
    assert ids(engine, cname, None, mode) == ["handbook", "pilot", "policy_v1", "policy_v2"]
    assert ids(engine, cname, "2019-01-01T00:00:00Z", mode) == ["handbook", "pilot"]
    assert ids(engine, cname, "2021-06-01T12:00:00Z", mode) == ["handbook", "policy_v1"]
    # effective_from is inclusive, effective_to exclusive: at the switch, only the new version.
    assert ids(engine, cname, "2023-01-01T00:00:00Z", mode) == ["handbook", "policy_v2"]
    assert ids(engine, cname, "2022-12-31T23:59:59.999999Z", mode) == ["handbook", "policy_v1"]
    # The offset counts: 2019-06-30T00:00+02:00 is 2019-06-29T22:00Z.
    assert ids(engine, cname, "2019-06-29T21:59:59Z", mode) == ["handbook", "pilot"]
    assert ids(engine, cname, "2019-06-29T22:00:00Z", mode) == ["handbook"]


def test_as_of_is_echoed_logged_and_replayed(engine: Engine, coll: str) -> None:
    cname = coll
    res = engine.search(cname, QUERY, k=3, as_of="2021-06-01T14:00:00+02:00")
    assert res.as_of == "2021-06-01T14:00:00+02:00"
    assert res.query_id is not None
    row = engine.db.fetchone("SELECT request FROM ranklock.query_log WHERE id = %s", [res.query_id])
    assert row is not None and row["request"]["as_of"] == "2021-06-01T14:00:00+02:00"
    assert engine.replay(res.query_id).identical
    # The same as_of answers the same, whatever the wall clock says.
    assert engine.search(cname, QUERY, k=3, as_of="2021-06-01T12:00:00Z").hits == res.hits


@pytest.mark.parametrize(
    ("as_of", "message"),
    [
        ("2021-06-01", "as_of '2021-06-01' has no time zone; append Z or an offset like +01:00."),
        ("yesterday", "as_of 'yesterday' is not an ISO 8601 timestamp; e.g. 2026-01-31T00:00:00Z."),
    ],
)
def test_bad_as_of_is_a_clear_error(engine: Engine, coll: str, as_of: str, message: str) -> None:
    with pytest.raises(QueryError) as exc:
        engine.search(coll, QUERY, as_of=as_of)
    assert str(exc.value) == message


_CLOCK = re.compile(
    r"\bnow\s*\(|current_(timestamp|date|time)|localtime|clock_timestamp|statement_timestamp|"
    r"transaction_timestamp|timeofday|datetime\.(utc)?now|date\.today|time\.time\(",
    re.IGNORECASE,
)


def test_nothing_in_ranking_reads_the_clock(engine: Engine, coll: str) -> None:
    search_dir = Path(__import__("ranklock.search", fromlist=["x"]).__file__).parent
    offenders = []
    for path in sorted(search_dir.glob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _CLOCK.search(line.split("#", 1)[0]):
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert offenders == []
    # SQL functions ranking calls (text analysis, BM25 helpers) do not read the clock either.
    funcs = engine.db.fetchall(
        "SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'ranklock' ORDER BY p.proname"
    )
    assert funcs, "expected ranklock's SQL functions"
    assert [f["proname"] for f in funcs if _CLOCK.search(f["prosrc"])] == []
    # Nor does the statement a search runs, with or without as_of.
    for as_of in (None, "2021-06-01T00:00:00Z"):
        for mode in ("hybrid", "lexical", "semantic"):
            text, _ = engine.search_sql(coll, QUERY, k=3, mode=mode, as_of=as_of)
            assert not _CLOCK.search(text), (mode, as_of)


def test_a_naive_effective_date_is_refused_before_anything_is_stored(engine: Engine, coll: str) -> None:
    before = engine.collection(coll).active_snapshot_id
    docs = [*corpus(coll), Document("late", "", "A late note on remote work.", {"effective_from": "2024-05-01"})]
    with pytest.raises(IngestError, match=r"document 'late': effective_from '2024-05-01' has no time zone"):
        engine.ingest(coll, docs, replace=True)
    assert engine.collection(coll).active_snapshot_id == before
    assert ids(engine, coll, "2024-06-01T00:00:00Z") == ["handbook", "policy_v2"]
