"""Snapshots: immutability under concurrent reads, atomic activation, rollback, diff, drop, kill -9."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crash import kill_while_building
from ranklock import Document, Engine, NotFound, SnapshotError
from ranklock.snapshot.build import reap_dead_builds
from ranklock.snapshot.info import Activation
from ranklock.snapshot.manifest import diff_manifests

QUERY = "how does the immune system respond to a vaccine"
#: Most tests share one text variant, so its embeddings are computed once per session.
TAG = "shared"

TOPICS = [
    ("vaccines", "Vaccines", "A vaccine trains the immune system to recognise a pathogen before infection."),
    ("volcano", "Volcanoes", "Magma rises through the crust and erupts as lava from a volcano."),
    ("bread", "Baking bread", "Yeast ferments the sugars in dough and the gas makes bread rise."),
    ("orbits", "Planetary orbits", "Planets follow elliptical orbits around the sun, as Kepler described."),
    ("immunity", "Immune memory", "Memory B cells let the immune system respond faster to a second exposure."),
    ("tides", "Tides", "The gravity of the moon raises tides in the oceans twice a day."),
]


def docs(tag: str, *, change: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> list[Document]:
    """The topic corpus, made unique to ``tag`` so the embedding cache starts cold for it."""
    out = []
    for doc_id, title, body in TOPICS:
        if doc_id in drop:
            continue
        text = (change or {}).get(doc_id, body)
        out.append(Document(doc_id, title, f"{text} ({tag})"))
    return out


def cli(rl_home: Path, engine: Engine, *args: str) -> tuple[int, str]:
    from ranklock.cli import app

    res = CliRunner().invoke(app, [*args, "--dsn", engine.db.dsn, "--home", str(rl_home)])
    return res.exit_code, res.output


def test_reingest_unchanged_embeds_nothing_and_one_change_reembeds_only_its_chunks(engine: Engine, cname: str) -> None:
    r1 = engine.ingest(cname, docs(cname))
    r2 = engine.ingest(cname, docs(cname))
    r3 = engine.ingest(cname, docs(cname, change={"bread": "Sourdough uses wild yeast and lactic bacteria."}))
    for r in (r1, r2, r3):
        print(
            f"snapshot {r.snapshot_id}: chunks={r.chunks} embedded={r.embedded} reused={r.reused} "
            f"changed={r.changed} unchanged={r.unchanged} digest={r.corpus_digest[:12]}"
        )
    assert r1.embedded == r1.chunks == 6 and r1.reused == 0
    # The same input again changes nothing: no snapshot is built, the active one stays (issue 41).
    assert (r2.built, r2.snapshot_id, r2.corpus_digest, r2.manifest_hash) == (
        False,
        r1.snapshot_id,
        r1.corpus_digest,
        r1.manifest_hash,
    )
    assert (r2.embedded, r2.reused, r2.unchanged, r2.changed) == (0, 0, 6, 0)
    assert (r3.embedded, r3.reused, r3.changed, r3.unchanged) == (1, 5, 1, 5)
    assert r3.corpus_digest != r2.corpus_digest
    listed = engine.list_snapshots(cname)
    assert all(s.status == "ready" and s.created_at and s.built_at and s.created_at <= s.built_at for s in listed)
    assert [(s.id, s.embedded, s.reused, s.active) for s in listed] == [
        (r1.snapshot_id, 6, 0, False),
        (r3.snapshot_id, 1, 5, True),
    ]


def test_rollback_restores_previous_results_exactly(engine: Engine, cname: str) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    before = engine.search(cname, QUERY, k=4).to_json()
    r2 = engine.ingest(cname, docs(TAG, drop=("vaccines",)), replace=True)
    after = engine.search(cname, QUERY, k=4).to_json()
    assert json.loads(after)["snapshot"]["id"] == r2.snapshot_id
    assert "vaccines" not in [h["doc_id"] for h in json.loads(after)["hits"]]
    assert engine.rollback(cname).as_dict() == {"collection": cname, "from": r2.snapshot_id, "to": r1.snapshot_id}
    assert engine.search(cname, QUERY, k=4).to_json() == before
    # A second rollback undoes the first: the pointers were swapped, not lost.
    assert engine.rollback(cname) == Activation(cname, r1.snapshot_id, r2.snapshot_id)
    assert engine.search(cname, QUERY, k=4).to_json() == after


def test_no_activate_then_search_snapshot_and_activate(engine: Engine, cname: str) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    r2 = engine.ingest(cname, docs(TAG, drop=("tides",)), replace=True, activate=False)
    assert not r2.activated
    assert engine.search(cname, "moon gravity ocean tides", k=3).snapshot.id == r1.snapshot_id
    pinned = engine.search(cname, "moon gravity ocean tides", k=3, snapshot=r2.snapshot_id)
    assert pinned.snapshot.id == r2.snapshot_id
    assert "tides" not in [h.doc_id for h in pinned.hits]
    engine.activate(cname, r2.snapshot_id)
    assert engine.search(cname, "moon gravity ocean tides", k=3).to_json() == pinned.to_json()


def test_diff_names_documents_and_manifest_fields(engine: Engine, cname: str, rl_home: Path) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    new = [*docs(TAG, change={"orbits": "Kepler's laws describe planetary motion."}, drop=("bread",))]
    new.append(Document("comets", "Comets", f"Comets are icy bodies with tails ({cname})"))
    r2 = engine.ingest(cname, new, replace=True)
    d = engine.diff_snapshots(cname, r1.snapshot_id, r2.snapshot_id)
    orbits_old = next(x.content_hash for x in docs(TAG) if x.doc_id == "orbits")
    orbits_new = next(x.content_hash for x in new if x.doc_id == "orbits")
    assert d.as_dict()["documents"] == {
        "added": ["comets"],
        "removed": ["bread"],
        "changed": [{"doc_id": "orbits", "old": orbits_old, "new": orbits_new}],
    }
    assert d.manifest is not None
    assert d.manifest["corpus.digest"] == {"old": r1.corpus_digest, "new": r2.corpus_digest}
    assert "embedder.vectors_digest" in d.manifest
    assert "embedder.weights_sha256" not in d.manifest  # same model: not a change
    back = engine.diff_snapshots(cname, r2.snapshot_id, r1.snapshot_id).as_dict()["documents"]
    assert (back["added"], back["removed"]) == (["bread"], ["comets"])
    code, out = cli(rl_home, engine, "snapshot", "diff", cname, str(r1.snapshot_id), str(r2.snapshot_id), "--json")
    assert code == 0, out
    assert json.loads(out)["documents"] == d.as_dict()["documents"]


def test_drop_refuses_active_and_collects_orphan_versions(engine: Engine, cname: str) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    r2 = engine.ingest(cname, docs(TAG, change={"tides": "Spring tides happen at new and full moon."}))
    with pytest.raises(SnapshotError) as exc:
        engine.drop_snapshot(cname, r2.snapshot_id)
    assert str(exc.value) == (
        f"snapshot {r2.snapshot_id} is the active snapshot of {cname!r} and keeps serving; activate or roll back "
        "to another snapshot first, then drop it."
    )
    coll = engine.collection(cname)
    assert engine.db.fetchone("SELECT count(*) AS n FROM ranklock.documents WHERE collection_id = %s", [coll.id]) == {
        "n": 7
    }
    out = engine.drop_snapshot(cname, r1.snapshot_id)
    # r2 reads r1's segment (all but the old "tides" are live in it): nothing is physically dropped yet.
    assert (out.versions_gc, out.versions_deleted, out.segments_dropped) == ("done", 0, ())
    assert engine.db.fetchone("SELECT to_regclass(%s) AS t", [f"ranklock_data.chunks_{r1.snapshot_id}"]) != {"t": None}
    assert engine.collection(cname).previous_snapshot_id is None  # the dropped one was the previous
    with pytest.raises(NotFound):
        engine.search(cname, QUERY, snapshot=r1.snapshot_id)
    with pytest.raises(NotFound) as nf:
        engine.drop_snapshot(cname, r1.snapshot_id)
    assert str(nf.value) == (
        f"collection {cname!r} has no snapshot {r1.snapshot_id}; see `ranklock snapshot list {cname}`."
    )
    # A merge folds both segments into one; dropping r2 then frees them and the old version of "tides".
    merged = engine.merge(cname, everything=True)
    assert merged.snapshot_id is not None and merged.segments == (r1.snapshot_id, r2.snapshot_id)
    out = engine.drop_snapshot(cname, r2.snapshot_id)
    assert out.versions_gc == "done" and out.versions_deleted == 1
    assert out.segments_dropped == (r1.snapshot_id, r2.snapshot_id)
    assert f"chunks_{r1.snapshot_id}" in out.tables
    for sid in (r1.snapshot_id, r2.snapshot_id):
        assert engine.db.fetchone("SELECT to_regclass(%s) AS t", [f"ranklock_data.chunks_{sid}"]) == {"t": None}
    left = engine.db.fetchall(
        "SELECT doc_id, content_hash FROM ranklock.documents WHERE collection_id = %s ORDER BY doc_id", [coll.id]
    )
    kept = engine.db.fetchall(
        "SELECT doc_id, content_hash FROM ranklock.segment_documents WHERE segment_id IN ("
        "SELECT segment_id FROM ranklock.snapshot_segments WHERE snapshot_id = %s) ORDER BY doc_id",
        [merged.snapshot_id],
    )
    assert left == kept
    assert [s.id for s in engine.list_snapshots(cname)] == [merged.snapshot_id]


def test_manifest_file_is_stable_sorted_json(engine: Engine, cname: str, rl_home: Path, tmp_path: Path) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    target = tmp_path / "manifest.json"
    code, out = cli(rl_home, engine, "snapshot", "manifest", cname, "-o", str(target))
    assert code == 0, out
    text = target.read_text(encoding="utf-8")
    m = engine.manifest(cname)
    assert json.loads(text) == m
    assert text == json.dumps(m, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert m["manifest_hash"] == engine.snapshot_info(cname).manifest_hash
    code, out = cli(rl_home, engine, "snapshot", "manifest", cname, str(r1.snapshot_id))
    assert code == 0 and out == text
    code, out = cli(rl_home, engine, "snapshot", "list", cname, "--json")
    assert code == 0, out
    listed = json.loads(out)["snapshots"]
    assert [(s["id"], s["status"], s["active"]) for s in listed] == [(r1.snapshot_id, "ready", True)]
    code, out = cli(rl_home, engine, "snapshot", "show", cname, "--json")
    assert code == 0 and json.loads(out)["manifest"] == m
    code, out = cli(rl_home, engine, "snapshot", "rollback", cname)
    assert code == 2 and "no previous snapshot to roll back to" in out
    with pytest.raises(SnapshotError) as exc:
        engine.rollback(cname)
    assert str(exc.value) == (
        f"collection {cname!r} has no previous snapshot to roll back to (active: {r1.snapshot_id}); "
        f"activate a specific one with `ranklock snapshot activate {cname} ID`."
    )


def _readers(
    engine: Engine, cname: str, n: int, stop: threading.Event
) -> tuple[list[list[tuple[float, str]]], list[BaseException], list[threading.Thread]]:
    seen: list[list[tuple[float, str]]] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def read(i: int) -> None:
        try:
            while not stop.is_set():
                seen[i].append((time.monotonic(), engine.search(cname, QUERY, k=4).to_json()))
        except BaseException as exc:  # surfaced by the test below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return seen, errors, threads


def test_four_readers_see_identical_results_while_a_snapshot_builds(engine: Engine, cname: str) -> None:
    engine.ingest(cname, docs(TAG))
    baseline = engine.search(cname, QUERY, k=4).to_json()
    stop = threading.Event()
    seen, errors, threads = _readers(engine, cname, 4, stop)
    try:
        while min(len(s) for s in seen) < 1 and not errors:
            time.sleep(0.01)
        t0 = time.monotonic()
        bigger = docs(TAG) + [
            Document(f"extra{i:02d}", f"Extra {i}", f"Immune responses to vaccine number {i} in trial {cname}.")
            for i in range(10)
        ]
        report = engine.ingest(cname, bigger, activate=False)
        t1 = time.monotonic()
        time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    during = [sum(1 for ts, _ in s if t0 <= ts <= t1) for s in seen]
    print(f"build of snapshot {report.snapshot_id} took {t1 - t0:.2f}s; reads during it per reader: {during}")
    assert all(n >= 1 for n in during)
    assert {j for s in seen for _, j in s} == {baseline}


def test_activation_is_atomic_for_concurrent_readers(engine: Engine, cname: str) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    old = engine.search(cname, QUERY, k=4).to_json()
    r2 = engine.ingest(cname, docs(TAG, drop=("immunity",)), replace=True, activate=False)
    new = engine.search(cname, QUERY, k=4, snapshot=r2.snapshot_id).to_json()
    assert old != new
    stop = threading.Event()
    seen, errors, threads = _readers(engine, cname, 4, stop)
    try:
        for _ in range(3):
            time.sleep(0.15)
            engine.activate(cname, r2.snapshot_id)
            time.sleep(0.15)
            engine.rollback(cname)
        time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    observed = [j for s in seen for _, j in s]
    counts = {"old": observed.count(old), "new": observed.count(new)}
    print(f"{len(observed)} reads across 6 switches: {counts}")
    assert set(observed) <= {old, new}  # each read is wholly one snapshot, never a mix
    assert counts["old"] > 0 and counts["new"] > 0
    assert engine.collection(cname).active_snapshot_id == r1.snapshot_id


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from ranklock import Document, Engine

    dsn, name, tag = sys.argv[1:4]
    eng = Engine(dsn=dsn, log_queries=False)
    docs = [Document(f"k{i:03d}", f"Doc {i}", f"Kill test document {i} about orbits and tides, {tag}.")
            for i in range(60)]
    eng.ingest(name, docs)
    """
)


