"""Segments on a Citus cluster: each segment's tables distributed by ``doc_id``, its BM25 terms everywhere.

A collection created on a Citus coordinator that has workers (``RANKLOCK_DSN``
at it, e.g. ``ranklock db cluster create``) is *sharded*: its ``shards`` is
recorded when it is created, and every segment a build writes is first built
exactly as on one node (chunks, indexes, BM25 tables, by the same statements,
so every stored weight has the same bits), then placed:

* ``chunks``, ``forward`` and ``postings`` become distributed tables, by
  ``doc_id`` (``forward`` and ``postings`` gain that column), co-located with
  every other segment of every sharded collection of that shard count: a
  document's chunks, forward rows and postings are on one shard, so a chunk
  is scored where it lives, and one statement can join them;
* ``terms`` and ``dense`` become reference tables (a copy on every node): each
  shard scores with the whole segment's statistics, never its own.

The catalog (``ranklock.*``) stays on the coordinator, and so does activation:
one pointer, as on one node.  A search on a sharded snapshot runs the one-node
plan once on each shard (ranklock.search.sharded; docs/scaling.md), so a build
also places what that needs (:func:`place_snapshot`): a table with one row on
each shard (``anchors_<shards>``, what the query fans out over, shared by every
collection of that shard count) and the snapshot's dead rows, each on the
shard of the chunk it masks (``dead_<snapshot>``).

>>> resolve_shards(db, None)      # doctest: +SKIP
4                                 # 2 workers: 2 shards each
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..errors import ConfigError, SnapshotError
from ..store import locks
from ..store.database import Database
from ..store.tables import (
    SHARD_KEY,
    SegmentKind,
    anchor_table,
    dead_table,
    segment_table,
    segment_table_name,
)

__all__ = [
    "MAX_SHARDS",
    "SHARD_SEARCH",
    "SHARDS_PER_WORKER",
    "citus_workers",
    "distribute_segment",
    "ensure_anchors",
    "place_snapshot",
    "placement",
    "resolve_shards",
]

#: A new collection's shards per worker when none is asked for.  Each segment
#: pays a fixed cost per shard (three tables and their indexes), and a search
#: runs its shards in parallel only as far as there are workers; two per worker
#: leaves each node a shard to hand over when a worker is added.
SHARDS_PER_WORKER = 2
#: The most shards a collection may ask for (each segment creates 3 tables per shard).
MAX_SHARDS = 256
#: The version of what a sharded snapshot places for its searches (:func:`place_snapshot`), recorded in its
#: statistics (``shard_search``): a snapshot placed before it is searched with a message saying how to place it.
SHARD_SEARCH = 1


def citus_workers(db: Database) -> int | None:
    """The active worker nodes of the Citus cluster ``db`` is the coordinator of; None without Citus."""
    row = db.fetchone("SELECT 1 AS citus FROM pg_extension WHERE extname = 'citus'")
    if row is None:
        return None
    got = db.fetchone(
        "SELECT count(*) AS n FROM pg_dist_node WHERE noderole = 'primary' AND isactive AND shouldhaveshards"
    )
    return int(got["n"]) if got else 0


def resolve_shards(db: Database, requested: int | None) -> int | None:
    """A new collection's shards: ``requested``, or ``SHARDS_PER_WORKER`` per worker on a Citus cluster; None: one node.

    ``0`` asks for ordinary tables even on a cluster; a positive count needs a
    coordinator with workers.
    """
    if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int)):
        raise ConfigError(f"shards must be a whole number, not {requested!r}; e.g. shards=4, or 0 for one node.")
    if requested is not None and not 0 <= requested <= MAX_SHARDS:
        raise ConfigError(f"shards={requested} is out of range; use 1 to {MAX_SHARDS}, or 0 for ordinary tables.")
    if requested == 0:
        return None
    workers = citus_workers(db)
    if requested is None:
        return workers * SHARDS_PER_WORKER if workers else None
    if not workers:
        what = "has no Citus extension" if workers is None else "is a Citus coordinator without active workers"
        raise ConfigError(
            f"shards={requested} needs a Citus cluster, and this database {what}. Point RANKLOCK_DSN at a "
            "coordinator with workers (`ranklock db cluster create --workers 2` makes a local one), or leave "
            "shards unset."
        )
    return requested


def placement(shards: int, *, by_key: bool = False) -> dict[str, Any]:
    """How a sharded collection's segments are placed, for its manifests.

    Exact answers never depend on it; an HNSW graph per shard does (which
    documents share a graph is the hash of the distribution column modulo the
    shards), so approximate answers are stable per placement.
    """
    return {
        "engine": "citus",
        "shards": shards,
        "distribution_column": SHARD_KEY if by_key else "doc_id",
        "reference_tables": ["terms", "dense"],
    }


def distribute_segment(db: Database, segment_id: int, shards: int, *, by_key: bool = False) -> None:
    """Place segment ``segment_id``'s tables (built on the coordinator) on the cluster's workers, in ``shards`` shards.

    Each table's rows move to its shards and the coordinator's copy is
    emptied.  Co-located with every other segment of ``shards`` shards and
    the same distribution column (``colocate_with => 'default'``: Citus
    co-locates tables of one shard count and column type), so a search can
    join one segment's tables and union several segments' arms in one
    pushed-down statement.

    By ``doc_id`` (``forward`` and ``postings`` gain that column), or, for a
    collection cut by a partition key (``by_key``), by :data:`SHARD_KEY`: the
    segment's partition value ('' for documents without one) in every row, so
    the whole segment, and every segment of that value, is one shard on one
    node, and a search the filter routes to one tenant's segments reads that
    node alone.  A unique key of a distributed table must hold its
    distribution column: ``(row_id, <column>)``, ``(doc_id, chunk, <column>)``.
    """
    t = {k: segment_table(k, segment_id) for k in ("chunks", "forward", "postings", "terms", "dense")}
    column = SHARD_KEY if by_key else "doc_id"
    with db.connection() as conn:
        key = None
        if by_key:
            row = conn.execute(
                "SELECT partition_key FROM ranklock.segments WHERE id = %s::bigint", [segment_id]
            ).fetchone()
            key = (row[0] if row else None) or ""
            _add_key(conn, t["chunks"], key)
            unique = sql.Identifier(segment_table_name("chunks", segment_id) + "_doc_id_chunk_key")
            conn.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(t["chunks"], unique))
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD UNIQUE (doc_id, chunk, {})").format(t["chunks"], sql.Identifier(column))
            )
        for kind in ("forward", "postings"):
            if key is None:
                _add_doc_id(conn, t[kind], t["chunks"])
            else:
                _add_key(conn, t[kind], key)
        keyed: tuple[SegmentKind, ...] = ("chunks", "forward")
        for kind in keyed:
            pkey = sql.Identifier(segment_table_name(kind, segment_id) + "_pkey")
            # One subcommand per ALTER: Citus refuses ADD CONSTRAINT beside another.
            conn.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(t[kind], pkey))
            conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (row_id, {})").format(t[kind], sql.Identifier(column)))
        for kind in ("chunks", "forward", "postings"):
            name = t[kind].as_string(conn)
            conn.execute(
                "SELECT create_distributed_table(%s, %s, shard_count => %s, colocate_with => 'default')",
                [name, column, shards],
            )
            # The coordinator's own copy is never read again once the shards hold the rows.
            conn.execute("SELECT truncate_local_data_after_distributing_table(%s)", [name])
        for kind in ("terms", "dense"):
            name = t[kind].as_string(conn)
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()
            if exists and exists[0]:
                conn.execute("SELECT create_reference_table(%s)", [name])
                conn.execute("SELECT truncate_local_data_after_distributing_table(%s)", [name])
        conn.execute(
            "UPDATE ranklock.segments SET stats = stats || %s WHERE id = %s::bigint",
            [Jsonb({"shards": shards, "distribution": column}), segment_id],
        )
    ensure_anchors(db, shards, segment_id)


def ensure_anchors(db: Database, shards: int, segment_id: int) -> None:
    """The table with one row on each of ``shards`` shards, made once (beside segment ``segment_id``'s shards).

    A search's query phase is one Citus query over it (ranklock.search.sharded):
    Citus runs one task per shard, each calling the shard's search once.  Each
    row's key is any text whose hash falls in its shard (found by asking Citus),
    never a document's: the rows are only ever read for the shard they are on.
    Co-located with the segment's chunks (Citus co-locates every table of one
    shard count and distribution type, ``doc_id`` and ``shard_key`` alike), so
    each task finds its shard's tables beside its row.
    """
    table = anchor_table(shards)
    with db.connection() as conn:
        # One maker at a time: two first builds of that shard count at once would both create it.
        conn.execute("SELECT pg_advisory_lock(%s, %s)", [locks.SHARD_ANCHORS, shards])
        try:
            name = table.as_string(conn)
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()
            if not (exists and exists[0]):
                conn.execute(sql.SQL('CREATE TABLE {} (key text COLLATE "C" PRIMARY KEY)').format(table))
                conn.execute(
                    "SELECT create_distributed_table(%s, 'key', colocate_with => %s)",
                    [name, segment_table("chunks", segment_id).as_string(conn)],
                )
            got = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
            if got and int(got[0]) == shards:
                return
            # Made now, or a maker died before filling it: the first key Citus hashes into each shard, of
            # 64 candidates a shard (hashes spread evenly, so every shard gets some).
            with conn.transaction():
                conn.execute(sql.SQL("DELETE FROM {}").format(table))
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} (key) SELECT DISTINCT ON (s) k FROM (SELECT '#' || g AS k, g, "
                        "get_shard_id_for_distribution_column(%s, '#' || g) AS s FROM generate_series(0, %s) AS g) "
                        "AS c ORDER BY s, g"
                    ).format(t=table),
                    [name, 64 * shards],
                )
            got = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
            if not got or int(got[0]) != shards:
                raise SnapshotError(
                    f"could not place one search anchor on each of the {shards} shards "
                    f"({got[0] if got else 0} placed); this is a bug: report it with `SELECT * FROM citus_shards`."
                )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", [locks.SHARD_ANCHORS, shards])


def place_snapshot(db: Database, snapshot_id: int, shards: int, *, by_key: bool = False) -> dict[str, Any]:
    """What a search of sharded snapshot ``snapshot_id`` needs placed; its ``shard_search`` statistics.

    Its dead rows (``ranklock.snapshot_dead_rows``) copied into ``dead_<snapshot>``,
    each with its chunk's distribution value, so it lands on the shard of the
    chunk it masks: a shard masks its own rows, nothing goes to every worker.
    Written once, by the build, before the snapshot is ready (a purge removes
    the rows of the documents it erases).  The anchors of its shard count are
    made if a collection placed before them has none yet (:func:`ensure_anchors`).
    """
    column = SHARD_KEY if by_key else "doc_id"
    table = dead_table(snapshot_id)
    row = db.fetchone(
        "SELECT min(segment_id) AS seg FROM ranklock.snapshot_segments WHERE snapshot_id = %s", [snapshot_id]
    )
    if row is not None and row["seg"] is not None:
        ensure_anchors(db, shards, int(row["seg"]))
    with db.connection() as conn:
        per_seg = conn.execute(
            "SELECT seg, array_agg(row_id ORDER BY row_id) FROM ranklock.snapshot_dead_rows WHERE snapshot_id = %s "
            "GROUP BY seg ORDER BY seg",
            [snapshot_id],
        ).fetchall()
        if per_seg:
            conn.execute(
                sql.SQL(
                    'CREATE TABLE {} (seg bigint NOT NULL, row_id bigint NOT NULL, key text COLLATE "C" NOT NULL, '
                    "PRIMARY KEY (seg, row_id, key))"
                ).format(table)
            )
            conn.execute(
                "SELECT create_distributed_table(%s, 'key', colocate_with => %s)",
                [table.as_string(conn), segment_table("chunks", int(per_seg[0][0])).as_string(conn)],
            )
            for seg, rows in per_seg:
                # Co-located INSERT ... SELECT: each shard copies its own chunks' rows, nothing passes the coordinator.
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} (seg, row_id, key) SELECT %s::bigint, c.row_id, c.{col} FROM {chunks} AS c "
                        "WHERE c.row_id = ANY (%s::bigint[])"
                    ).format(t=table, col=sql.Identifier(column), chunks=segment_table("chunks", int(seg))),
                    [int(seg), rows],
                )
    return {"version": SHARD_SEARCH, "shards": shards, "dead": bool(per_seg)}


def _add_doc_id(conn: Any, table: sql.Identifier, chunks: sql.Identifier) -> None:
    """Give a BM25 table keyed by ``row_id`` its chunk's ``doc_id``: the column it is distributed by."""
    conn.execute(sql.SQL('ALTER TABLE {} ADD COLUMN doc_id text COLLATE "C"').format(table))
    conn.execute(
        sql.SQL("UPDATE {t} AS x SET doc_id = c.doc_id FROM {c} AS c WHERE c.row_id = x.row_id").format(
            t=table, c=chunks
        )
    )
    conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN doc_id SET NOT NULL").format(table))


def _add_key(conn: Any, table: sql.Identifier, key: str) -> None:
    """Give a table of the segment the segment's partition value in every row: the column it is distributed by."""
    # A constant default fills every row without rewriting them one by one.
    conn.execute(
        sql.SQL('ALTER TABLE {} ADD COLUMN {} text COLLATE "C" NOT NULL DEFAULT {}').format(
            table, sql.Identifier(SHARD_KEY), sql.Literal(key)
        )
    )
