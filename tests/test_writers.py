"""Writers of one collection: serialised, never losing an ingest; builds that finish under their lock;
reaping that leaves no table behind; empty snapshots refused; empty-text documents skipped and named.

The concurrency tests run every writer in its own OS process (the HashEmbedder of tests/fakes.py, so
four of them start in seconds) and released together; afterwards the pointers and the document sets
must be explained by *some* one-at-a-time order of exactly what each command reported.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

import ranklock
from fakes import HashEmbedder, use_hash_embedder
from ranklock import ConfigError, Document, Engine, IngestError, NotFound, SnapshotError
from ranklock.settings import ChunkerParams, Settings
from ranklock.snapshot.build import reap_dead_builds
from ranklock.store import locks, tables

TESTS = str(Path(__file__).parent)
SRC = str(Path(ranklock.__file__).parents[1])

WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    from fakes import HashEmbedder
    from ranklock import Document, Engine, RanklockError

    _, _, dsn, name, go, raw = sys.argv
    spec = json.loads(raw)
    eng = Engine(dsn=dsn, embedder=HashEmbedder(), log_queries=False)
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    try:
        op = spec["op"]
        if op == "ingest":
            ids = [f"{spec['tag']}-{i:03d}" for i in range(spec["n"])]
            docs = [Document(i, "", f"Writer {i} files a note about orbits, tides and bread.") for i in ids]
            r = eng.ingest(name, docs, replace=spec.get("replace", False))
            row = eng.db.fetchone("SELECT parent_id FROM ranklock.snapshots WHERE id = %s", [r.snapshot_id])
            # The merge policy may fold the new segment right away (under the same lock): that snapshot is active.
            out = {"from": row["parent_id"], "to": r.merged or r.snapshot_id, "ids": ids, "documents": r.documents}
        elif op == "rollback":
            out = eng.rollback(name).as_dict()
        elif op == "activate":
            out = eng.activate(name, spec["sid"]).as_dict()
        elif op == "drop":
            out = eng.drop_snapshot(name, spec["sid"]).as_dict()
        elif op == "merge":
            m = eng.merge(name, everything=True)
            out = {"to": m.snapshot_id, "segments": list(m.segments)}
        print(json.dumps({"ok": True, **out}), flush=True)
    except RanklockError as exc:
        print(json.dumps({"ok": False, "error": str(exc)}), flush=True)
        sys.exit(2)
    """
)