def test_build_killed_mid_way_leaves_active_snapshot_intact(engine: Engine, cname: str) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    before = engine.search(cname, QUERY, k=4).to_json()
    coll = engine.collection(cname)
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, engine.db.dsn, cname, cname])
    sid = kill_while_building(engine, proc, coll.id, r1.snapshot_id)
    assert sid is not None, "the subprocess finished before it could be killed mid-build"
    assert proc.returncode == -signal.SIGKILL
    assert engine.db.fetchone("SELECT status FROM ranklock.snapshots WHERE id = %s", [sid]) == {"status": "building"}
    # The active snapshot never moved and serves the very same bytes.
    assert engine.collection(cname).active_snapshot_id == r1.snapshot_id
    assert engine.search(cname, QUERY, k=4).to_json() == before
    # The dead builder's backend releases its advisory lock once PostgreSQL notices the
    # closed socket; reap until it does.
    reaped: list[int] = []
    deadline = time.monotonic() + 20
    while not reaped and time.monotonic() < deadline:
        reaped = reap_dead_builds(engine.db, coll.id)
        time.sleep(0.05)
    assert reaped == [sid]
    assert engine.db.fetchone("SELECT status FROM ranklock.snapshots WHERE id = %s", [sid]) == {"status": "failed"}
    assert engine.db.fetchone("SELECT to_regclass(%s) AS t", [f"ranklock_data.chunks_{sid}"]) == {"t": None}
    engine.drop_snapshot(cname, sid)  # a failed build can be dropped like any non-active snapshot
    # A fresh build after the kill succeeds and is served.
    again = engine.ingest(cname, [Document("k000", "Doc 0", f"Kill test document 0 about orbits and tides, {cname}.")])
    print(
        f"after kill -9 of build {sid}: reaped {reaped}, new snapshot {again.snapshot_id} "
        f"embedded={again.embedded} reused={again.reused}"
    )
    assert engine.collection(cname).active_snapshot_id == again.snapshot_id


