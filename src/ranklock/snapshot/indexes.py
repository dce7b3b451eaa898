"""The indexes of a segment's chunk table, built once after it is written."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from psycopg import sql

from ..collection import HNSW_DEFAULTS, CollectionInfo
from ..store.database import Database
from ..store.tables import SCHEMA, field_index_name, segment_table, segment_table_name

__all__ = ["create_indexes", "index_build_settings"]


def index_build_settings(conn: Any) -> None:
    """The settings of an index build, for the rest of the caller's transaction (``SET LOCAL``).

    Enough memory for the HNSW graph of a few million 384-d vectors to stay in memory during the
    build (a graph that spills builds many times slower), and one parallel worker (the manifest's
    ``index.build`` records the number).  A build and a purge's rebuild use the same.
    """
    conn.execute("SET LOCAL maintenance_work_mem = '3GB'")
    conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")


def create_indexes(db: Database, coll: CollectionInfo, sid: int) -> dict[str, Any]:
    """Build the chunk table's indexes once: full text (gin), vectors (hnsw/ivfflat), one per typed field.

    Returns how the vector index was built, for the manifest (``index.build``):
    an HNSW graph (and IVFFlat's k-means) draws random numbers, so two builds of
    the same corpus hold different indexes; the build record makes a rebuilt
    index visible as a manifest difference even when its parameters are equal.
    """
    build: dict[str, Any] = {"type": coll.index_kind}
    table = segment_table("chunks", sid)
    name = segment_table_name("chunks", sid)  # index names: <table>_<purpose>
    # One transaction, so the settings below are SET LOCAL: the connection goes
    # back to the pool with the server's defaults (CREATE INDEX, not
    # CONCURRENTLY, runs in a transaction; nobody reads the table before ready).
    with db.connection() as conn, conn.transaction():
        if coll.shards:
            # A distributed table: each shard's indexes are built by its worker, with these settings.
            conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        index_build_settings(conn)
        conn.execute(sql.SQL("CREATE INDEX {} ON {} USING gin (tsv)").format(sql.Identifier(f"{name}_tsv"), table))
        t0 = time.perf_counter()
        vector_index: str | None = None
        if coll.index_kind == "hnsw":
            vector_index = f"{name}_hnsw"
            m = int(coll.index_params.get("m", HNSW_DEFAULTS["m"]))
            efc = int(coll.index_params.get("ef_construction", HNSW_DEFAULTS["ef_construction"]))
            conn.execute(
                sql.SQL(
                    "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = {}, ef_construction = {})"
                ).format(sql.Identifier(f"{name}_hnsw"), table, sql.Literal(m), sql.Literal(efc))
            )
        elif coll.index_kind == "ivfflat":
            vector_index = f"{name}_ivf"
            lists = int(coll.index_params.get("lists", 100))
            conn.execute(
                sql.SQL("CREATE INDEX {} ON {} USING ivfflat (embedding vector_cosine_ops) WITH (lists = {})").format(
                    sql.Identifier(f"{name}_ivf"), table, sql.Literal(lists)
                )
            )
        if vector_index is not None:
            row = conn.execute(
                "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
                "current_setting('server_version'), pg_relation_size(%s::regclass), "
                "current_setting('max_parallel_maintenance_workers')::int",
                [sql.Identifier(SCHEMA, vector_index).as_string(None)],
            ).fetchone()
            assert row is not None  # a SELECT of scalars always returns one row
            build.update(
                {
                    "params": dict(coll.index_params),
                    "pgvector": row[0],
                    "postgres": row[1],
                    "bytes": int(row[2]),
                    "seconds": round(time.perf_counter() - t0, 1),
                    "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "parallel_maintenance_workers": int(row[3]),
                    "deterministic": False,
                }
            )
        for f in coll.fields:
            method = sql.SQL("gin") if f.type == "keyword[]" else sql.SQL("btree")
            conn.execute(
                sql.SQL("CREATE INDEX {} ON {} USING {} ({})").format(
                    sql.Identifier(field_index_name(name, f.name)), table, method, sql.Identifier(f.name)
                )
            )
        conn.execute(sql.SQL("ANALYZE {}").format(table))
    if vector_index is not None and coll.shards:
        # A distributed index's size is its shards' (the coordinator's shell has none), read after the
        # commit: Citus refuses citus_relation_size in a transaction that modified shards.
        with db.connection() as conn:
            got = conn.execute(
                "SELECT citus_relation_size(%s::regclass)", [sql.Identifier(SCHEMA, vector_index).as_string(None)]
            ).fetchone()
        build["bytes"] = int(got[0]) if got else 0
    return build
