"""A purge as a hostile tester checks it (issue 42): no byte of an erased document is left in the files of the
home, in the catalog's statistics or in the WAL; searches keep running while it works; an interrupted purge is
finished by running it again; a purge after a killed ingest, and what it cannot reach, are said plainly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from fakes import use_hash_embedder
from ranklock import Document, Engine, NotFound
from ranklock.cli import app
from ranklock.eval.canary import run_canary
from ranklock.store import locks
from ranklock.store.server import EmbeddedServer

MARKER = "Zqxvormelant"  # a word no other document has: its lexeme is "zqxvormelant"
VICTIM = "victim-zq81"
SECRET = f"The {MARKER} sentence names a secret place near the volcano ridge."
TESTS = str(Path(__file__).resolve().parent)
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _docs(n: int = 12, *, place: bool = False) -> list[Document]:
    """``place``: a typed field whose value is the victim's marker, so the filter table and value counts hold it."""
    others = [
        Document(f"keep-{i:02d}", f"Note {i}", f"plain words about volcano lava number {i}", _place("lava", place))
        for i in range(n)
    ]
    return [*others, Document(VICTIM, "Secret", SECRET, _place(MARKER, place))]


def _place(value: str, wanted: bool) -> dict[str, Any]:
    return {"place": value} if wanted else {}


def tables_quoting(engine: Engine, collection: str, needles: list[str]) -> list[str]:
    """The collection's filter tables and value counts (of segments and of snapshots' dead rows) whose rows
    quote a needle."""
    names = engine.db.fetchall(
        "SELECT t.tablename FROM pg_tables AS t JOIN ranklock.collections AS c ON c.name = %s "
        "WHERE t.schemaname = 'ranklock_data' AND (EXISTS (SELECT 1 FROM ranklock.segments AS g WHERE "
        "g.collection_id = c.id AND t.tablename IN ('fields_' || g.id, 'counts_' || g.id)) OR EXISTS (SELECT 1 "
        "FROM ranklock.snapshots AS s WHERE s.collection_id = c.id AND t.tablename = 'valuecounts_' || s.id)) "
        "ORDER BY 1",
        [collection],
    )
    return [
        r["tablename"]
        for r in names
        if engine.db.fetchone(
            sql.SQL(
                "SELECT EXISTS (SELECT 1 FROM {} AS t, unnest(%s::text[]) AS n WHERE t::text ILIKE '%%' || n || '%%') AS q"
            ).format(sql.Identifier("ranklock_data", r["tablename"])),
            [needles],
        )
        == {"q": True}
    ]


