"""The chunk table's columns are declared once (store.tables.CHUNK_COLUMNS): layout, COPY and reserved names follow."""

from __future__ import annotations

import pytest
from psycopg import sql

from fakes import use_hash_embedder
from ranklock import Document, Engine
from ranklock.collection import RESERVED_COLUMNS, SYSTEM_COLUMNS, parse_field_spec
from ranklock.errors import ConfigError
from ranklock.store.tables import ADDED_COLUMNS, CHUNK_COLUMNS, segment_table


def test_a_chunk_table_has_the_declared_columns_in_the_declared_order(engine: Engine, cname: str) -> None:
    eid = use_hash_embedder(engine)
    docs = [
        Document("c-1", "", "A note on tides.", {"year": 2024, "effective_from": "2026-01-01T00:00:00Z"}),
        Document("c-2", "", "A note on orbits.", {"year": 2025}),
    ]
    report = engine.ingest(cname, docs, create={"embedder": eid, "fields": ["year:int"]})
    rows = engine.db.fetchall(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull, a.attstorage "
        "FROM pg_attribute a WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        [f"ranklock_data.chunks_{report.snapshot_id}"],
    )
    assert [r["attname"] for r in rows] == [c.name for c in CHUNK_COLUMNS] + ["year"]
    declared = {c.name: c.ddl.replace("{dim}", "8") for c in CHUNK_COLUMNS}
    for r in rows[: len(CHUNK_COLUMNS)]:
        assert declared[r["attname"]].startswith(r["type"].replace("timestamp with time zone", "timestamptz"))
        assert r["attnotnull"] == ("NOT NULL" in declared[r["attname"]] or "PRIMARY KEY" in declared[r["attname"]])
    # The vector stays inline in the heap row (see snapshot/build.py).
    assert {r["attname"]: r["attstorage"] for r in rows}["embedding"] == "p"
    # Every value written by COPY lands in its own column.
    got = engine.db.fetchall(
        sql.SQL(
            "SELECT doc_id, chunk, char_start, text, year, effective_from IS NOT NULL AS eff, "
            "vec_digest <> '' AS digest, embedder_id FROM {} ORDER BY row_id"
        ).format(segment_table("chunks", report.snapshot_id))
    )
    assert got == [
        {
            "doc_id": d.doc_id,
            "chunk": 0,
            "char_start": 0,
            "text": d.body,
            "year": d.metadata["year"],
            "eff": "effective_from" in d.metadata,
            "digest": True,
            "embedder_id": eid,
        }
        for d in docs
    ]


@pytest.mark.parametrize("name", [c.name for c in CHUNK_COLUMNS] + ["title"])
def test_a_field_may_not_take_a_chunk_column_name(name: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_field_spec(f"{name}:int")
    kind = "a document's own title" if name == "title" else "a column of ranklock's chunk tables"
    assert str(exc.value) == (
        f"field name {name!r} is reserved ({kind}); reserved names are "
        f"{', '.join(sorted(RESERVED_COLUMNS))}. Rename the field."
    )
    assert len(RESERVED_COLUMNS) == len(CHUNK_COLUMNS) + 1 + len(ADDED_COLUMNS) + len(SYSTEM_COLUMNS)
