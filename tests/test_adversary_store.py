"""Stored data against a hostile operator or a failing server (issue 27): a build that loses its lock, and
field names that would break every later ingest."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fakes import use_hash_embedder
from ranklock import ConfigError, Document, Engine, FieldSpec, SnapshotError
from ranklock.cli import app
from ranklock.collection import RESERVED_COLUMNS, SYSTEM_COLUMNS

DOCS = [Document(f"d{i}", f"Doc {i}", f"lava volcano magma crust number {i}", {"year": 2020 + i}) for i in range(6)]


def test_a_build_that_loses_its_lock_stops_and_marks_nothing_ready(engine: Engine, cname: str) -> None:
    """The issue: its lock connection died, the build went on over other connections and marked itself ready."""
    engine.create_collection(cname, embedder=use_hash_embedder(engine), index="exact", fields=["year:int"])
    engine.ingest(cname, DOCS[:3])
    coll = engine.collection(cname)
    before = coll.active_snapshot_id
    killed: list[int] = []

    def kill_the_lock_connection(stage: str, _done: int, _total: int) -> None:
        if stage == "write" and not killed:  # the build has its row and its lock by then
            row = engine.db.fetchone(
                "SELECT id, builder_pid FROM ranklock.snapshots WHERE collection_id = %s AND status = 'building'",
                [coll.id],
            )
            assert row is not None
            killed.append(int(row["id"]))
            engine.db.execute("SELECT pg_terminate_backend(%s)", [row["builder_pid"]])

    with pytest.raises(SnapshotError) as exc:
        engine.ingest(cname, DOCS, progress=kill_the_lock_connection)
    sid = killed[0]
    assert str(exc.value).startswith(
        f"the build of snapshot {sid} of {cname!r} lost its build lock (its lock connection ended: "
    )
    assert str(exc.value).endswith(
        "so another process may take it for dead and drop its tables; it stopped, marked nothing ready and "
        "activated nothing. Ingest again."
    )
    status = engine.db.fetchone("SELECT status FROM ranklock.snapshots WHERE id = %s", [sid])
    assert status is not None and status["status"] == "failed"
    assert engine.collection(cname).active_snapshot_id == before
    assert engine.ingest(cname, DOCS).activated  # and the next ingest is not hindered


@pytest.mark.parametrize("name", sorted(SYSTEM_COLUMNS))
def test_a_system_column_name_is_refused_at_collection_create(engine: Engine, cname: str, name: str) -> None:
    """The issue: a field named ctid, xmin or tableoid was accepted and broke every later ingest (DuplicateColumn)."""
    message = (
        f"field name {name!r} is reserved (a PostgreSQL system column); reserved names are "
        f"{', '.join(sorted(RESERVED_COLUMNS))}. Rename the field."
    )
    with pytest.raises(ConfigError) as exc:
        engine.create_collection(cname, fields=[f"{name}:int"], embedder=use_hash_embedder(engine))
    assert str(exc.value) == message
    with pytest.raises(ConfigError) as exc:  # a FieldSpec built in Python is checked the same
        engine.create_collection(cname, fields=[FieldSpec(name=name, type="int")], embedder=use_hash_embedder(engine))
    assert str(exc.value) == message
    res = CliRunner().invoke(app, ["collection", "create", cname, "--field", f"{name}:keyword", "--dsn", engine.db.dsn])
    assert res.exit_code == 2 and " ".join(res.output.split()) == f"error: {message}"
    assert cname not in [c.name for c in engine.collections()]