def run_together(engine: Engine, name: str, tmp_path: Path, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Start one process per spec, release them at once, return each one's reported outcome."""
    go = tmp_path / f"go-{name}"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, TESTS, engine.db.dsn, name, str(go), json.dumps(s)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for s in specs
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line.strip() == "ready", (line, p.stderr.read() if p.stderr else "")
        go.touch()
        outcomes = []
        for spec, p in zip(specs, procs, strict=True):
            out, err = p.communicate(timeout=240)
            # Exit 0, or exit 2 with a clear error; never a traceback (exit 1).
            assert p.returncode in (0, 2), f"{spec}: exit {p.returncode}\n{err}"
            result = json.loads(out.strip().splitlines()[-1])
            assert result["ok"] == (p.returncode == 0), (spec, result)
            outcomes.append(result)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for spec, result in zip(specs, outcomes, strict=True):
        print(spec, "->", {k: v for k, v in result.items() if k != "ids"})
    return outcomes


def doc_set(engine: Engine, sid: int) -> set[str]:
    from ranklock.snapshot.segments import live_documents

    return set(live_documents(engine.db, sid))


def tables_of(engine: Engine, sid: int) -> list[str]:
    """Every table in ranklock_data named for snapshot ``sid`` (independently of ranklock.store.tables)."""
    rows = engine.db.fetchall(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'ranklock_data' AND tablename ~ %s ORDER BY tablename",
        [f"_{sid}$"],
    )
    return [r["tablename"] for r in rows]


def hash_docs(tag: str, n: int) -> list[Document]:
    return [
        Document(f"{tag}-{i:03d}", "", f"Writer {tag}-{i:03d} files a note about orbits, tides and bread.")
        for i in range(n)
    ]


# -- 1. concurrent writers --------------------------------------------------------------------------


@pytest.mark.parametrize("writers", [2, 4])
def test_simultaneous_ingests_into_a_new_collection_keep_every_document(
    engine: Engine, cname: str, tmp_path: Path, writers: int
) -> None:
    name = f"{cname}_{writers}"
    specs = [{"op": "ingest", "tag": f"w{i}", "n": 150} for i in range(writers)]
    outcomes = run_together(engine, name, tmp_path, specs)
    assert all(o["ok"] for o in outcomes), outcomes  # the collection did not exist: no "already exists"
    # One at a time: every ingest built from a different parent, together one chain from nothing.
    by_parent = {o["from"]: o for o in outcomes}
    assert len(by_parent) == writers, [(o["from"], o["to"]) for o in outcomes]
    expected: set[str] = set()
    current = None
    for _ in range(writers):
        step = by_parent[current]
        expected |= set(step["ids"])
        assert doc_set(engine, step["to"]) == expected
        assert step["documents"] == len(expected)
        current = step["to"]
    assert engine.collection(name).active_snapshot_id == current
    assert doc_set(engine, current) == set().union(*(o["ids"] for o in outcomes))
    assert len(expected) == 150 * writers


def test_two_writers_and_a_merge_racing_lose_nothing(engine: Engine, cname: str, tmp_path: Path) -> None:
    eid = use_hash_embedder(engine)
    base = [d for i in range(3) for d in hash_docs(f"base{i}", 10)]
    for i in range(3):  # three segments for the merge to fold
        engine.ingest(cname, base[i * 10 : (i + 1) * 10], create={"embedder": eid})
    specs = [{"op": "ingest", "tag": "wa", "n": 40}, {"op": "merge"}, {"op": "ingest", "tag": "wb", "n": 40}]
    outcomes = run_together(engine, cname, tmp_path, specs)
    assert all(o["ok"] for o in outcomes), outcomes
    active = engine.collection(cname).active_snapshot_id
    assert active is not None
    expected = {d.doc_id for d in base} | set(outcomes[0]["ids"]) | set(outcomes[2]["ids"])
    assert doc_set(engine, active) == expected
    # The racing writes give the hits of one build of the same documents, byte for byte.
    once = f"{cname}_once"
    engine.ingest(once, [*base, *hash_docs("wa", 40), *hash_docs("wb", 40)], create={"embedder": eid})
    for q in ("orbits tides", "bread note", "wa-007 writer"):
        cut, whole = (json.loads(engine.search(n, q, k=30, mode="lexical").to_json())["hits"] for n in (cname, once))
        assert cut == whole


def _replay(
    order: list[tuple[dict[str, Any], dict[str, Any]]], state: tuple[int, int | None], docs: dict[int, set[str]]
) -> Any:
    """Apply the reported outcomes in ``order``; None unless every report fits the state it would meet."""
    active, previous = state
    docs = dict(docs)
    for spec, out in order:
        op = spec["op"]
        if op == "ingest":
            if not out["ok"] or out["from"] != active:
                return None
            docs[out["to"]] = (set() if spec.get("replace") else docs[active]) | set(out["ids"])
            active, previous = out["to"], active
        elif op == "rollback":
            if out["ok"]:
                if (out["from"], out["to"]) != (active, previous):
                    return None
                active, previous = previous, active
            elif previous is not None or "has no previous snapshot to roll back to" not in out["error"]:
                return None
        elif op == "activate":
            if not out["ok"] or out["from"] != active:
                return None
            if spec["sid"] != active:
                active, previous = spec["sid"], active
        elif op == "drop":
            if out["ok"]:
                if spec["sid"] == active:
                    return None
                previous = None if previous == spec["sid"] else previous
            elif spec["sid"] != active or "is the active snapshot" not in out["error"]:
                return None
    return active, previous, docs


def test_ingests_replace_activate_rollback_and_drop_racing_lose_nothing(
    engine: Engine, cname: str, tmp_path: Path
) -> None:
    eid = use_hash_embedder(engine)
    ra = engine.ingest(cname, hash_docs("base", 10), create={"embedder": eid})
    rb = engine.ingest(cname, hash_docs("x", 5))
    rc = engine.ingest(cname, hash_docs("y", 5))
    docs = {s: doc_set(engine, s) for s in (ra.snapshot_id, rb.snapshot_id, rc.snapshot_id)}
    specs: list[dict[str, Any]] = [
        {"op": "ingest", "tag": "a", "n": 30},
        {"op": "ingest", "tag": "b", "n": 20, "replace": True},
        {"op": "ingest", "tag": "c", "n": 30},
        {"op": "rollback"},
        {"op": "activate", "sid": ra.snapshot_id},
        {"op": "drop", "sid": rb.snapshot_id},
    ]
    outcomes = run_together(engine, cname, tmp_path, specs)
    coll = engine.collection(cname)
    final = (coll.active_snapshot_id, coll.previous_snapshot_id)
    explained = []
    for order in itertools.permutations(zip(specs, outcomes, strict=True)):
        got = _replay(list(order), (rc.snapshot_id, rb.snapshot_id), docs)
        if got is not None and (got[0], got[1]) == final:
            explained.append(got[2])
    assert explained, f"no one-at-a-time order explains {outcomes} ending in {final}"
    # The active snapshot holds exactly what the commands reported, and so does every ingest's snapshot.
    active_docs = doc_set(engine, int(final[0] or 0))
    assert any(d[int(final[0] or 0)] == active_docs for d in explained)
    for o in outcomes:
        if "to" in o and "ids" in o:
            assert any(d[o["to"]] == doc_set(engine, o["to"]) for d in explained)


def test_a_writer_that_cannot_get_the_lock_in_time_fails_clearly_and_changes_nothing(
    engine: Engine, cname: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eid = use_hash_embedder(engine)
    r1 = engine.ingest(cname, hash_docs("base", 5), create={"embedder": eid})
    r2 = engine.ingest(cname, hash_docs("more", 2))
    coll = engine.collection(cname)
    snaps = engine.db.fetchall(
        "SELECT id, status FROM ranklock.snapshots WHERE collection_id = %s ORDER BY id", [coll.id]
    )
    monkeypatch.setattr(engine.settings, "lock_wait", 0.5)
    with psycopg.connect(engine.db.dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", [locks.WRITER, coll.id])
        expected = (
            f"collection {cname!r} is being written by another process (PostgreSQL backend pid "
            f"{holder.info.backend_pid}: an ingest, activate, rollback or drop); gave up after waiting 0.5 s "
            "(lock_wait, RANKLOCK_LOCK_WAIT). Nothing was written to the collection (vectors computed so far "
            "stay in the embedding cache). Run the command again when that writer has finished, or raise "
            "RANKLOCK_LOCK_WAIT."
        )
        calls = {
            "ingest": lambda: engine.ingest(cname, hash_docs("late", 3)),
            "replace": lambda: engine.ingest(cname, hash_docs("late", 3), replace=True),
            "activate": lambda: engine.activate(cname, r1.snapshot_id),
            "rollback": lambda: engine.rollback(cname),
            "drop": lambda: engine.drop_snapshot(cname, r1.snapshot_id),
        }
        for what, call in calls.items():
            with pytest.raises(SnapshotError) as exc:
                call()
            assert str(exc.value) == expected, what
        from ranklock.cli import app

        res = CliRunner().invoke(
            app,
            ["snapshot", "rollback", cname, "--dsn", engine.db.dsn, "--home", str(rl_home)],
            env={"RANKLOCK_LOCK_WAIT": "0.5"},
        )
        assert res.exit_code == 2, res.output
        assert "gave up after waiting 0.5 s (lock_wait, RANKLOCK_LOCK_WAIT)" in res.output
        assert "Traceback" not in res.output
    after = engine.db.fetchall(
        "SELECT id, status FROM ranklock.snapshots WHERE collection_id = %s ORDER BY id", [coll.id]
    )
    assert after == snaps
    assert engine.collection(cname).active_snapshot_id == r2.snapshot_id
    late = engine.db.fetchone(
        "SELECT count(*) AS n FROM ranklock.documents WHERE collection_id = %s AND doc_id LIKE 'late-%%'", [coll.id]
    )
    assert late == {"n": 0}


def test_a_writer_queues_behind_another_and_then_proceeds(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, hash_docs("base", 5), create={"embedder": eid})
    coll = engine.collection(cname)
    result: dict[str, Any] = {}

    def ingest() -> None:
        try:
            result["report"] = engine.ingest(cname, hash_docs("queued", 4))
        except Exception as exc:  # reported by the assertion below
            result["error"] = exc

    with psycopg.connect(engine.db.dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", [locks.WRITER, coll.id])
        worker = threading.Thread(target=ingest)
        worker.start()
        waiting = None
        deadline = time.monotonic() + 60
        while waiting is None and time.monotonic() < deadline:
            waiting = holder.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = %s "
                "AND objid::bigint = %s AND NOT granted",
                [locks.WRITER, coll.id],
            ).fetchone()
            time.sleep(0.02)
        assert waiting is not None, "the ingest never queued for the writer lock"
        assert "report" not in result  # it cannot have built anything while the lock is held
        holder.execute("SELECT pg_advisory_unlock(%s, %s)", [locks.WRITER, coll.id])
    worker.join(120)
    assert "error" not in result, result
    report = result["report"]
    assert report.seconds["lock_wait"] > 0
    assert engine.collection(cname).active_snapshot_id == report.snapshot_id
    assert doc_set(engine, report.snapshot_id) == {d.doc_id for d in hash_docs("base", 5) + hash_docs("queued", 4)}


def test_lock_wait_setting_reads_the_environment_and_rejects_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKLOCK_LOCK_WAIT", "12.5")
    assert Settings().lock_wait == 12.5
    monkeypatch.setenv("RANKLOCK_LOCK_WAIT", "2m")
    assert Settings().lock_wait == 120.0
    monkeypatch.delenv("RANKLOCK_LOCK_WAIT")
    assert Settings().lock_wait == 300.0
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("RANKLOCK_LOCK_WAIT", bad)
        with pytest.raises(ConfigError) as exc:
            Settings()
        assert str(exc.value) == (
            f"RANKLOCK_LOCK_WAIT {bad!r} is not a duration; write seconds or a number with s, m, h, d or w."
        )


def test_create_if_missing_returns_the_same_collection_and_names_different_settings(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    made = engine.create_collection(cname, embedder=eid, chunker=ChunkerParams(window=128, overlap=16))
    again = engine.create_collection(
        cname, embedder=eid, chunker=ChunkerParams(window=128, overlap=16), if_missing=True
    )
    assert again.id == made.id
    with pytest.raises(ConfigError) as exc:
        engine.create_collection(cname, embedder=eid, if_missing=True)
    assert str(exc.value) == (
        f"collection {cname!r} already exists (made earlier or by a concurrent process) with other settings: "
        'chunker {"overlap": 16, "window": 128} there, {"overlap": 32, "window": 256} here. Use the existing '
        "collection's settings (see `ranklock collections`), or pick another name."
    )
    with pytest.raises(ConfigError) as exc:
        engine.create_collection(cname, embedder=eid)
    assert str(exc.value) == f"collection {cname!r} already exists; pick another name or ingest into it."


# -- 3. builds finish under their lock; reaping drops every table -------------------------------------


def _finishing_engine(engine: Engine, on_finish: Any) -> Engine:
    """A second engine whose tracer calls ``on_finish(snapshot_id)`` as a build marks itself ready."""

    def tracer(query: str, params: Any) -> None:
        if "SET status = 'ready'" in query:
            on_finish(int(params[-1]))

    return Engine(dsn=engine.db.dsn, embedder=HashEmbedder(), tracer=tracer, log_queries=False)


def test_a_build_that_is_finishing_is_never_reaped(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    engine.ingest(cname, hash_docs("base", 4), create={"embedder": eid})
    seen: list[tuple[int, list[int], str]] = []

    def reap_now(sid: int) -> None:
        # Exactly the interleaving of the issue: another process lists snapshots (which reaps)
        # between the build's last table and its 'ready'.
        listed = {s.id: s.status for s in engine.list_snapshots(cname)}
        seen.append((sid, reap_dead_builds(engine.db), listed[sid]))

    with _finishing_engine(engine, reap_now) as builder:
        report = builder.ingest(cname, hash_docs("new", 6))
    assert seen == [(report.snapshot_id, [], "building")]
    row = engine.db.fetchone("SELECT status FROM ranklock.snapshots WHERE id = %s", [report.snapshot_id])
    assert row == {"status": "ready"}
    sid = report.snapshot_id
    assert tables_of(engine, sid) == sorted(
        f"{k}_{sid}" for k in ("chunks", "dense", "fields", "forward", "postings", "terms")
    )
    hits = engine.search(cname, "orbits tides bread", k=20, mode="lexical").hits
    assert {h.doc_id for h in hits} == {d.doc_id for d in hash_docs("base", 4) + hash_docs("new", 6)}


def test_a_build_whose_status_changes_while_finishing_fails_loudly_and_leaves_nothing(
    engine: Engine, cname: str
) -> None:
    eid = use_hash_embedder(engine)
    r1 = engine.ingest(cname, hash_docs("base", 4), create={"embedder": eid})

    def mark_failed(sid: int) -> None:
        engine.db.execute("UPDATE ranklock.snapshots SET status = 'failed' WHERE id = %s", [sid])

    with _finishing_engine(engine, mark_failed) as builder, pytest.raises(SnapshotError) as exc:
        builder.ingest(cname, hash_docs("new", 3))
    sid = int(re.search(r"snapshot (\d+)", str(exc.value)).group(1))  # type: ignore[union-attr]
    assert str(exc.value) == (
        f"snapshot {sid} of {cname!r} became failed (changed by another process) while it was finishing, so it "
        "was not marked ready and nothing was activated; ingest again."
    )
    assert engine.db.fetchone("SELECT status FROM ranklock.snapshots WHERE id = %s", [sid]) == {"status": "failed"}
    assert tables_of(engine, sid) == []
    assert engine.collection(cname).active_snapshot_id == r1.snapshot_id


KILL_AT_FINISH = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    from fakes import HashEmbedder
    from ranklock import Document, Engine

    _, _, dsn, name = sys.argv

    def tracer(query, params):
        if "SET status = 'ready'" in query:
            os.kill(os.getpid(), signal.SIGKILL)  # every table written, not yet ready

    eng = Engine(dsn=dsn, embedder=HashEmbedder(), tracer=tracer, log_queries=False)
    eng.ingest(name, [Document(f"k{i:02d}", "", f"Killed while finishing, note {i} on {name}.") for i in range(20)])
    """
)


def test_reaping_a_dead_build_drops_every_table_it_made(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    r1 = engine.ingest(cname, hash_docs("base", 4), create={"embedder": eid})
    coll = engine.collection(cname)
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", KILL_AT_FINISH, TESTS, engine.db.dsn, cname], env=env, capture_output=True, timeout=240
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    row = engine.db.fetchone(
        "SELECT id, status FROM ranklock.snapshots WHERE collection_id = %s AND id > %s", [coll.id, r1.snapshot_id]
    )
    assert row is not None and row["status"] == "building"
    sid = int(row["id"])
    assert tables_of(engine, sid) == sorted(
        f"{k}_{sid}" for k in ("chunks", "dense", "fields", "forward", "postings", "terms")
    )
    # The dead backend releases the build lock once PostgreSQL notices the closed socket.
    reaped: list[int] = []
    deadline = time.monotonic() + 30
    while not reaped and time.monotonic() < deadline:
        reaped = reap_dead_builds(engine.db, coll.id)
        time.sleep(0.05)
    assert reaped == [sid]
    assert tables_of(engine, sid) == []
    row = engine.db.fetchone("SELECT status, stats ->> 'failure' AS why FROM ranklock.snapshots WHERE id = %s", [sid])
    assert row == {"status": "failed", "why": "builder died"}
    assert engine.collection(cname).active_snapshot_id == r1.snapshot_id


def test_drop_removes_every_per_snapshot_table_including_value_counts(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    docs = [Document(d.doc_id, "", d.body, {"year": 2000 + i % 3}) for i, d in enumerate(hash_docs("counted", 9))]
    r1 = engine.ingest(cname, docs, create={"embedder": eid, "fields": ["year:int"]})
    res = engine.search(cname, "orbits tides", k=5, mode="lexical", filter="year >= 2001")
    assert res.matching_count == 6
    sid = r1.snapshot_id
    present = tables_of(engine, sid)
    assert set(present) <= {*tables.segment_table_names(sid), tables.snapshot_table_name(sid)}
    # The segment's value counts; the snapshot has no dead row, so no counts of its own.
    assert {f"chunks_{sid}", f"counts_{sid}"} <= set(present)
    # Six of nine documents dead: the merge policy folds the segment into a new one right away.
    r2 = engine.ingest(cname, docs[:3], replace=True)
    assert r2.merged is not None
    # The replacing snapshot has dead rows: a filtered search of it counts them in a table of its own.
    res = engine.search(cname, "orbits tides", k=5, mode="lexical", filter="year >= 2001", snapshot=r2.snapshot_id)
    assert res.matching_count == 2
    dead_counts = tables.snapshot_table_name(r2.snapshot_id)
    assert dead_counts in tables_of(engine, r2.snapshot_id)
    out = engine.drop_snapshot(cname, sid)
    assert out.tables == ()  # its segment is still read by r2
    out = engine.drop_snapshot(cname, r2.snapshot_id)
    assert set(present) | {dead_counts} <= set(out.tables)
    assert tables_of(engine, sid) == [] and tables_of(engine, r2.snapshot_id) == []


def test_lexical_stats_racing_a_drop_fail_clearly_and_leave_no_table(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    r1 = engine.ingest(cname, hash_docs("old", 5), create={"embedder": eid})
    engine.ingest(cname, hash_docs("new", 5), replace=True)
    sid = r1.snapshot_id  # its one segment has the same id
    result: dict[str, Any] = {}

    def rebuild() -> None:
        try:
            result["entry"] = engine.lexical_stats(cname, sid, force=True)
        except Exception as exc:  # reported by the assertions below
            result["error"] = exc

    # What a drop that collects the segment does, held open until the rebuild is queued behind it.
    with psycopg.connect(engine.db.dsn) as dropper:
        dropper.execute("SELECT 1 FROM ranklock.segments WHERE id = %s FOR UPDATE", [sid])
        worker = threading.Thread(target=rebuild)
        worker.start()
        waiting = None
        deadline = time.monotonic() + 60
        while not waiting and time.monotonic() < deadline:
            with psycopg.connect(engine.db.dsn, autocommit=True) as probe:
                row = probe.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
                waiting = row[0] if row else 0
            time.sleep(0.02)
        assert waiting, "the rebuild never queued behind the drop"
        dropper.execute("DELETE FROM ranklock.snapshot_segments WHERE segment_id = %s", [sid])
        dropper.execute("DELETE FROM ranklock.segments WHERE id = %s", [sid])
        for name in tables.segment_table_names(sid):
            dropper.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(tables.SCHEMA, name)))
        dropper.commit()
    worker.join(120)
    assert isinstance(result.get("error"), SnapshotError), result
    assert str(result["error"]) == (
        f"segment {sid} was dropped while its lexical statistics were being built; nothing was written. "
        "Build them for an existing snapshot (see `ranklock snapshot list`)."
    )
    assert [t for t in tables_of(engine, sid) if t in tables.segment_table_names(sid)] == []
    engine.drop_snapshot(cname, sid)  # the snapshot whose segment the simulated drop took goes too


def test_no_module_spells_a_lock_id_or_a_per_snapshot_table_name() -> None:
    src = Path(ranklock.__file__).parent
    assert len(set(locks.ALL.values())) == len(locks.ALL)
    literal = re.compile(r"7_?142_?00\d")
    spelled = re.compile("f[\"'](?:" + "|".join([*tables.SEGMENT_KINDS, "valuecounts"]) + r")_\{")
    offenders = []
    for path in sorted(src.rglob("*.py")):
        if path.name in ("locks.py", "tables.py") and path.parent.name == "store":
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.name}: lock id {m.group(0)}" for m in literal.finditer(text)]
        offenders += [f"{path.name}: table name {m.group(0)}" for m in spelled.finditer(text)]
    assert offenders == []


# -- 5. empty snapshots and empty documents -----------------------------------------------------------


def test_replace_with_nothing_is_refused_and_changes_nothing(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    r1 = engine.ingest(cname, hash_docs("kept", 6), create={"embedder": eid})
    before = engine.list_snapshots(cname)
    with pytest.raises(IngestError) as exc:
        engine.ingest(cname, [], replace=True)
    assert str(exc.value) == (
        f"this ingest would remove all 6 documents of the active snapshot {r1.snapshot_id} of {cname!r}: it holds "
        "no document with text. Nothing was changed. Check the input file, or pass --allow-empty "
        "(allow_empty=True) to make an empty snapshot on purpose."
    )
    blank = [Document("kept-000", "", "   "), Document("other", "", "")]
    with pytest.raises(IngestError) as exc:
        engine.ingest(cname, blank, replace=True)
    assert str(exc.value) == (
        f"this ingest would remove all 6 documents of the active snapshot {r1.snapshot_id} of {cname!r}: it holds "
        "no document with text; 2 documents ('kept-000', 'other') had empty text and were skipped. Nothing was "
        "changed. Check the input file, or pass --allow-empty (allow_empty=True) to make an empty snapshot on purpose."
    )
    assert engine.list_snapshots(cname) == before
    assert doc_set(engine, r1.snapshot_id) == {d.doc_id for d in hash_docs("kept", 6)}


def test_replace_with_nothing_and_allow_empty_makes_an_empty_active_snapshot(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    r1 = engine.ingest(cname, hash_docs("gone", 6), create={"embedder": eid})
    r2 = engine.ingest(cname, [], replace=True, allow_empty=True)
    assert (r2.documents, r2.removed, r2.chunks, r2.parent_id) == (0, 6, 0, r1.snapshot_id)
    # The merge policy then folds the wholly dead segment away: a snapshot of no segment, as empty.
    assert r2.merged is not None and engine.collection(cname).active_snapshot_id == r2.merged
    assert doc_set(engine, r2.snapshot_id) == set()
    assert engine.rollback(cname).after == r1.snapshot_id  # the old documents are one rollback away


def test_an_empty_input_never_creates_a_collection(engine: Engine, cname: str) -> None:
    with pytest.raises(IngestError) as exc:
        engine.ingest(cname, [Document("b", "", "  "), Document("a", "", "")])
    assert str(exc.value) == (
        f"this ingest would make a snapshot of {cname!r} with no documents: it holds no document with text; "
        "2 documents ('a', 'b') had empty text and were skipped. Nothing was changed. Check the input file, or "
        "pass --allow-empty (allow_empty=True) to make an empty snapshot on purpose."
    )
    with pytest.raises(NotFound):
        engine.collection(cname)


def test_documents_with_empty_text_are_skipped_and_named(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    r1 = engine.ingest(
        cname,
        [Document("a", "", "Real text about tides."), Document("z", "", " \n "), Document("b", "", "")],
        create={"embedder": eid},
    )
    assert r1.skipped == ["b", "z"]
    assert (r1.documents, r1.added, r1.chunks) == (1, 1, 1)
    assert doc_set(engine, r1.snapshot_id) == {"a"}
    # An existing document given again with empty text is skipped too: its stored version stays.
    r2 = engine.ingest(cname, [Document("a", "", ""), Document("c", "Only a title", "")])
    assert r2.skipped == ["a"]
    assert (r2.documents, r2.added, r2.changed, r2.removed) == (2, 1, 0, 0)
    assert doc_set(engine, r2.snapshot_id) == {"a", "c"}


def test_cli_names_skipped_documents_and_refuses_an_empty_replace(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    from ranklock.cli import app

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "a", "text": "A vaccine trains the immune system."},
                {"id": "b", "text": "   "},
                {"id": "c", "title": "", "text": ""},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    runner = CliRunner()
    common = ["--dsn", engine.db.dsn, "--home", str(rl_home)]
    res = runner.invoke(app, ["ingest", cname, str(corpus), *common])
    assert res.exit_code == 0, res.output
    assert "skipped 2 documents with empty text (not in the snapshot): b, c" in res.output
    res = runner.invoke(app, ["ingest", cname, str(corpus), "--json", *common])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["skipped"] == ["b", "c"]
    active = engine.collection(cname).active_snapshot_id
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    res = runner.invoke(app, ["ingest", cname, str(empty), "--replace", *common])
    assert res.exit_code == 2
    assert (
        f"error: this ingest would remove the 1 document of the active snapshot {active} of {cname!r}: it holds "
        "no document with text. Nothing was changed." in res.output
    )
    assert "Traceback" not in res.output
    assert engine.collection(cname).active_snapshot_id == active
    res = runner.invoke(app, ["ingest", cname, str(empty), "--replace", "--allow-empty", "--json", *common])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert (out["documents"], out["removed"], out["parent_id"]) == (0, 1, active)
