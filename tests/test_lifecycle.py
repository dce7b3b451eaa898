"""A collection's whole life (issue 41): writes that change nothing, what a delete and a purge leave
for the next ingest, standard input, documents by id, and the end of a collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import resolve_hash_embedder_by_id, use_hash_embedder
from ranklock import Document, Engine
from ranklock.cli import app


def notes(n: int = 4) -> list[Document]:
    return [Document(f"n{i}", f"note {i}", f"Note {i} about tides, bread and the harbour ledger.") for i in range(n)]


def test_an_unchanged_ingest_builds_nothing_and_keeps_the_active_snapshot(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    first = engine.ingest(cname, notes(), create={"embedder": eid})
    before = engine.list_snapshots(cname)
    for replace in (False, True):
        again = engine.ingest(cname, notes(), replace=replace)
        assert (again.built, again.snapshot_id, again.unchanged, again.added, again.changed) == (
            False,
            first.snapshot_id,
            4,
            0,
            0,
        )
        assert (again.manifest_hash, again.corpus_digest, again.documents) == (
            first.manifest_hash,
            first.corpus_digest,
            4,
        )
    # A subset of the documents, not replacing: nothing changes either.
    assert not engine.ingest(cname, notes(2)).built
    assert engine.list_snapshots(cname) == before
    # A replace with fewer documents does change the snapshot.
    smaller = engine.ingest(cname, notes(2), replace=True)
    assert (smaller.built, smaller.removed, smaller.documents) == (True, 2, 2)


def test_the_cli_says_unchanged(engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolve_hash_embedder_by_id(monkeypatch)
    eid = use_hash_embedder(engine)
    first = engine.ingest(cname, notes(), create={"embedder": eid})
    src = Path(engine.settings.home) / f"{cname}.jsonl"
    src.write_text("".join(json.dumps({"id": d.doc_id, "title": d.title, "text": d.body}) + "\n" for d in notes()))
    r = CliRunner().invoke(app, ["ingest", cname, str(src), "--home", str(rl_home)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(
        f"{cname}: unchanged: the active snapshot {first.snapshot_id} already holds these 4 documents; nothing was "
        "built ("
    ), r.stdout


def test_an_ingest_names_deleted_documents_it_adds_back(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    engine.delete(cname, ["n1"])
    again = engine.ingest(cname, notes())
    assert (again.built, again.added, again.deleted_readded) == (True, 1, ["n1"])
    # A document that was never there is just added.
    fresh = engine.ingest(cname, [Document("n9", "", "A new note about the lighthouse.")])
    assert (fresh.added, fresh.deleted_readded) == (1, [])


def test_a_purged_document_comes_back_only_with_allow_purged(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    engine.delete(cname, ["n1"])
    purge = engine.purge(cname, ["n2"])
    # The folder again: the deleted note comes back, named; the purged one is left out, named, not embedded.
    again = engine.ingest(cname, notes())
    assert (again.added, again.deleted_readded, again.purged_skipped, again.purged_readded) == (
        1,
        ["n1"],
        {"n2": purge.purge_id},
        {},
    )
    assert "n2" not in {h.doc_id for h in engine.search(cname, "note tides", k=10, mode="lexical").hits}
    cached = engine.db.fetchone(
        "SELECT count(*) AS n FROM ranklock.embedding_cache WHERE embedder_sha256 = %s",
        [engine.collection(cname).embedder_sha256],
    )
    # Only the purged note alone: it is left out, so nothing is built.
    alone = engine.ingest(cname, [notes()[2]])
    assert (alone.built, alone.purged_skipped) == (False, {"n2": purge.purge_id})
    assert (
        engine.db.fetchone(
            "SELECT count(*) AS n FROM ranklock.embedding_cache WHERE embedder_sha256 = %s",
            [engine.collection(cname).embedder_sha256],
        )
        == cached
    )
    back = engine.ingest(cname, notes(), allow_purged=True)
    assert (back.added, back.purged_skipped, back.purged_readded) == (1, {}, {"n2": purge.purge_id})
    assert "n2" in {h.doc_id for h in engine.search(cname, "note tides", k=10, mode="lexical").hits}


def test_the_cli_names_purged_and_deleted_documents(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_hash_embedder_by_id(monkeypatch)
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    engine.delete(cname, ["n1"])
    purge = engine.purge(cname, ["n2"])
    src = Path(engine.settings.home) / f"{cname}.jsonl"
    src.write_text("".join(json.dumps({"id": d.doc_id, "title": d.title, "text": d.body}) + "\n" for d in notes()))
    r = CliRunner().invoke(app, ["ingest", cname, str(src), "--home", str(rl_home)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "added back 1 document an earlier snapshot held (deleted or replaced since): 'n1'" in r.stderr
    assert f"left out 1 document erased by purge {purge.purge_id}: 'n2'; --allow-purged ingests them again" in r.stderr
    r = CliRunner().invoke(
        app, ["ingest", cname, str(src), "--allow-purged", "--home", str(rl_home)], env={"COLUMNS": "200"}
    )
    assert r.exit_code == 0, r.output
    assert f"ingested again 1 document erased by purge {purge.purge_id}: 'n2'" in r.stderr


def test_ingest_reads_jsonl_from_standard_input(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_hash_embedder_by_id(monkeypatch)
    eid = use_hash_embedder(engine)
    engine.create_collection(cname, embedder=eid)
    lines = "".join(json.dumps({"id": d.doc_id, "text": d.body}) + "\n" for d in notes(3))
    r = CliRunner().invoke(app, ["ingest", cname, "-", "--json", "--home", str(rl_home)], input=lines)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["added"], out["documents"]) == (3, 3)
    # A broken line names standard input and the line, as a file's would.
    r = CliRunner().invoke(app, ["ingest", cname, "-", "--home", str(rl_home)], input=lines + "{nope\n")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: <stdin>:4: not valid JSON (Expecting property name enclosed in double quotes")
    # Nothing on standard input: the active snapshot stays, and the ingest says so.
    r = CliRunner().invoke(app, ["ingest", cname, "-", "--home", str(rl_home)], input="", env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(
        f"{cname}: unchanged: the input holds no document to add; the active snapshot {out['snapshot_id']} stays; "
        "nothing was built"
    )


def test_snapshot_show_and_replay_name_the_purge_that_rewrote_a_snapshot(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_hash_embedder_by_id(monkeypatch)
    eid = use_hash_embedder(engine)
    kiln = Document("k1", "", "Glaze recipes for the kiln.")
    first = engine.ingest(cname, [*notes(), kiln], create={"embedder": eid})
    logged = engine.search(cname, "harbour ledger", k=2, mode="lexical")  # n0, n1: ties broken by id
    assert [h.doc_id for h in logged.hits] == ["n0", "n1"]
    # Not a candidate of the query: its entry stays, and its scores change (one document fewer).
    purge = engine.purge(cname, ["k1"])
    detail = engine.snapshot_info(cname, first.snapshot_id)
    assert [p["purge_id"] for p in detail.purges] == [purge.purge_id]
    assert (detail.purges[0]["documents"], detail.manifest_hash != first.manifest_hash) == (1, True)
    common = ["--home", str(rl_home)]
    r = CliRunner().invoke(app, ["snapshot", "show", cname, str(first.snapshot_id), *common], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert (
        f"rewritten by purge {purge.purge_id} at {detail.purges[0]['at']}: it erased 1 document from every snapshot "
        "that held them, so this snapshot's manifest hash, corpus digest and scores changed then" in r.stdout
    )
    r = CliRunner().invoke(app, ["replay", str(logged.query_id), *common], env={"COLUMNS": "300"})
    assert r.exit_code == 1, r.output
    assert (
        f"snapshot {first.snapshot_id} was rewritten by purge {purge.purge_id} after this query ran: a purge erases "
        "documents from every snapshot that held them" in r.stdout
    )
    # A snapshot no purge touched says nothing of the kind.
    other = engine.ingest(cname, [Document("n7", "", "A note about kilns.")])
    assert engine.snapshot_info(cname, other.snapshot_id).purges == ()


def _tables_of(engine: Engine, ids: list[int]) -> list[str]:
    """Every table of ranklock_data named for one of ``ids`` (snapshots, segments), independently of the code."""
    rows = engine.db.fetchall(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'ranklock_data' AND "
        "substring(tablename from '_([0-9]+)$')::bigint = ANY (%s) ORDER BY 1",
        [ids],
    )
    return [r["tablename"] for r in rows]


def test_drop_collection_removes_everything_it_holds_and_replay_says_so(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    engine.ingest(cname, [Document("n5", "", "A fifth note about the lighthouse.")])
    hit = engine.search(cname, "lighthouse note", k=3, mode="lexical")
    engine.ask(cname, "what about the lighthouse?")
    snapshots = [s.id for s in engine.list_snapshots(cname)]
    segments = [
        int(r["id"])
        for r in engine.db.fetchall(
            "SELECT id FROM ranklock.segments WHERE collection_id = %s", [engine.collection(cname).id]
        )
    ]
    assert _tables_of(engine, snapshots + segments)
    canary = Path(engine.settings.home) / "canary" / f"{cname}-hybrid.json"
    canary.parent.mkdir(exist_ok=True)
    canary.write_text("{}")
    out = engine.drop_collection(cname)
    assert (out.snapshots, out.documents, out.query_log_entries >= 1, out.answer_log_entries) == (
        tuple(snapshots),
        5,
        True,
        1,
    )
    assert _tables_of(engine, snapshots + segments) == []
    for table in ("query_log", "answer_log"):
        assert (
            engine.db.fetchone(f"SELECT count(*) AS n FROM ranklock.{table} WHERE collection = %s", [cname])["n"] == 0
        )
    assert (
        engine.db.fetchone(
            "SELECT count(*) AS n FROM ranklock.documents d WHERE NOT EXISTS (SELECT 1 FROM ranklock.collections c WHERE c.id = d.collection_id)"
        )["n"]
        == 0
    )
    assert not canary.exists()
    from ranklock import NotFound

    with pytest.raises(NotFound, match=f"no collection named {cname!r}"):
        engine.search(cname, "note", k=1)
    with pytest.raises(NotFound) as exc:
        engine.replay(hit.query_id)
    assert str(exc.value).startswith(f"query {hit.query_id} searched collection {cname!r}, which was dropped at ")
    with pytest.raises(NotFound, match=f"no collection named {cname!r}"):
        engine.drop_collection(cname)
    # The name is free again: a new collection of that name starts empty.
    again = engine.ingest(cname, notes(1), create={"embedder": eid})
    assert (again.documents, again.deleted_readded, again.purged_skipped) == (1, [], {})


def test_the_cli_asks_before_it_drops(engine: Engine, cname: str, rl_home: Path) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    common = ["--home", str(rl_home)]
    r = CliRunner().invoke(app, ["collection", "drop", cname, *common], env={"COLUMNS": "200"})
    assert r.exit_code == 2
    assert r.stderr.startswith(
        f"error: `ranklock collection drop {cname}` deletes every snapshot, document and log entry of {cname!r} for "
        "good; it asks first, and standard input is not a terminal. Pass --yes to drop it."
    )
    assert engine.collection(cname).active_snapshot_id is not None
    r = CliRunner().invoke(app, ["collection", "drop", "nope_not_here", "--yes", *common])
    assert r.exit_code == 2 and "no collection named 'nope_not_here'" in r.stderr
    r = CliRunner().invoke(app, ["collection", "drop", cname, "--yes", *common], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"{cname}: dropped, with 1 snapshot, 4 documents, ")


def test_http_drops_a_collection_with_the_admin_scope_and_a_confirmation(engine: Engine, cname: str) -> None:
    from fastapi.testclient import TestClient

    from ranklock.http import create_app
    from ranklock.http.guard import Access

    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    _, reader = engine.create_token(f"{cname}-r", ["read"])
    _, admin = engine.create_token(f"{cname}-a", ["read", "admin"])
    client = TestClient(create_app(engine, access=Access(require_token=True)))
    r = client.delete(f"/api/collections/{cname}?confirm={cname}", headers={"Authorization": f"Bearer {reader}"})
    assert r.status_code == 403 and r.json()["error"]["message"].startswith(
        f"dropping collection {cname!r} needs a token with the scope `admin`"
    )
    r = client.delete(f"/api/collections/{cname}", headers={"Authorization": f"Bearer {admin}"})
    assert r.status_code == 400 and r.json()["error"]["message"].endswith(f"?confirm={cname}.")
    assert engine.collection(cname).active_snapshot_id is not None
    r = client.delete(f"/api/collections/{cname}?confirm={cname}", headers={"Authorization": f"Bearer {admin}"})
    assert r.status_code == 200, r.text
    assert (r.json()["collection"], r.json()["documents"]) == (cname, 4)
    r = client.get(f"/api/collections/{cname}", headers={"Authorization": f"Bearer {admin}"})
    assert r.status_code == 404


def test_the_async_engine_drops_as_the_sync_one_does(engine: Engine, cname: str) -> None:
    import asyncio

    from ranklock import AsyncEngine

    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})

    async def main() -> int:
        aeng = AsyncEngine.over(engine)
        try:
            return (await aeng.drop_collection(cname)).documents
        finally:
            await aeng.release()

    assert asyncio.run(main()) == 4
    assert cname not in {c.name for c in engine.collections()}


def test_snapshot_retention_keeps_the_newest_and_what_must_stay(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(1), create={"embedder": eid})
    engine.set_snapshot_retention(cname, keep=3)
    reports = [engine.ingest(cname, [Document(f"w{i}", "", f"Write {i} about tides.")]) for i in range(6)]
    ids = [s.id for s in engine.list_snapshots(cname)]
    # Never more than the policy's three (merges included), and the writes said what they dropped.
    assert len(ids) == 3 and ids == sorted(ids)
    assert sum(len(r.snapshots_dropped) for r in reports) >= 4
    active = engine.collection(cname)
    assert active.active_snapshot_id == ids[-1]
    # A pinned query keeps its snapshot, past the policy, and the plan says why.
    logged = engine.search(cname, "tides", k=2, mode="lexical")
    pinned_snapshot = engine.pin(query_id=logged.query_id)
    assert pinned_snapshot == active.active_snapshot_id
    for i in range(5):
        engine.ingest(cname, [Document(f"x{i}", "", f"Another write {i} about bread.")])
    plan = engine.prune_snapshots(cname, dry_run=True)
    assert plan.kept[pinned_snapshot] == f"pinned by query {logged.query_id}"
    now = engine.collection(cname)
    assert plan.kept[now.active_snapshot_id] == "active"
    assert plan.kept[now.previous_snapshot_id] == "previous (snapshot rollback returns to it)"
    assert plan.dropped == ()
    assert engine.replay(logged.query_id).identical
    # Unpinned, it goes with the next write; its replay then says why it cannot run.
    engine.pin(query_id=logged.query_id, pinned=False)
    last = engine.ingest(cname, [Document("y", "", "A last write about kilns.")])
    assert pinned_snapshot in last.snapshots_dropped
    from ranklock import NotFound

    with pytest.raises(NotFound, match="which has been dropped \\(by `snapshot drop` or by snapshot retention\\)"):
        engine.replay(logged.query_id)
    # Off: every snapshot stays.
    engine.set_snapshot_retention(cname, keep=None)
    before = len(engine.list_snapshots(cname))
    engine.ingest(cname, [Document("z", "", "One more about the harbour.")])
    assert len(engine.list_snapshots(cname)) > before


def test_retention_by_age_and_bad_policies(engine: Engine, cname: str) -> None:
    from ranklock import ConfigError

    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(1), create={"embedder": eid})
    engine.set_snapshot_retention(cname, keep=None, keep_for="7d")
    for i in range(4):
        engine.ingest(cname, [Document(f"a{i}", "", f"Age {i} about tides.")])
    plan = engine.prune_snapshots(cname, dry_run=True)
    assert plan.dropped == () and set(plan.kept.values()) >= {"active", "younger than 7d"}
    with pytest.raises(ConfigError, match="snapshot retention --keep 0 must be at least 1"):
        engine.set_snapshot_retention(cname, keep=0)
    with pytest.raises(ConfigError, match="is not a duration"):
        engine.set_snapshot_retention(cname, keep_for="soon")


def test_the_cli_shows_and_sets_retention_and_db_status_says_it(engine: Engine, cname: str, rl_home: Path) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(1), create={"embedder": eid})
    for i in range(3):
        engine.ingest(cname, [Document(f"c{i}", "", f"CLI write {i} about tides.")])
    common = ["--home", str(rl_home)]
    env = {"COLUMNS": "300"}
    r = CliRunner().invoke(app, ["snapshot", "retention", cname, "--keep", "1", *common], env=env)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(
        f"{cname}: keeps the newest 1, with the active, previous, pinned and replica-held ones.\n"
    ), r.stdout
    assert "the next write drops" in r.stdout
    r = CliRunner().invoke(app, ["db", "status", *common], env=env)
    assert f"snapshots of {cname}: 2 snapshots kept (policy: the newest 1, with the active, previous" in r.stdout
    r = CliRunner().invoke(app, ["snapshot", "prune", cname, "--json", *common])
    out = json.loads(r.stdout)
    assert out["applied"] and len(out["dropped"]) >= 1
    assert len(engine.list_snapshots(cname)) == 2  # the active and the previous
    r = CliRunner().invoke(app, ["snapshot", "retention", cname, "--keep", "0", *common])
    assert r.exit_code == 2 and "must be at least 1" in r.stderr
    r = CliRunner().invoke(app, ["snapshot", "retention", cname, "--off", "--keep", "3", *common])
    assert r.exit_code == 2 and r.stderr.startswith("error: --off keeps every snapshot; give it alone")


def test_log_prune_older_than_zero_prunes_every_entry_but_the_pinned(engine: Engine, cname: str, rl_home: Path) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    kept = engine.search(cname, "tides", k=1, mode="lexical")
    gone = engine.search(cname, "bread", k=1, mode="lexical")
    engine.pin(query_id=kept.query_id)
    # Every entry: it asks first, as `collection drop` does (issue 45), and refuses without a terminal.
    prune = ["log", "prune", "--older-than", "0s", "--home", str(rl_home)]
    r = CliRunner().invoke(app, prune, env={"COLUMNS": "300"})
    assert r.exit_code == 2 and r.stderr == (
        "error: `ranklock log prune --older-than 0` deletes every entry of the query log and the answer log but the "
        "pinned ones for good; it asks first, and standard input is not a terminal. Pass --yes to prune them.\n"
    )
    assert engine.replay(gone.query_id).identical  # nothing was pruned
    r = CliRunner().invoke(app, [*prune, "--yes"], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert "is gone, but the pinned ones (policy: no entry but the pinned ones)" in r.stdout
    assert engine.replay(kept.query_id).identical
    from ranklock import NotFound

    with pytest.raises(NotFound, match=f"query {gone.query_id} was pruned from the query log"):
        engine.replay(gone.query_id)
    engine.pin(query_id=kept.query_id, pinned=False)
    r = CliRunner().invoke(app, ["log", "pin", "999999999", "--home", str(rl_home)])
    assert r.exit_code == 2 and "query 999999999 is not in the log" in r.stderr


def test_log_prune_asks_at_a_terminal_and_says_when_there_was_nothing_to_prune(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(), create={"embedder": eid})
    kept = engine.search(cname, "tides", k=1, mode="lexical")
    prune = ["log", "prune", "--older-than", "0", "--home", str(rl_home)]
    # At a terminal: the question, and a wrong answer prunes nothing.
    import ranklock.cli._common as common

    monkeypatch.setattr(common, "stdin_is_terminal", lambda: True)  # CliRunner's stdin is a pipe
    r = CliRunner().invoke(app, prune, input="no\n", env={"COLUMNS": "300"})
    assert r.exit_code == 2, r.output
    assert (
        "Delete every entry of the query log (" in r.stdout
        and "This cannot be undone. Type prune to confirm" in r.stdout
    )
    assert "error: 'no' is not 'prune'; nothing was pruned." in r.stderr
    assert engine.replay(kept.query_id).identical
    r = CliRunner().invoke(app, prune, input="prune\n", env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    # Nothing left to prune: said so, and no "entries up to id 0" that never were.
    r = CliRunner().invoke(app, ["log", "prune", "--older-than", "7d", "--home", str(rl_home)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert "query log: nothing to prune; it holds " in r.stdout and "up to id 0" not in r.stdout


def test_search_offset_is_the_next_page_of_the_same_list(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from ranklock import QueryError
    from ranklock.http import create_app

    resolve_hash_embedder_by_id(monkeypatch)
    eid = use_hash_embedder(engine)
    engine.ingest(cname, notes(9), create={"embedder": eid})
    whole = engine.search(cname, "note tides bread", k=9)
    page = engine.search(cname, "note tides bread", k=3, offset=3)
    assert [(h.rank, h.doc_id, h.score) for h in page.hits] == [(h.rank, h.doc_id, h.score) for h in whole.hits[3:6]]
    assert (page.k, page.offset, page.complete) == (3, 3, True)
    assert json.loads(page.to_json())["offset"] == 3 and "offset" not in json.loads(whole.to_json())
    last = engine.search(cname, "note tides bread", k=5, offset=7)  # past the end: the two that are left
    assert [h.rank for h in last.hits] == [8, 9] and last.complete
    for bad, message in (
        (-1, "offset must be a whole number of results to skip (0 or more), got -1."),
        (9995, "offset 9995 + k 10 = 10,005 results, more than the 10,000 one search ranks"),
    ):
        with pytest.raises(QueryError) as exc:
            engine.search(cname, "note", offset=bad)
        assert str(exc.value).startswith(message)
    r = CliRunner().invoke(
        app, ["search", cname, "note tides bread", "-k", "3", "--offset", "3", "--json", "--home", str(rl_home)]
    )
    assert r.exit_code == 0, r.output
    assert [h["doc_id"] for h in json.loads(r.stdout)["hits"]] == [h.doc_id for h in whole.hits[3:6]]
    r = CliRunner().invoke(app, ["search", cname, "note", "--offset", "-2", "--home", str(rl_home)])
    assert r.exit_code == 2 and "offset must be a whole number" in r.stderr
    client = TestClient(create_app(engine))
    got = client.get(f"/api/search?collection={cname}&q=note+tides+bread&k=3&offset=3").json()
    assert [h["doc_id"] for h in got["hits"]] == [h.doc_id for h in whole.hits[3:6]]
    bad = client.post("/api/search", json={"collection": cname, "query": "note", "offset": "x"})
    assert bad.status_code == 400 and "offset" in bad.json()["error"]["message"]


def test_document_get_prints_a_stored_document_and_names_a_purge(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_hash_embedder_by_id(monkeypatch)
    eid = use_hash_embedder(engine)
    docs = [Document("n1", "Ledger", "The harbour [b]ledger[/b] of 1887.", {"year": 1887}), *notes(3)[2:]]
    first = engine.ingest(cname, docs, create={"embedder": eid})
    common = ["--home", str(rl_home)]
    r = CliRunner().invoke(app, ["document", "get", cname, "n1", *common], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"n1 ({cname}, snapshot {first.snapshot_id}, content ")
    assert lines[1:] == ["title: Ledger", "year: 1887", "", "The harbour [b]ledger[/b] of 1887."]
    r = CliRunner().invoke(app, ["document", "get", cname, "n1", "--json", *common])
    assert json.loads(r.stdout)["body"] == "The harbour [b]ledger[/b] of 1887."
    r = CliRunner().invoke(app, ["document", "get", cname, "nope", *common])
    assert r.exit_code == 2 and f"collection {cname!r} has no document 'nope' in snapshot" in r.stderr
    purge = engine.purge(cname, ["n1"])
    r = CliRunner().invoke(app, ["document", "get", cname, "n1", *common], env={"COLUMNS": "300"})
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: document 'n1' of {cname!r} was erased by purge {purge.purge_id} at ")


def test_a_server_answers_lexical_searches_while_the_model_loads(engine: Engine, cname: str) -> None:
    """Issue 41: `serve` loaded the model (18-26 s) before it listened; now it warms in the background."""
    import threading
    import time

    from fastapi.testclient import TestClient

    from fakes import HashEmbedder
    from ranklock.http import create_app

    class SlowToLoad(HashEmbedder):
        def __init__(self) -> None:
            super().__init__("test:slow-load")
            self.loaded = threading.Event()

        def embed(self, texts: list[str]) -> object:
            if not self.loaded.is_set():
                time.sleep(2.0)  # the model's load
                self.loaded.set()
            return super().embed(texts)

    emb = SlowToLoad()
    eng = Engine(home=engine.settings.home, embedder=emb)
    try:
        eng.ingest(cname, notes(), create={"embedder": emb.id})
        emb.loaded.clear()
        assert eng.warm_state["state"] == "not started"
        warm = threading.Thread(target=eng.warm)
        warm.start()
        client = TestClient(create_app(eng))
        deadline = time.monotonic() + 1.5
        while eng.warm_state["state"] != "loading" and time.monotonic() < deadline:
            time.sleep(0.01)
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["models"]["state"] == "loading"
        t = time.perf_counter()
        got = client.get(f"/api/search?collection={cname}&q=tides&mode=lexical&k=2")
        assert got.status_code == 200 and len(got.json()["hits"]) == 2
        assert time.perf_counter() - t < 1.5 and not emb.loaded.is_set()  # it did not wait for the model
        warm.join()
        ready = client.get("/readyz").json()["models"]
        # Every collection of the database is warmed; this one's embedder among them.
        assert ready["state"] == "loaded" and any(
            x.startswith("embedder test:slow-load loaded in ") for x in ready["lines"]
        )
    finally:
        eng.close()


def test_document_get_prints_the_text_line_for_line_as_stored(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: a 60-column terminal re-wrapped the file's own lines; the text is printed as it is stored."""
    from ranklock.cli.documents import as_stored

    resolve_hash_embedder_by_id(monkeypatch)
    body = "A line that is far longer than sixty columns, as a man page's paragraphs are, kept whole.\n\tindented\nend"
    engine.ingest(cname, [Document("m1", "", body)], create={"embedder": use_hash_embedder(engine)})
    r = CliRunner().invoke(app, ["document", "get", cname, "m1", "--home", str(rl_home)], env={"COLUMNS": "60"})
    assert r.exit_code == 0, r.output
    assert r.stdout.endswith("\n\n" + body + "\n")
    # On a terminal a document cannot send escape sequences; piped, it is byte for byte.
    assert as_stored("red \x1b[31mtext\x1b[0m\ttab", terminal=True) == "red \ufffd[31mtext\ufffd[0m\ttab"
    assert as_stored("red \x1b[31m", terminal=False) == "red \x1b[31m"