def files_holding(home: Path, needles: list[bytes]) -> dict[str, list[str]]:
    """Every file under ``home`` holding one of ``needles`` (case-insensitive), as ``grep -rlai`` would find it."""
    found: dict[str, list[str]] = {}
    low = [n.lower() for n in needles]
    for path in sorted(home.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes().lower()
        hits = [n.decode() for n in low if n in data]
        if hits:
            found[str(path.relative_to(home))] = hits
    return found


def statistics_quoting(engine: Engine, needles: list[str]) -> list[dict[str, Any]]:
    """Rows of pg_stats whose most common values or elements or histogram bounds quote one of ``needles``."""
    return engine.db.fetchall(
        "SELECT schemaname, tablename, attname FROM pg_stats WHERE EXISTS (SELECT 1 FROM unnest(%s::text[]) AS n "
        "WHERE concat_ws(' ', most_common_vals::text, histogram_bounds::text, most_common_elems::text) "
        "ILIKE '%%' || n || '%%')",
        [needles],
    )


@pytest.fixture
def own_home(tmp_path: Path) -> Iterator[Path]:
    """A home with an embedded server of its own: the test stops it to read its files at rest."""
    home = tmp_path / "home"
    yield home
    EmbeddedServer(home).stop()


def test_after_a_purge_no_file_of_the_home_holds_the_text_its_lexemes_or_its_id(own_home: Path) -> None:
    """The issue: the heap, TOAST, the tsv index, the terms table and its key, both logs, pg_statistic, three WAL
    files and the canary record still held the purged marker after CHECKPOINT, VACUUM and `db stop`."""
    eng = Engine(home=own_home, log_queries=True)
    try:
        emb = use_hash_embedder(eng)
        eng.ingest("notes", _docs(place=True), create={"embedder": emb, "index": "hnsw"})
        # A second version of the victim: its old version is in an older segment, dead there.
        eng.ingest("notes", [Document(VICTIM, "Secret", SECRET + " It was changed once.", {"place": MARKER})])
        assert any(h.doc_id == VICTIM for h in eng.search("notes", f"{MARKER} volcano", k=5).hits)
        # A filtered search makes the value counts of both segments and of the snapshot's dead rows.
        hit = eng.search("notes", "volcano", k=5, mode="lexical", filter=f'place = "{MARKER}"')
        assert hit.matching_count == 1 and hit.hits[0].doc_id == VICTIM
        quoting = tables_quoting(eng, "notes", [MARKER, VICTIM])
        sid = eng.collection("notes").active_snapshot_id
        assert f"valuecounts_{sid}" in quoting and {t.split("_")[0] for t in quoting} == {
            "counts",
            "fields",
            "valuecounts",
        }, f"the test must first see the marker in the filter tables and value counts: {quoting}"
        eng.ask("notes", f"what does the {MARKER} sentence name?")
        run_canary(eng, "notes", [("q1", f"{MARKER} ridge", None)])
        eng.db.execute("ANALYZE")
        needles = [MARKER, VICTIM]
        assert statistics_quoting(eng, needles), "the test must first see the marker in the statistics"
        out = eng.purge("notes", [VICTIM])
        assert out.documents == 1 and len(out.canary_records) == 1 and out.wal_removed >= 1
        assert "ranklock.query_log" in out.rewritten and "pg_catalog.pg_statistic" in out.rewritten
        assert not statistics_quoting(eng, needles)
        assert tables_quoting(eng, "notes", needles) == []
        kept = eng.search("notes", "volcano lava", k=20, mode="lexical")
        assert sorted(h.doc_id for h in kept.hits) == [f"keep-{i:02d}" for i in range(12)]
        # Counted anew from the rewritten tables (a search that names the marker would log it again).
        assert eng.search("notes", "volcano", k=20, mode="lexical", filter='place = "lava"').matching_count == 12
        assert tables_quoting(eng, "notes", needles) == []
    finally:
        eng.close()
    EmbeddedServer(own_home).stop()
    assert files_holding(own_home, [MARKER.encode(), VICTIM.encode()]) == {}


def test_searches_keep_running_while_a_purge_rewrites_and_waits_to_swap(engine: Engine, cname: str) -> None:
    """Copy and swap: the old segment tables serve every search until the swap, which tries for its locks in
    short attempts behind the snapshot's read gate instead of queueing the searches behind it."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(40), create={"embedder": emb, "index": "hnsw"})
    seg = engine.collection(cname).active_snapshot_id
    indexes = (
        "SELECT tablename, indexname, regexp_replace(indexdef, '^CREATE (UNIQUE )?INDEX \\S+ ', '') AS def "
        "FROM pg_indexes WHERE schemaname = 'ranklock_data' AND tablename ~ %s ORDER BY 1, 2"
    )
    before = engine.db.fetchall(indexes, [f"_{seg}$"])
    reader = psycopg.connect(engine.db.dsn)
    reader.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("ranklock_data", f"chunks_{seg}")))
    # The reader's open transaction holds the old chunk table: the purge copies, then waits to swap.
    done: list[Any] = []
    purge = threading.Thread(target=lambda: done.append(engine.purge(cname, [VICTIM])))
    purge.start()
    try:
        waited = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not waited:
            # The purge is trying to swap once it has held a read gate (an advisory lock of its namespace).
            row = engine.db.fetchone(
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
                "AND mode = 'ExclusiveLock'",
                [locks.READ_GATE],
            )
            waited = int(row["n"]) if row else 0
            time.sleep(0.005)
        assert waited, "the purge never tried to swap"
        slowest = 0.0
        for _ in range(10):
            t0 = time.monotonic()
            res = engine.search(cname, "volcano lava", k=5)
            slowest = max(slowest, time.monotonic() - t0)
            assert len(res.hits) == 5
        # A search waits at most one attempt: the gate's wait and the tables' (0.5 s each), with a loaded machine's margin.
        assert slowest < 3.0, f"a search waited {slowest:.2f} s behind the purge"
        assert purge.is_alive() and not done
    finally:
        reader.close()
        purge.join(60)
    assert done and done[0].documents == 1
    assert all(h.doc_id != VICTIM for h in engine.search(cname, f"{MARKER} volcano", k=50).hits)
    # The swapped tables have the indexes (and constraint names) they had, each built anew.
    assert engine.db.fetchall(indexes, [f"_{seg}$"]) == before and len(before) >= 6


def test_value_counts_read_while_a_purge_waits_to_swap_go_with_the_old_tables(engine: Engine, cname: str) -> None:
    """A filtered search that sums a segment's value counts while the purge waits to swap counts the rows the
    purge has not yet committed away: those counts must not outlive the swap (nor quote the purged value)."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(40, place=True), create={"embedder": emb, "index": "exact"})
    seg = engine.collection(cname).active_snapshot_id
    # The ingest made them (ranklock.snapshot.value_counts).
    assert engine.db.fetchone("SELECT to_regclass(%s)::text AS t", [f"ranklock_data.counts_{seg}"]) == {
        "t": f"ranklock_data.counts_{seg}"
    }
    reader = psycopg.connect(engine.db.dsn)
    reader.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("ranklock_data", f"chunks_{seg}")))
    done: list[Any] = []
    purge = threading.Thread(target=lambda: done.append(engine.purge(cname, [VICTIM])))
    purge.start()
    counted: list[int] = []
    search = threading.Thread(
        target=lambda: counted.append(
            engine.search(cname, "volcano", k=5, mode="lexical", filter='place = "lava"').matching_count
        )
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not engine.db.fetchone(
            "SELECT 1 AS x FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND mode = 'ExclusiveLock'",
            [locks.READ_GATE],
        ):
            time.sleep(0.005)
        search.start()
        time.sleep(1.0)  # time to make the counts from the rows it sees (or to wait for the purge)
    finally:
        reader.close()
        purge.join(60)
        if search.ident is not None:
            search.join(60)
    assert done and done[0].documents == 1 and counted == [40]
    assert tables_quoting(engine, cname, [MARKER, VICTIM]) == []
    assert engine.search(cname, "volcano", k=5, mode="lexical", filter='place = "lava"').matching_count == 40


def test_a_search_that_logs_after_a_purge_committed_logs_nothing(engine: Engine, rl_home: Path, cname: str) -> None:
    """A search read the snapshot before the purge and logs after it: the entry would quote the erased document."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
    purged: list[Any] = []

    def purge_before_the_log_write(statement: str, _params: Any) -> None:
        if statement.startswith("INSERT INTO ranklock.query_log") and not purged:
            purged.append(engine.purge(cname, [VICTIM]))

    late = Engine(home=rl_home, log_queries=True, tracer=purge_before_the_log_write)
    try:
        late.embedders.register(engine.embedders.get(emb))
        res = late.search(cname, f"{MARKER} volcano", k=5)
    finally:
        late.close()
    assert purged and res.query_id is None and any(h.doc_id == VICTIM for h in res.hits)
    assert any(
        w.startswith(f"query log: this search was not logged: a purge changed snapshot {res.snapshot.id} while it ran")
        for w in res.warnings
    )
    row = engine.db.fetchone(
        "SELECT count(*) AS n FROM ranklock.query_log WHERE collection = %s AND result::text LIKE %s",
        [cname, f"%{VICTIM}%"],
    )
    assert row == {"n": 0}


PURGE = """
import sys
sys.path.insert(0, sys.argv[1])
from fakes import use_hash_embedder
from ranklock import Engine
eng = Engine(dsn=sys.argv[2])
eng.purge(sys.argv[3], sys.argv[4:])
"""


def test_a_purge_killed_after_its_commit_is_finished_by_running_it_again(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with psycopg.connect(engine.db.dsn) as blocker:
        # The rewrite of the stored versions waits for this reader: the purge has committed by then.
        blocker.execute("SELECT count(*) FROM ranklock.documents")
        proc = subprocess.Popen([sys.executable, "-c", PURGE, TESTS, engine.db.dsn, cname, VICTIM], env=env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                row = engine.db.fetchone(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                    '\'VACUUM (FULL, ANALYZE) "ranklock"."documents"%%\''
                )
                if row and row["n"]:
                    break
                time.sleep(0.01)
            else:
                pytest.fail("the purge never reached its rewrite of the stored versions")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    coll = engine.collection(cname)
    row = engine.db.fetchone("SELECT id, erased_at FROM ranklock.purges WHERE collection_id = %s", [coll.id])
    assert row is not None and row["erased_at"] is None
    result = CliRunner().invoke(app, ["purge", cname, VICTIM, "--dsn", engine.db.dsn])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"purge {row['id']} had erased these documents but was not finished" in said
    assert "and their files checked: no byte of them is left there" in said
    after = engine.db.fetchone("SELECT erased_at FROM ranklock.purges WHERE id = %s", [row["id"]])
    assert after is not None and after["erased_at"] is not None


INGEST = """
import sys
sys.path.insert(0, sys.argv[1])
from fakes import use_hash_embedder
from ranklock import Document, Engine
eng = Engine(dsn=sys.argv[2])
emb = use_hash_embedder(eng)
changed = Document("keep-00", "Note 0", "plain words about volcano lava number 0, changed")
eng.ingest(sys.argv[3], [changed, *(Document(f"n{i:04d}", "", f"words of note {i} about lava") for i in range(4000))])
"""


def test_a_purge_after_a_killed_ingest_reaps_the_dead_build_and_names_it(engine: Engine, cname: str) -> None:
    """The issue: `UndefinedTable: ranklock_data.forward_N` until some other command reaped the dead build, whose
    snapshot `snapshot diff` then diffed as if it were real and `search --snapshot` called "building"."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
    coll = engine.collection(cname)
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", INGEST, TESTS, engine.db.dsn, cname], env=env)
    dead = None
    try:
        # Killed once its segment has a chunk table and the snapshot references the victim's segment,
        # before its BM25 tables exist: what a purge then recounted and failed on.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            row = engine.db.fetchone(
                "SELECT s.id FROM ranklock.snapshots AS s WHERE s.collection_id = %s AND s.status = 'building' "
                "AND to_regclass(format('ranklock_data.chunks_%%s', s.id)) IS NOT NULL "
                "AND to_regclass(format('ranklock_data.forward_%%s', s.id)) IS NULL",
                [coll.id],
            )
            if row is not None:
                dead = int(row["id"])
                break
            time.sleep(0.002)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert dead is not None, "the ingest finished before it could be killed"
    runner = CliRunner()
    never = f"snapshot {dead} of {cname!r} was never finished: the process building it ended (killed or crashed)"
    got = runner.invoke(app, ["search", cname, "lava", "--snapshot", str(dead), "--dsn", engine.db.dsn])
    assert got.exit_code == 2 and never in " ".join(got.output.split()), got.output
    out = engine.purge(cname, [VICTIM])  # right after the kill: nothing reaped the dead build yet
    assert out.documents == 1
    status = engine.db.fetchone("SELECT status FROM ranklock.snapshots WHERE id = %s", [dead])
    assert status == {"status": "failed"}
    for args in (
        ["snapshot", "diff", cname, str(coll.active_snapshot_id), str(dead)],
        ["search", cname, "lava", "--snapshot", str(dead)],
    ):
        got = runner.invoke(app, [*args, "--dsn", engine.db.dsn])
        assert got.exit_code == 2 and never in " ".join(got.output.split()), got.output