def test_activate_with_gate_refuses_a_worse_snapshot(engine: Engine, cname: str, rl_home: Path, tmp_path: Path) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {"query": "vaccine immune system", "expected": ["vaccines"]},
                {"query": "lava erupting from a volcano", "expected": ["volcano"]},
                {"query": "moon gravity and ocean tides", "expected": ["tides"]},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    worse = engine.ingest(cname, docs(TAG, drop=("volcano",)), replace=True, activate=False)
    code, out = cli(
        rl_home, engine, "snapshot", "activate", cname, str(worse.snapshot_id), "--gate", str(golden), "--json"
    )
    assert code == 1, out
    refused = json.loads(out)
    assert refused["activated"] is False and refused["gate"]["passed"] is False
    assert refused["gate"]["reasons"]
    assert engine.collection(cname).active_snapshot_id == r1.snapshot_id
    same = engine.ingest(cname, docs(TAG), replace=True, activate=False)
    code, out = cli(
        rl_home, engine, "snapshot", "activate", cname, str(same.snapshot_id), "--gate", str(golden), "--json"
    )
    assert code == 0, out
    assert json.loads(out)["activated"] is True
    assert engine.collection(cname).active_snapshot_id == same.snapshot_id
    print(f"gate refused snapshot {worse.snapshot_id}: {refused['gate']['reasons'][0]}")


