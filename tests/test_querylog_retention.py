"""Query-log retention: by size and age, amortised, `ranklock log prune`, `db status`, pruned replays,
and a failing log write that warns instead of failing the search.

These tests prune the whole log, so they run on their own embedded PostgreSQL
rather than the session's, whose log other tests read.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from fakes import HashEmbedder
from ranklock import Document, Engine, NotFound
from ranklock.cli import app
from ranklock.http import create_app
from ranklock.store.server import EmbeddedServer

DOCS = [
    Document("lava", "Lava", "Magma rises through the crust and erupts as lava from a volcano."),
    Document("bread", "Bread", "Yeast ferments the sugars in dough and the gas makes the bread rise."),
    Document("tides", "Tides", "The gravity of the moon raises tides in the oceans twice a day."),
]
QUERIES = ["lava volcano", "bread yeast", "moon tides", "magma crust", "dough sugars", "oceans gravity"]


@pytest.fixture(scope="module")
def iso() -> Iterator[Engine]:
    home = Path(tempfile.mkdtemp(prefix="ranklock-retention-"))
    eng = Engine(home=home, embedder=HashEmbedder(), log_queries=True)
    eng.ingest("notes", DOCS)
    eng.ingest("blocked", DOCS)
    try:
        yield eng
    finally:
        eng.close()
        EmbeddedServer(home).stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def clean_log(iso: Engine) -> Iterator[Engine]:
    iso.db.execute("DELETE FROM ranklock.query_log")
    iso.db.execute("UPDATE ranklock.query_log_retention SET pruned_through = 0, pruned_rows = 0, pruned_bytes = 0")
    saved = iso.settings.model_copy()
    try:
        yield iso
    finally:
        iso.settings = saved


def _ids(eng: Engine) -> list[int]:
    return [r["id"] for r in eng.db.fetchall("SELECT id FROM ranklock.query_log ORDER BY id")]


def _log(eng: Engine, n: int, collection: str = "notes") -> list[int]:
    out = []
    for q in (QUERIES * 3)[:n]:
        res = eng.search(collection, q, k=2, mode="lexical")
        assert res.query_id is not None
        out.append(res.query_id)
    return out


def test_prune_by_size_keeps_the_newest_entries_that_fit(clean_log: Engine) -> None:
    eng = clean_log
    ids = _log(eng, 6)
    sizes = {r["id"]: r["bytes"] for r in eng.db.fetchall("SELECT id, bytes FROM ranklock.query_log")}
    assert all(sizes[i] > 1000 for i in ids)  # the trigger measured every entry (kilobytes each)
    budget = sizes[ids[-1]] + sizes[ids[-2]] + sizes[ids[-3]]
    report = eng.prune_log(max_bytes=budget)
    assert _ids(eng) == ids[-3:]
    q = report.logs["query_log"]
    assert q.deleted == 3 and q.deleted_bytes == sum(sizes[i] for i in ids[:3])
    assert q.status.rows == 3 and q.status.bytes == budget and q.status.pruned_through == ids[2]
    # The JSON of `log prune --json`: the query log's totals at the top level.
    assert report.as_dict()["deleted"] == 3 and report.as_dict()["logs"]["query_log"]["rows"] == 3
    # A second run has nothing left to do.
    assert eng.prune_log(max_bytes=budget).logs["query_log"].deleted == 0


def test_prune_by_age_deletes_entries_older_than_the_retention(clean_log: Engine) -> None:
    eng = clean_log
    ids = _log(eng, 5)
    eng.db.execute("UPDATE ranklock.query_log SET logged_at = now() - interval '40 days' WHERE id = ANY(%s)", [ids[:2]])
    assert eng.settings.log_retention == 30 * 86400  # the default policy: 30 days
    report = eng.prune_log()
    assert report.logs["query_log"].deleted == 2 and _ids(eng) == ids[2:]
    status = eng.log_status()
    assert status.pruned_through == ids[1] and status.pruned_rows == 2
    assert status.policy == {"max_age_s": 2592000.0, "max_bytes": 1_000_000_000, "describe": "30d, 1GB"}


def test_replay_of_a_pruned_entry_says_it_was_pruned(clean_log: Engine) -> None:
    eng = clean_log
    ids = _log(eng, 3)
    eng.prune_log(older_than=0.0, max_bytes=1)  # keep nothing
    with pytest.raises(NotFound) as exc:
        eng.replay(ids[0])
    assert str(exc.value) == (
        f"query {ids[0]} was pruned from the query log by its retention policy (every entry up to id {ids[2]} "
        "is gone; the policy keeps 30d, 1GB). Its request and recorded results are no longer stored, so it "
        "cannot be replayed or compared. Run the search again to log it anew; raise RANKLOCK_LOG_RETENTION or "
        "RANKLOCK_LOG_MAX_BYTES to keep entries longer."
    )
    # An id beyond the log was never logged: the message says so, not "pruned".
    with pytest.raises(NotFound, match=rf"^no logged query with id {ids[2] + 1000} "):
        eng.replay(ids[2] + 1000)
    fresh = _log(eng, 1)[0]
    assert eng.replay(fresh).identical


def test_retention_runs_whenever_five_percent_of_the_size_limit_was_logged(clean_log: Engine) -> None:
    """The schedule counts the bytes each entry took: the log never exceeds its limit by more than 5 %."""
    from ranklock.store.log_retention import SLACK

    eng = clean_log
    _log(eng, 2)
    one = max(r["bytes"] for r in eng.db.fetchall("SELECT bytes FROM ranklock.query_log"))
    eng.settings.log_max_bytes = 40 * one  # 5 % of it: two entries
    ids, sizes = [], []
    for _ in range(60):  # more entries than the limit holds
        ids += _log(eng, 1)
        sizes.append(eng.log_status().bytes)
    # The log reached its limit, and never held more than the limit, 5 % of it, and the entry that crossed that.
    assert max(sizes) > eng.settings.log_max_bytes * 0.95 and eng.log_status().pruned_rows > 0
    assert max(sizes) <= eng.settings.log_max_bytes * (1 + SLACK) + one
    left = _ids(eng)
    assert left == ids[-len(left) :] and eng.log_status().pruned_through == left[0] - 1


def test_log_prune_and_db_status_on_the_command_line(clean_log: Engine) -> None:
    eng = clean_log
    ids = _log(eng, 4)
    home = str(eng.settings.home)
    runner = CliRunner()
    res = runner.invoke(app, ["db", "status", "--home", home, "--json"])
    assert res.exit_code == 0, res.output
    status = json.loads(res.output)
    assert status["server"] == "running"
    assert status["query_log"]["rows"] == 4 and status["query_log"]["first_id"] == ids[0]
    assert status["query_log"]["oldest"] is not None and status["query_log"]["bytes"] > 4000
    res = runner.invoke(app, ["log", "prune", "--home", home, "--older-than", "1h", "--max-bytes", "1B", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["deleted"] == 4 and report["rows"] == 0 and report["pruned_through"] == ids[-1]
    res = runner.invoke(app, ["log", "prune", "--home", home, "--max-bytes", "lots"])
    assert res.exit_code == 2
    assert "--max-bytes 'lots' is not a size; write bytes or a number with KB, MB, GB, KiB, MiB or GiB." in res.output
    res = runner.invoke(app, ["db", "status", "--home", home])
    assert res.exit_code == 0 and res.output.startswith(
        f"home: {home} (given)\nserver: running\nquery log: 0 entries, 0 bytes ("
    )
    assert "\nanswer log: " in res.output


@pytest.fixture
def failing_log(iso: Engine) -> Iterator[Engine]:
    """The database refuses every query-log write for collection "blocked" with SQLSTATE 53100 (disk_full).

    A real trigger on the real table: the insert fails in PostgreSQL exactly as a full disk makes it fail.
    """
    iso.db.execute(
        "CREATE OR REPLACE FUNCTION ranklock.test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$"
    )
    iso.db.execute(
        "CREATE TRIGGER test_disk_full BEFORE INSERT ON ranklock.query_log FOR EACH ROW "
        "WHEN (NEW.collection = 'blocked') EXECUTE FUNCTION ranklock.test_disk_full()"
    )
    try:
        yield iso
    finally:
        iso.db.execute("DROP TRIGGER test_disk_full ON ranklock.query_log")
        iso.db.execute("DROP FUNCTION ranklock.test_disk_full()")


def warning(eng: Engine) -> str:
    return (
        "query log: this search was not logged (InsufficientResources: the database server's disk is full: no space "
        "left on device (PostgreSQL 53100: could not extend file: No space left on device). Nothing of this operation "
        f"was stored. Free space on the file system that holds {eng.db.data_directory} (`df -h "
        f"{eng.db.data_directory}`), or move the data to a larger disk, then run the command again; do not delete the "
        "data directory: it holds every collection.); the results are complete, but `ranklock replay` cannot re-run "
        "it. Free space on the database server or fix the cause (RANKLOCK_LOG_QUERIES=0 turns logging off)."
    )


def test_a_failing_log_write_warns_and_never_fails_the_search(
    failing_log: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    eng = failing_log
    WARNING = warning(eng)
    logged = eng.search("notes", "lava volcano", k=2, mode="lexical")
    with caplog.at_level(logging.WARNING, logger="ranklock.querylog"):
        res = eng.search("blocked", "lava volcano", k=2, mode="lexical")
    assert [h.model_dump() for h in res.hits] == [h.model_dump() for h in logged.hits]
    assert res.query_id is None and res.complete == logged.complete
    assert res.warnings == [*logged.warnings, WARNING]
    assert [r.getMessage() for r in caplog.records] == [WARNING]
    # The HTTP API answers 200 with the warning; the CLI exits 0 and says it on stderr.
    r = TestClient(create_app(eng)).get(
        "/api/search", params={"collection": "blocked", "q": "lava volcano", "k": 2, "mode": "lexical"}
    )
    assert r.status_code == 200 and r.json()["warnings"][-1] == WARNING and r.json()["hits"]
    cli = CliRunner().invoke(
        app, ["search", "blocked", "lava volcano", "--mode", "lexical", "--home", str(eng.settings.home)]
    )
    assert cli.exit_code == 0, cli.output
    assert "not logged (InsufficientResources: the database server's disk is full" in " ".join(cli.output.split())
    # The unlogged answer was not cached with its warning either.
    eng.settings.result_cache = True
    try:
        assert eng.search("blocked", "lava volcano", k=2, mode="lexical").warnings == res.warnings
    finally:
        eng.settings.result_cache = False


def test_settings_read_durations_and_sizes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from ranklock import ConfigError, Settings

    monkeypatch.setenv("RANKLOCK_STATEMENT_TIMEOUT", "2m")
    monkeypatch.setenv("RANKLOCK_LOG_RETENTION", "12h")
    monkeypatch.setenv("RANKLOCK_LOG_MAX_BYTES", "64MiB")
    monkeypatch.setenv("RANKLOCK_LOG_TEXT", "hash")
    s = Settings()
    assert (s.statement_timeout, s.log_retention, s.log_max_bytes, s.log_text) == (120.0, 43200.0, 2**26, "hash")
    monkeypatch.setenv("RANKLOCK_STATEMENT_TIMEOUT", "soon")
    with pytest.raises(ConfigError) as exc:
        Settings()
    assert str(exc.value) == (
        "RANKLOCK_STATEMENT_TIMEOUT 'soon' is not a duration; write seconds or a number with s, m, h, d or w."
    )


def test_finding_the_cut_reads_only_what_the_limits_reach(clean_log: Engine) -> None:
    """No scan of the whole log: the size cut reads the kept entries (+1), the age cut the expired ones (+1)."""
    from ranklock.store.log_retention import QUERY_LOG, age_cut_sql, size_cut_sql

    eng = clean_log
    eng.db.execute(
        "INSERT INTO ranklock.query_log (collection, fingerprint, request, result_digest, result, timings, logged_at) "
        "SELECT 'synthetic', 'f', '{}', 'd', jsonb_build_object('pad', repeat('x', 1000)), '{}', "
        "now() - make_interval(days => 5000 - g) FROM generate_series(1, 5000) AS g"
    )
    one = eng.db.fetchone("SELECT max(bytes) AS b, min(bytes) AS a FROM ranklock.query_log")
    assert one is not None and one["a"] == one["b"]  # equal rows: the expected counts are exact

    def rows_read(query: Any, param: float) -> int:
        with eng.db.connection() as conn:
            text = query.as_string(conn)
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text, [param]).fetchone()[0][0]["Plan"]

        def scans(node: dict) -> list[int]:
            reads_table = node["Node Type"] in ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")
            own = [node["Actual Rows"] + node.get("Rows Removed by Filter", 0)] if reads_table else []
            return own + [n for child in node.get("Plans", []) for n in scans(child)]

        (read,) = scans(plan)
        return int(read)

    # 100 entries fit, the 101st is the cut, and the window function reads one row ahead (peers).
    assert rows_read(size_cut_sql(QUERY_LOG), 100 * one["b"]) == 102
    assert rows_read(age_cut_sql(QUERY_LOG), 4900 * 86400.0 + 43200) == 100  # 99 expired, then the first young one


@pytest.fixture
def clean_logs(clean_log: Engine) -> Engine:
    clean_log.db.execute("DELETE FROM ranklock.answer_log")
    clean_log.db.execute(
        "UPDATE ranklock.answer_log_retention SET pruned_through = 0, pruned_rows = 0, pruned_bytes = 0"
    )
    return clean_log


def test_the_answer_log_is_under_the_same_policy_in_db_status_and_log_prune(clean_logs: Engine) -> None:
    eng = clean_logs
    answers = [
        eng.ask("notes", q) for q in ("What rises from a volcano?", "What makes bread rise?", "What raises tides?")
    ]
    rows = eng.db.fetchall("SELECT id, bytes FROM ranklock.answer_log ORDER BY id")
    assert [r["id"] for r in rows] == [a.log_id for a in answers] and all(r["bytes"] > 500 for r in rows)
    status = eng.logs_status()
    assert set(status) == {"query_log", "answer_log"} and status["answer_log"].rows == 3
    report = eng.prune_log(max_bytes=rows[-1]["bytes"])  # room for the newest answer only
    assert report.logs["answer_log"].deleted == 2 and report.logs["answer_log"].status.rows == 1
    assert report.logs["answer_log"].status.pruned_through == rows[1]["id"]
    assert report.logs["query_log"].status.rows <= 1  # the one policy pruned the searches too
    res = CliRunner().invoke(app, ["log", "prune", "--home", str(eng.settings.home), "--max-bytes", "1B"])
    assert res.exit_code == 0 and "answer log: pruned 1 entry" in res.output and "query log: pruned" in res.output


def test_the_answer_log_prunes_itself_on_its_schedule(clean_logs: Engine) -> None:
    eng = clean_logs
    eng.ask("notes", "What rises from a volcano?")
    one = max(r["bytes"] for r in eng.db.fetchall("SELECT bytes FROM ranklock.answer_log"))
    eng.settings.log_max_bytes = 20 * one
    sizes = []
    for i in range(30):
        eng.ask("notes", f"What rises from a volcano, question {i}?")
        sizes.append(eng.logs_status()["answer_log"].bytes)
    assert eng.logs_status()["answer_log"].pruned_rows > 0
    assert max(sizes) <= eng.settings.log_max_bytes * 1.05 + one


def test_hash_only_logs_keep_no_text_and_replay_needs_it_given(clean_logs: Engine) -> None:
    from ranklock import QueryError

    eng = clean_logs
    eng.settings.log_text = "hash"
    query = "magma crust lava"
    res = eng.search("notes", query, k=2, mode="lexical")
    row = eng.db.fetchone("SELECT * FROM ranklock.query_log WHERE id = %s", [res.query_id])
    assert row is not None and "query" not in row["request"] and query not in json.dumps(row, default=str)
    digest = row["request"]["query_sha256"]
    with pytest.raises(QueryError) as exc:
        eng.replay(res.query_id)
    assert str(exc.value) == (
        f"query {res.query_id} was logged with hashes only (RANKLOCK_LOG_TEXT=hash): its query is not stored, only its "
        f"sha256 {digest[:12]}…. What is still stored (the snapshot, the parameters, the filter, every branch's ids, "
        "ranks and scores, the result digest) replays once the query is given again (--query TEXT); its sha256 must "
        "match."
    )
    with pytest.raises(QueryError, match=r"^the query given for query \d+ is not the one logged: its sha256 is "):
        eng.replay(res.query_id, query="magma crust")
    assert eng.replay(res.query_id, query=query).identical
    cli = CliRunner().invoke(app, ["replay", str(res.query_id), "--query", query, "--home", str(eng.settings.home)])
    assert cli.exit_code == 0 and "identical" in cli.output

    question = "What makes bread rise?"
    ans = eng.ask("notes", question)
    arow = eng.db.fetchone("SELECT * FROM ranklock.answer_log WHERE id = %s", [ans.log_id])
    assert arow is not None and arow["answer"] is None and arow["raw"] is None and arow["answer_sha256"]
    assert "question" not in arow["request"] and question not in json.dumps(arow, default=str)
    assert ans.answer not in json.dumps(arow, default=str)
    with pytest.raises(QueryError) as exc:
        eng.replay_answer(ans.answer_id)
    assert str(exc.value) == (
        f"answer {ans.answer_id} was logged with hashes only (RANKLOCK_LOG_TEXT=hash): its question is not stored, "
        f"only its sha256 {arow['request']['question_sha256'][:12]}…. The answer is not stored either, only its "
        "sha256; the snapshot, the numbered chunks (ids, ranks, scores, text hashes), the prompt hash and the "
        "generator are, and every layer (the answer by its sha256) replays once the question is given again "
        "(--question TEXT); its sha256 must match."
    )
    replayed = eng.replay_answer(ans.answer_id, question=question)
    assert replayed.identical and replayed.layers["answer"]["logged"] == arow["answer_sha256"]