def test_replay_of_an_answer_the_purge_removed_names_the_purge(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
    answer = engine.ask(cname, f"what does the {MARKER} sentence name?")
    assert any(c.doc_id == VICTIM for c in answer.chunks)
    out = engine.purge(cname, [VICTIM])
    with pytest.raises(NotFound) as exc:
        engine.replay_answer(answer.answer_id)
    assert str(exc.value).startswith(
        f"answer {answer.answer_id} quoted a document that purge {out.purge_id} erased at "
    )


def test_a_purge_on_an_external_server_says_what_it_cannot_reach(engine: Engine, cname: str) -> None:
    """Through RANKLOCK_DSN as a role that is not a superuser: its own tables are rewritten, pg_statistic and the
    WAL are not, and the purge says so, with what a superuser would run."""
    role, database = "rl_purger", "rl_purge_external"
    with psycopg.connect(engine.db.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(role)))
    info = psycopg.conninfo.conninfo_to_dict(engine.db.dsn)
    with psycopg.connect(**{**info, "dbname": database}, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")
        admin.execute("CREATE EXTENSION unaccent")
    dsn = psycopg.conninfo.make_conninfo(**{**info, "dbname": database, "user": role})
    ext = Engine(dsn=dsn, log_queries=True)
    try:
        emb = use_hash_embedder(ext)
        ext.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
        ext.search(cname, f"{MARKER} volcano", k=5)
        out = ext.purge(cname, [VICTIM])
    finally:
        ext.close()
    assert "ranklock.documents" in out.rewritten and "pg_catalog.pg_statistic" not in out.rewritten
    assert out.wal_removed == 0
    said = "\n".join(out.unreached)
    assert f"pg_statistic's old row versions: role {role!r} is not a superuser" in said
    assert f"the server's WAL: role {role!r} may not switch WAL segments and checkpoint" in said
    assert "the file system's free blocks" in said and "copies and backups of the data" in said
    with psycopg.connect(engine.db.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


FIRST_INGEST = """
import sys
sys.path.insert(0, sys.argv[1])
from fakes import use_hash_embedder
from ranklock import Document, Engine
eng = Engine(dsn=sys.argv[2])
emb = use_hash_embedder(eng)
docs = [Document(f"n{i:04d}", "", f"words of note {i} about lava") for i in range(3000)]
eng.ingest(sys.argv[3], docs, create={"embedder": emb})
"""


def test_a_killed_first_ingest_leaves_no_collection_and_the_retry_gets_its_settings(
    engine: Engine, cname: str, tmp_path: Path
) -> None:
    """The issue: the killed first ingest left the collection made with the defaults; the retry's --index exact
    --language simple --window 128 were silently ignored, as they are on any existing collection."""
    from ranklock.settings import ChunkerParams

    # Its sessions are named, so the test can wait for the server to end them after the kill.
    appname = f"killed-first-ingest-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "PGAPPNAME": appname}
    proc = subprocess.Popen([sys.executable, "-c", FIRST_INGEST, TESTS, engine.db.dsn, cname], env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            row = engine.db.fetchone(
                "SELECT count(*) AS n FROM ranklock.snapshots AS s JOIN ranklock.collections AS c ON "
                "c.id = s.collection_id WHERE c.name = %s AND s.status = 'building'",
                [cname],
            )
            if row and row["n"]:
                break
            time.sleep(0.005)
        named = engine.db.fetchone("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = %s", [appname])
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert named and named["n"] > 0, "the first ingest's sessions do not carry PGAPPNAME"
    # A backend notices its client is gone when it next reads from it: one in the middle of a statement
    # finishes it first, holding the build and writer locks until then (longer on a loaded machine).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and engine.db.fetchone(
        "SELECT 1 AS x FROM pg_stat_activity WHERE application_name = %s", [appname]
    ):
        time.sleep(0.05)
    assert engine.db.fetchone("SELECT provisional FROM ranklock.collections WHERE name = %s", [cname]) == {
        "provisional": True
    }, "the first ingest was not killed mid-way"
    assert cname not in [c.name for c in engine.collections()]  # the listing removed it
    emb = use_hash_embedder(engine)
    docs = [Document("d1", "", "lava words")]
    engine.ingest(
        cname,
        docs,
        create={
            "embedder": emb,
            "index": "exact",
            "language": "simple",
            "chunker": ChunkerParams(window=128, overlap=16),
        },
    )
    coll = engine.collection(cname)
    assert (coll.index_kind, coll.language, coll.chunker.window, coll.provisional) == ("exact", "simple", 128, False)
    (tmp_path / "note.md").write_text("More lava words.\n")
    got = CliRunner().invoke(
        app, ["ingest", cname, str(tmp_path), "--index", "hnsw", "--window", "256", "--dsn", engine.db.dsn]
    )
    assert got.exit_code == 2
    assert " ".join(got.output.split()) == (
        f"error: collection {cname!r} exists, and this ingest asks for settings it was not made with: index hnsw "
        "(the collection has exact); window 256 (the collection has 128). They are fixed for a collection's "
        "lifetime: leave them out to ingest into it, or ingest into a new collection (another name)."
    )


def test_db_stop_waits_for_a_running_ingest_and_a_forced_stop_is_not_undone(own_home: Path, tmp_path: Path) -> None:
    """The issue: `ranklock db stop` during an ingest made the ingest fail, and its reconnect logic started the
    server again, undoing the operator's stop (before a backup, say)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": f"n{i:05d}", "text": f"words of note {i} about lava"}) + "\n" for i in range(6000))
    )
    eng = Engine(home=own_home)
    eng.close()  # the server runs; the ingest below is its only client
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    launcher = str(Path(TESTS) / "mcp_hash_server.py")  # the CLI, with the tests' hash embedder resolvable
    proc = subprocess.Popen(
        [sys.executable, launcher, "ingest", "big", str(corpus), "--home", str(own_home), "--embedder", "test:hash-8"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = EmbeddedServer(own_home)
    try:
        deadline = time.monotonic() + 120
        while not server.writers() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.writers(), "the ingest never started writing"
        runner = CliRunner()
        got = runner.invoke(app, ["db", "stop", "--home", str(own_home)])
        assert got.exit_code == 2, got.output
        assert " ".join(got.output.split()).startswith(
            "error: not stopped: 1 writer(s) are running: a writer of collection 'big' (backend pid "
        )
        assert server.running()
        got = runner.invoke(app, ["db", "stop", "--force", "--home", str(own_home)])
        assert got.exit_code == 0 and got.output.startswith("stopped"), got.output
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err
    assert "was stopped on purpose (`ranklock db stop` at " in " ".join(err.split()), err
    time.sleep(1)
    assert not server.running()  # nobody started it again
    assert server.stopped_on_purpose() is not None
    got = CliRunner().invoke(app, ["collections", "--home", str(own_home)])  # a new command starts it
    assert got.exit_code == 0 and server.running() and server.stopped_on_purpose() is None