def test_snapshot_commands_print_readable_tables(engine: Engine, cname: str, rl_home: Path) -> None:
    r1 = engine.ingest(cname, docs(TAG))
    r2 = engine.ingest(cname, docs(TAG, change={"tides": "Neap tides are weaker."}), activate=False)
    runs = [
        ("snapshot", "list", cname),
        ("snapshot", "show", cname, str(r2.snapshot_id)),
        ("snapshot", "diff", cname, str(r1.snapshot_id), str(r2.snapshot_id)),
        ("snapshot", "activate", cname, str(r2.snapshot_id)),
        ("snapshot", "rollback", cname),
        ("snapshot", "drop", cname, str(r2.snapshot_id)),
        ("search", cname, QUERY, "-k", "2"),
    ]
    outputs = []
    for args in runs:
        code, out = cli(rl_home, engine, *args)
        assert code == 0, (args, out)
        outputs.append(" ".join(out.split()))  # rich wraps lines at the terminal width
    assert "~ tides" in outputs[2]
    assert f"snapshot {r2.snapshot_id} is active (was {r1.snapshot_id})" in outputs[3]
    assert f"rolled back from snapshot {r2.snapshot_id} to {r1.snapshot_id}" in outputs[4]
    assert f"dropped snapshot {r2.snapshot_id}" in outputs[5]
    assert "logged as query" in outputs[6] and "ranklock replay" in outputs[6]
    code, out = cli(rl_home, engine, "snapshot", "drop", cname, str(r1.snapshot_id))
    assert code == 2 and "is the active snapshot" in out


