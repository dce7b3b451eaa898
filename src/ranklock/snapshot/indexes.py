"""The indexes of a snapshot's chunk table, built once after it is written."""

from __future__ import annotations

from psycopg import sql

from ..collection import CollectionInfo
from ..store.database import Database
from ..store.tables import snapshot_table, snapshot_table_name

__all__ = ["create_indexes"]


def create_indexes(db: Database, coll: CollectionInfo, sid: int) -> None:
    """Build the chunk table's indexes once: full text (gin), vectors (hnsw/ivfflat), one per typed field."""
    table = snapshot_table("chunks", sid)
    name = snapshot_table_name("chunks", sid)  # index names: <table>_<purpose>
    # One transaction, so the settings below are SET LOCAL: the connection goes
    # back to the pool with the server's defaults (CREATE INDEX, not
    # CONCURRENTLY, runs in a transaction; nobody reads the table before ready).
    with db.connection() as conn, conn.transaction():
        # Enough for the HNSW graph of a few million 384-d vectors to stay in
        # memory during the build; a graph that spills builds many times slower.
        conn.execute("SET LOCAL maintenance_work_mem = '3GB'")
        conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
        conn.execute(sql.SQL("CREATE INDEX {} ON {} USING gin (tsv)").format(sql.Identifier(f"{name}_tsv"), table))
        if coll.index_kind == "hnsw":
            m = int(coll.index_params.get("m", 16))
            efc = int(coll.index_params.get("ef_construction", 64))
            conn.execute(
                sql.SQL(
                    "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = {}, ef_construction = {})"
                ).format(sql.Identifier(f"{name}_hnsw"), table, sql.Literal(m), sql.Literal(efc))
            )
        elif coll.index_kind == "ivfflat":
            lists = int(coll.index_params.get("lists", 100))
            conn.execute(
                sql.SQL("CREATE INDEX {} ON {} USING ivfflat (embedding vector_cosine_ops) WITH (lists = {})").format(
                    sql.Identifier(f"{name}_ivf"), table, sql.Literal(lists)
                )
            )
        for f in coll.fields:
            method = sql.SQL("gin") if f.type == "keyword[]" else sql.SQL("btree")
            conn.execute(
                sql.SQL("CREATE INDEX {} ON {} USING {} ({})").format(
                    sql.Identifier(f"{name}_f_{f.name}"), table, method, sql.Identifier(f.name)
                )
            )
        conn.execute(sql.SQL("ANALYZE {}").format(table))
