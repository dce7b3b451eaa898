"""Segments under a crash (issue 24): a merge or a purge killed with SIGKILL loses nothing and leaves no half state.

Each test runs the write in its own process on the test database, kills it
with SIGKILL (as a crash or the OOM killer would) while it is mid-way, and
checks the collection still serves the very same bytes, that the dead write's
leftovers are reaped, and that the same write then succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import ranklock
from crash import kill_while_building
from ranklock import Engine
from ranklock.snapshot import merge as merge_policy
from ranklock.snapshot.build import reap_dead_builds
from ranklock.snapshot.segments import live_documents
from test_segments import QUERIES, create, hits, zipf_corpus

TESTS = str(Path(__file__).parent)
SRC = str(Path(ranklock.__file__).parents[1])

WRITE = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from fakes import HashEmbedder
    from ranklock import Engine

    _, _, dsn, name, op, *ids = sys.argv
    eng = Engine(dsn=dsn, embedder=HashEmbedder(), log_queries=False)
    if op == "merge":
        eng.merge(name, everything=True)
    else:
        eng.purge(name, ids)
    """
)


def start(engine: Engine, name: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", WRITE, TESTS, engine.db.dsn, name, *args], env=env)


def exact_results(engine: Engine, name: str) -> list[Any]:
    return [hits(engine, name, q, mode=m) for q in QUERIES for m in ("lexical", "semantic", "hybrid")]


@pytest.fixture
def no_auto_merge() -> Iterator[None]:
    """Keep every ingest's segment (the merge under test is the one the subprocess starts)."""
    saved = merge_policy.MAX_SMALL
    merge_policy.MAX_SMALL = 10**9
    yield
    merge_policy.MAX_SMALL = saved


@pytest.mark.usefixtures("no_auto_merge")
def test_a_merge_killed_mid_way_changes_nothing_and_the_next_merge_succeeds(engine: Engine, cname: str) -> None:
    docs = zipf_corpus(3000, seed=5)
    for i in range(0, len(docs), 1000):  # three segments of about 2,000 chunks each
        engine.ingest(cname, docs[i : i + 1000], create=create(engine))
    coll = engine.collection(cname)
    active = coll.active_snapshot_id
    assert active is not None
    before = exact_results(engine, cname)
    sid = kill_while_building(engine, start(engine, cname, "merge"), coll.id, active)
    assert sid is not None, "the merge finished before it could be killed mid-way"
    assert engine.collection(cname).active_snapshot_id == active
    assert exact_results(engine, cname) == before
    reaped: list[int] = []
    deadline = time.monotonic() + 20
    while not reaped and time.monotonic() < deadline:
        reaped = reap_dead_builds(engine.db, coll.id)
        time.sleep(0.05)
    assert reaped == [sid]
    # The merge's own segment (named for its snapshot) is gone with it; the segments it read are intact.
    assert engine.db.fetchone("SELECT to_regclass(%s) AS t", [f"ranklock_data.chunks_{sid}"]) == {"t": None}
    assert engine.db.fetchone("SELECT count(*) AS n FROM ranklock.segments WHERE id = %s", [sid]) == {"n": 0}
    report = engine.merge(cname, everything=True)
    assert report.snapshot_id is not None and len(report.segments) == 3
    assert engine.collection(cname).active_snapshot_id == report.snapshot_id
    assert exact_results(engine, cname) == before
    print(f"merge killed while building snapshot {sid}: reaped {reaped}; the next merge folded {report.segments}")


def test_a_purge_killed_before_it_commits_erases_nothing(engine: Engine, cname: str) -> None:
    docs = zipf_corpus(40, seed=6)
    engine.ingest(cname, docs, create=create(engine))
    engine.ingest(cname, docs[:5])  # a second snapshot, so the purge corrects more than one
    coll = engine.collection(cname)
    victim = docs[3].doc_id
    before = exact_results(engine, cname)
    # Hold the purges table so the purge blocks on its last statement, its erasures done but not committed.
    with psycopg.connect(engine.db.dsn) as blocker:
        blocker.execute("LOCK TABLE ranklock.purges IN SHARE MODE")
        proc = start(engine, cname, "purge", victim)
        waiting = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            row = engine.db.fetchone(
                "SELECT count(*) AS n FROM pg_locks WHERE relation = 'ranklock.purges'::regclass AND NOT granted"
            )
            if row and row["n"]:
                waiting = True
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert waiting, "the purge never reached its last statement"
    assert proc.returncode == -signal.SIGKILL
    # Its backend ends once it finds its client gone; nothing it erased was committed.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = engine.db.fetchone(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE %s AND pid <> pg_backend_pid()",
            ["%INSERT INTO ranklock.purges%"],
        )
        if row and not row["n"]:
            break
        time.sleep(0.05)
    sid = engine.collection(cname).active_snapshot_id
    assert sid is not None and victim in live_documents(engine.db, sid)
    assert engine.db.fetchone("SELECT count(*) AS n FROM ranklock.purges WHERE collection_id = %s", [coll.id]) == {
        "n": 0
    }
    assert exact_results(engine, cname) == before
    engine.purge(cname, [victim])
    assert victim not in live_documents(engine.db, engine.collection(cname).active_snapshot_id or 0)
    assert json.dumps(exact_results(engine, cname)).count(f'"{victim}"') == 0