def test_manifest_records_the_vector_index_build(engine: Engine, cname: str) -> None:
    # An HNSW graph is drawn at random: two builds of one corpus are two different
    # indexes, so the manifest says when and how this one was built.
    engine.ingest(cname, docs(TAG))
    first = engine.manifest(cname)
    build = first["index"]["build"]
    assert build["type"] == "hnsw" and build["params"] == {"m": 32, "ef_construction": 128}
    assert build["bytes"] > 0 and build["seconds"] >= 0 and build["deterministic"] is False
    assert build["pgvector"].count(".") == 2 and build["postgres"][:2].isdigit()
    assert build["built_at"].endswith("+00:00")
    # The same documents again: the snapshot shares the segment and its index, and says so.
    engine.ingest(cname, docs(TAG), replace=True)
    assert engine.manifest(cname)["index"]["build"] == build
    time.sleep(1.1)  # a rebuild at least a second later: built_at differs
    engine.ingest(cname, [*docs(TAG), Document("extra", "", "One more note.")])
    engine.merge(cname, everything=True)  # rebuilds the vector index of every document in one segment
    engine.ingest(cname, docs(TAG), replace=True)  # a delete of "extra": no segment written
    second = engine.manifest(cname)
    changed = {k for k in diff_manifests(first, second) if not k.startswith(("index.build.", "segmentation."))}
    assert changed == set()  # the same corpus and settings (cut into segments otherwise) ...
    assert second["manifest_hash"] != first["manifest_hash"]  # ... but another index, and the hash says so
    assert second["index"]["build"]["built_at"] > build["built_at"]
