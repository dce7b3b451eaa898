"""An erasure reaches replicas, older transactions, the cluster and the logs (issue 48), tried as the issue did.

Each case purges a document while something could keep its rows (a streaming standby with
hot_standby_feedback and its slot, a REPEATABLE READ reader on the primary, a Citus cluster's workers)
and while the logs hold searches that name it without returning it; then the servers are stopped and
every file under the home is read for the marker and the id, as ``grep -rlai`` would: 0 files.  Real
embedded servers, a real standby made by ``pg_basebackup``, the real local Citus cluster; nothing mocked.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from fakes import use_hash_embedder
from ranklock import Document, Engine, NotFound
from ranklock.cli import app
from ranklock.mcp_server import DocumentArguments, _handlers
from ranklock.snapshot.purge_key import KEY_FILE, load_purge_key
from ranklock.store.cluster import LocalCluster
from ranklock.store.server import EmbeddedServer
from ranklock.store.standby import LocalReplica
from test_adversary_purge import files_holding, statistics_quoting

# A word and an id no other test uses: the shared server's statistics and the cluster's files are read for them.
MARKER = "Xylophqarnet"
VICTIM = "victim-xq48"
SECRET = f"The {MARKER} ledger names a hidden harbour beyond the basalt cliffs."


def _docs(n: int = 12) -> list[Document]:
    others = [
        Document(f"keep-{i:02d}", f"Note {i}", f"plain words about basalt cliffs number {i}", {"place": "cliff"})
        for i in range(n)
    ]
    return [*others, Document(VICTIM, "Ledger", SECRET, {"place": "harbour"})]


def _name_it(eng: Engine, coll: str) -> None:
    """Log entries that name the victim: one that returned it, two that did not (its id as the query, its word
    under a filter that excluded it), an ask whose question names it (its answer and its retrieval's entry),
    beside one that names nothing of it."""
    assert any(h.doc_id == VICTIM for h in eng.search(coll, f"{MARKER} basalt", k=5).hits)
    eng.search(coll, VICTIM, k=5, mode="lexical")
    excluded = eng.search(coll, MARKER, k=5, mode="lexical", filter='place = "cliff"')
    assert excluded.hits == [] or all(h.doc_id != VICTIM for h in excluded.hits)
    eng.ask(coll, f"what does {VICTIM} say about the {MARKER} ledger?")
    assert all(h.doc_id != VICTIM for h in eng.search(coll, "plain words number", k=5, mode="lexical").hits)


def _logged(eng: Engine, coll: str) -> dict[str, int]:
    row = eng.db.fetchone(
        "SELECT (SELECT count(*) FROM ranklock.query_log WHERE collection = %(c)s) AS queries, "
        "(SELECT count(*) FROM ranklock.query_log WHERE collection = %(c)s AND (request::text ILIKE %(m)s "
        "OR request::text ILIKE %(v)s OR result::text ILIKE %(v)s)) AS naming, "
        "(SELECT count(*) FROM ranklock.answer_log WHERE collection = %(c)s) AS answers",
        {"c": coll, "m": f"%{MARKER}%", "v": f"%{VICTIM}%"},
    )
    assert row is not None
    return {k: int(v) for k, v in row.items()}


NEEDLES = [MARKER.encode(), VICTIM.encode()]


class ReleaseWhenWaited:
    """A tracer that closes ``reader`` one second after the purge first asks who holds the horizon back: the purge
    then waits about that long, however long its transaction took on a loaded machine."""

    def __init__(self) -> None:
        self.reader: psycopg.Connection[Any] | None = None
        self.timer: threading.Timer | None = None

    def __call__(self, statement: str, _params: Any) -> None:
        if self.reader is not None and self.timer is None and statement.startswith("SELECT pid, usename, application_"):
            self.timer = threading.Timer(1.0, self.reader.close)
            self.timer.start()

    def join(self) -> None:
        if self.timer is not None:
            self.timer.join()
        if self.reader is not None:
            self.reader.close()


@pytest.fixture
def home(server_dir: Path) -> Iterator[Path]:
    """A home of its own (servers started as another OS user under root live outside pytest's basetemp)."""
    yield server_dir
    for name in ("r1",):
        replica = LocalReplica(server_dir, name)
        if replica.datadir.exists():
            replica.stop(mode="immediate")
    EmbeddedServer(server_dir).stop()


def test_a_purge_with_a_replica_attached_erases_what_its_feedback_held(home: Path) -> None:
    """The issue: the standby's hot_standby_feedback and slot held the xmin, VACUUM FULL copied the deleted rows
    into the new files, and the purge said "no byte of them is left there"; a second purge then found nothing."""
    with Engine(home=home, log_queries=True) as eng:
        emb = use_hash_embedder(eng)
        eng.ingest("notes", _docs(), create={"embedder": emb, "index": "hnsw"})
    replica = LocalReplica(home, "r1")
    replica.create()
    release = ReleaseWhenWaited()
    with Engine(home=home, log_queries=True, tracer=release) as eng:
        use_hash_embedder(eng)
        _name_it(eng, "notes")
        before = _logged(eng, "notes")
        assert before["naming"] == 4 and before["answers"] == 1
        eng.db.execute("ANALYZE")
        assert statistics_quoting(eng, [MARKER, VICTIM]), "the test must first see the marker in the statistics"
        # The standby's feedback holds its slot's xmin, and a query there holds it further back for a moment.
        assert eng.db.fetchone("SELECT xmin IS NOT NULL AS held FROM pg_replication_slots") == {"held": True}
        release.reader = psycopg.connect(replica.dsn, autocommit=False)
        release.reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        release.reader.execute("SELECT count(*) FROM ranklock.collections")
        try:
            out = eng.purge("notes", [VICTIM])
        finally:
            release.join()
        assert out.finished and out.checked and out.remaining == (), out.remaining
        assert out.seconds["wait"] >= 0.9, "the purge did not wait for the standby's query"
        assert out.log_entries_removed == 4 and out.answers_removed == 1
        after = _logged(eng, "notes")
        assert after == {"queries": before["queries"] - 4, "naming": 0, "answers": 0}
        assert not statistics_quoting(eng, [MARKER, VICTIM])
        record = eng.db.fetchone("SELECT erased_at IS NOT NULL AS erased FROM ranklock.purges")
        assert record == {"erased": True}
    replica.stop()
    EmbeddedServer(home).stop()
    assert files_holding(home, NEEDLES) == {}


def test_a_purge_waits_for_an_older_transaction_and_one_held_too_long_stays_unfinished(home: Path) -> None:
    """The issue: a REPEATABLE READ reader open during the purge left the same tables holding the text.  A reader
    that ends within the wait is waited for; one that outlasts it is named, the purge stays unfinished (not marked
    erased), and the same purge run again finishes it."""
    release = ReleaseWhenWaited()
    with Engine(home=home, log_queries=True, tracer=release) as eng:
        emb = use_hash_embedder(eng)
        eng.ingest("notes", _docs(), create={"embedder": emb, "index": "exact"})
        eng.ingest("other", _docs(), create={"embedder": emb, "index": "exact"})
        _name_it(eng, "notes")
        _name_it(eng, "other")
        eng.db.execute("ANALYZE")
        # A reader whose snapshot is older than the purge, released a second after the purge began to wait: waited for.
        release.reader = psycopg.connect(eng.db.dsn, application_name="older-reader")
        release.reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        release.reader.execute("SELECT count(*) FROM ranklock.collections")
        try:
            waited = eng.purge("notes", [VICTIM])
        finally:
            release.join()
        release.reader = None
        assert waited.finished and waited.seconds["wait"] >= 0.9, waited.seconds
        # One that stays past the wait (1 s here): named, and the purge is not finished.
        reader = psycopg.connect(eng.db.dsn, application_name="older-reader")
        try:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            reader.execute("SELECT count(*) FROM ranklock.collections")
            pid = reader.info.backend_pid
            eng.settings.purge_wait = 1.0
            held = eng.purge("other", [VICTIM])
            assert not held.finished and held.checked
            said = "\n".join(held.remaining)
            assert "ranklock.documents still holds " in said and "ranklock.query_log still holds " in said, said
            assert f"session pid {pid} (client backend, user 'postgres', application 'older-reader', " in said
            assert "its snapshot is older than the purge" in said
            coll = eng.collection("other")
            row = eng.db.fetchone("SELECT id, erased_at FROM ranklock.purges WHERE collection_id = %s", [coll.id])
            assert row is not None and row["erased_at"] is None
            got = CliRunner().invoke(
                app, ["purge", "other", VICTIM, "--home", str(home)], env={"RANKLOCK_PURGE_WAIT": "1"}
            )
            assert got.exit_code == 2, got.output
            assert f"error: purge {row['id']} is not finished (see above)" in " ".join(got.output.split())
        finally:
            reader.close()
        got = CliRunner().invoke(app, ["purge", "other", VICTIM, "--home", str(home)])
        assert got.exit_code == 0, got.output
        text = " ".join(got.output.split())
        assert f"purge {row['id']} had erased these documents but was not finished" in text
        assert "and their files checked: no byte of them is left there" in text
        again = eng.db.fetchone("SELECT erased_at FROM ranklock.purges WHERE id = %s", [row["id"]])
        assert again is not None and again["erased_at"] is not None
        # Finished: a third run has nothing to do, and says so.
        got = CliRunner().invoke(app, ["purge", "other", VICTIM, "--home", str(home)])
        assert got.exit_code == 2 and "holds no document 'victim-xq48' in any snapshot" in got.output
    EmbeddedServer(home).stop()
    assert files_holding(home, NEEDLES) == {}


def test_a_purge_on_the_local_cluster_reaches_every_node(citus_cluster: LocalCluster) -> None:
    """The issue: the coordinator's and the workers' WAL kept the text (wal_recycle on there), and the "not
    reached" list did not say so; the workers' statistics and the coordinator's (stale, of the distributed
    tables) quoted it too."""
    home = citus_cluster.home
    with Engine(home=home, log_queries=True) as eng:
        assert eng.cluster is not None and eng.server is None  # the home's database is its cluster
        emb = use_hash_embedder(eng)
        eng.ingest("erasure48", _docs(), create={"embedder": emb, "index": "exact"})
        _name_it(eng, "erasure48")
        eng.db.execute("ANALYZE")
        out = eng.purge("erasure48", [VICTIM])
        assert out.finished and out.checked, out.remaining
        assert out.wal_removed >= 3  # at least one segment a node
        workers = [f"worker 127.0.0.1:{n.port}" for n in citus_cluster.nodes()[1:]]
        assert [f"pg_catalog.pg_statistic on {w}" for w in workers] == [
            r for r in out.rewritten if r.startswith("pg_catalog.pg_statistic on ")
        ]
        said = "\n".join(out.unreached)
        assert "wal_recycle" not in said and "could not connect" not in said
        assert out.log_entries_removed == 4
        with psycopg.connect(citus_cluster.dsn, autocommit=True) as conn:
            recycle = conn.execute("SELECT result FROM run_command_on_all_nodes('SHOW wal_recycle')").fetchall()
        assert recycle == [("off",)] * len(citus_cluster.nodes())
    citus_cluster.stop()
    try:
        assert files_holding(home / "cluster", NEEDLES) == {}
    finally:
        citus_cluster.start()


def test_a_worker_the_purge_cannot_reach_is_named_and_the_purge_stays_unfinished(
    citus_cluster: LocalCluster, cname: str
) -> None:
    """A worker that goes down after the purge's transaction (stopped, for real, when the erasure starts): its
    shards, statistics and WAL are not reached, which the purge says, and it stays unfinished until run again."""
    home = citus_cluster.home
    worker = citus_cluster.nodes()[2]
    stopped: list[bool] = []

    def stop_the_worker(statement: str, _params: Any) -> None:
        # The erasure's first statement: the purge's transaction has committed on every node by then.
        if statement == "SELECT 1 FROM pg_extension WHERE extname = 'citus'" and not stopped:
            stopped.append(worker.server(home).stop(mode="immediate"))

    try:
        with Engine(home=home, log_queries=True, tracer=stop_the_worker) as eng:
            emb = use_hash_embedder(eng)
            eng.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
            out = eng.purge(cname, [VICTIM])
    finally:
        citus_cluster.start()
    assert stopped == [True] and not out.finished
    assert out.remaining[0].startswith(f"worker 127.0.0.1:{worker.port}: ranklock could not connect to it (")
    assert out.remaining[0].endswith("run the same purge again once it answers")
    with Engine(home=home, log_queries=True) as eng:
        again = eng.purge(cname, [VICTIM])
    assert again.resumed and again.finished, again.remaining


def test_the_purge_record_is_keyed_by_a_secret_of_the_home(engine: Engine, rl_home: Path, cname: str) -> None:
    """The issue: the record kept sha256 of a fixed prefix, the collection and the id, so a dump confirmed a guessed
    id (an email, a case number) by dictionary."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
    coll = engine.collection(cname)
    # A record made before keys, as issue 42's purge wrote it (an id of a document never ingested here).
    legacy = hashlib.sha256(f"ranklock-purge\x00{cname}\x00old-case-17".encode()).hexdigest()
    engine.db.execute(
        "INSERT INTO ranklock.purges (collection_id, id_hashes, documents, snapshots, query_ids, answer_ids, "
        "erased_at) VALUES (%s, %s, 1, '{}', '{}', '{}', now())",
        [coll.id, [legacy]],
    )
    out = engine.purge(cname, [VICTIM])
    path = rl_home / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_bytes()) == 32
    secret = path.read_bytes()
    rows = engine.db.fetchall(
        "SELECT id, id_hashes, key_id FROM ranklock.purges WHERE collection_id = %s ORDER BY id", [coll.id]
    )
    key = load_purge_key(rl_home)
    assert [r["key_id"] for r in rows] == [key.key_id, key.key_id]
    mine = next(r for r in rows if r["id"] == out.purge_id)
    unkeyed = hashlib.sha256(f"ranklock-purge\x00{cname}\x00{VICTIM}".encode()).hexdigest()
    keyed = hmac.new(secret, f"ranklock-purge\x00{cname}\x00{VICTIM}".encode(), hashlib.sha256).hexdigest()
    assert mine["id_hashes"] == [keyed] and unkeyed not in mine["id_hashes"]
    # The old record was keyed too, and is still recognised: an ingest of its id is refused and named.
    old = next(r for r in rows if r["id"] != out.purge_id)
    assert old["id_hashes"] != [legacy] and legacy not in json.dumps(
        engine.db.fetchall("SELECT id_hashes FROM ranklock.purges")
    )
    report = engine.ingest(
        cname,
        [Document("old-case-17", "", "back again"), Document(VICTIM, "", "back too"), Document("new-48", "", "x")],
    )
    assert report.purged_skipped == {"old-case-17": old["id"], VICTIM: out.purge_id}


def test_a_reader_is_told_the_same_of_a_purged_id_as_of_one_never_stored(
    engine: Engine, rl_home: Path, cname: str
) -> None:
    """The issue: get_document told any read-scope client "was erased by purge 1 at ..." for a purged id, and "has
    no document" for one never stored.  The operator (`ranklock document get`) still sees the purge."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
    out = engine.purge(cname, [VICTIM])
    sid = engine.collection(cname).active_snapshot_id
    said = {}
    for doc_id in (VICTIM, "never-stored-48"):
        with pytest.raises(NotFound) as exc:
            engine.document(cname, doc_id)
        said[doc_id] = str(exc.value)
        with pytest.raises(NotFound) as exc:
            _handlers(engine)["get_document"](DocumentArguments(collection=cname, doc_id=doc_id))
        assert str(exc.value) == said[doc_id]
    assert said == {
        i: f"collection {cname!r} has no document {i!r} in snapshot {sid}; use a doc_id from a search hit of that "
        "snapshot."
        for i in (VICTIM, "never-stored-48")
    }
    with pytest.raises(NotFound) as exc:
        engine.document(cname, VICTIM, show_purge=True)
    assert str(exc.value).startswith(f"document {VICTIM!r} of {cname!r} was erased by purge {out.purge_id} at ")
    # The operator's command, in the home whose purge key made the record.
    got = CliRunner().invoke(app, ["document", "get", cname, VICTIM, "--dsn", engine.db.dsn, "--home", str(rl_home)])
    assert got.exit_code == 2 and f"was erased by purge {out.purge_id} at " in " ".join(got.output.split())


def test_a_field_only_the_purged_document_had_is_named_as_not_erased(engine: Engine, cname: str) -> None:
    """The issue: a unique metadata key of the purged document stayed a typed field (collections.fields, a column
    and index name, every manifest, the canary record), and the purge said nothing of it."""
    emb = use_hash_embedder(engine)
    victim = Document(VICTIM, "Ledger", SECRET, {"place": "harbour", "casefile_xq": "A-17"})
    engine.ingest(cname, [*_docs()[:-1], victim], create={"embedder": emb, "index": "exact"})
    assert "casefile_xq" in [f.name for f in engine.collection(cname).fields]
    got = CliRunner().invoke(app, ["purge", cname, VICTIM, "--dsn", engine.db.dsn])
    assert got.exit_code == 0, got.output
    text = " ".join(got.output.split())
    assert "the typed field name(s) 'casefile_xq': only the purged documents had them" in text
    assert "ingest the documents into a new collection and drop this one" in text
    # The record says how many, not which: the name may be the very thing to forget.
    row = engine.db.fetchone(
        "SELECT unreached FROM ranklock.purges AS p JOIN ranklock.collections AS c ON c.id = p.collection_id "
        "WHERE c.name = %s",
        [cname],
    )
    assert row is not None and "1 typed field name(s) only the purged documents had stay" in " ".join(row["unreached"])
    assert "casefile_xq" not in json.dumps(row["unreached"])
    # A field other documents have too ("place") is not named.
    assert "'place'" not in text


def test_a_search_made_only_of_words_nothing_left_holds_goes_with_the_purge(engine: Engine, cname: str) -> None:
    """The issue's rule: queries made only of terms that no other live document holds go (a misspelt name,
    searched under a filter that excluded it); a query with one word the collection still holds stays."""
    emb = use_hash_embedder(engine)
    engine.ingest(cname, _docs(), create={"embedder": emb, "index": "exact"})
    gone = [
        engine.search(cname, "Xylophqarnett", k=5, mode="lexical").query_id,  # held by no document, before or after
        engine.search(cname, "harbour", k=5, mode="lexical", filter='place = "cliff"').query_id,  # only the victim's
    ]
    kept = [
        engine.search(cname, "plain Xylophqarnett", k=5, mode="lexical").query_id,  # "plain": the others hold it
        engine.search(cname, "words number", k=5, mode="lexical").query_id,
    ]
    out = engine.purge(cname, [VICTIM])
    left = {
        r["id"] for r in engine.db.fetchall("SELECT id FROM ranklock.query_log WHERE id = ANY (%s)", [[*gone, *kept]])
    }
    assert left == set(kept) and out.log_entries_removed >= 2
