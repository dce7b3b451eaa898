"""What a snapshot is made of: its segments and its dead documents, and how a read sees only the live ones.

A *segment* is written once and never changed: a chunk table with its indexes
and its BM25 tables (``ranklock_data.<kind>_<id>``, ranklock.store.tables),
holding the documents one write added or changed.  Its id is the id of the
snapshot whose build wrote it.  A *snapshot* is a set of segments, shared by
reference with its parent, plus the documents of those segments that a later
write replaced or deleted: its dead documents and their chunks (dead rows),
recorded per snapshot in ``ranklock.snapshot_dead`` and
``ranklock.snapshot_dead_rows``.  Every read goes through :func:`chunks_sql`
and :func:`live_sql`: the union of the segments' chunk tables, each row tagged
with its segment (``seg``), and the dead rows masked by an anti-join on
``(seg, row_id)`` above the union, so each segment's own indexes still serve
it (an index scan per segment, merged in order).

>>> layout = Layout.of(snap)                        # doctest: +SKIP
>>> layout.segments, layout.dead_rows               # doctest: +SKIP
((12, 15), 3)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql

from ..store.database import Database
from ..store.tables import SEGMENT_COLUMN, SHARD_KEY, SegmentKind, dead_table, segment_table
from .filter_table import FILTER_TABLE_VERSION

__all__ = [
    "Layout",
    "SegmentInfo",
    "chunks_sql",
    "collect_segments",
    "filter_rows_sql",
    "has_filter_tables",
    "live_count",
    "live_documents",
    "live_documents_sql",
    "live_sql",
    "read_layout",
    "segments_sql",
    "snapshot_totals",
    "union_sql",
]


@dataclass(frozen=True)
class SegmentInfo:
    """One segment of a snapshot, as the catalog (``ranklock.segments``) records it."""

    id: int
    documents: int
    chunks: int
    total_len: int
    max_chunks: int
    window_start: datetime | None = None
    window_end: datetime | None = None
    partition_key: str | None = None
    #: Its BM25 statistics (ranklock.snapshot.lexical_stats), as built from its own chunks.
    bm25: Mapping[str, Any] | None = None
    #: Its tables' shards on a Citus cluster (ranklock.snapshot.shards); None: ordinary tables on one node.
    shards: int | None = None
    #: The column its tables are distributed by there: ``doc_id``, or ``shard_key`` (its partition value).
    distribution: str | None = None
    #: Its filter table (ranklock.snapshot.filter_table), as built; None: its chunk table serves constraints.
    filter: Mapping[str, Any] | None = None
    #: The fields its value counts hold (ranklock.snapshot.value_counts): "values" or "unbounded" each.
    counts: Mapping[str, str] | None = None

    def key_sql(self, alias: str) -> sql.Composable:
        """``alias.shard_key = '<its partition value>'`` when placed by it, else TRUE.

        Always true of the segment's rows; written out so that Citus prunes a
        statement to the one shard that holds them.
        """
        if self.distribution != SHARD_KEY:
            return sql.SQL("TRUE")
        return sql.SQL("{}.{} = {}").format(
            sql.Identifier(alias), sql.Identifier(SHARD_KEY), sql.Literal(self.partition_key or "")
        )

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> SegmentInfo:
        return cls(
            id=int(row["id"]),
            documents=int(row["documents"]),
            chunks=int(row["chunks"]),
            total_len=int(row["total_len"]),
            max_chunks=int(row["max_chunks"]),
            window_start=_ts(row.get("window_start")),
            window_end=_ts(row.get("window_end")),
            partition_key=row.get("partition_key"),
            bm25=row.get("bm25"),
            shards=None if row.get("shards") is None else int(row["shards"]),
            distribution=row.get("distribution"),
            filter=row.get("filter"),
            counts=row.get("counts"),
        )


def _ts(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


@dataclass(frozen=True)
class Layout:
    """A snapshot's segments (ascending id) a read goes through, and how many dead rows it masks.

    ``statistics`` are all of the snapshot's segments: a read routed to fewer
    (ranklock.segmenting.route) still scores with the whole snapshot's BM25
    statistics, so routing never changes a score.
    """

    snapshot_id: int
    segments: tuple[SegmentInfo, ...]
    dead_rows: int = 0
    statistics: tuple[SegmentInfo, ...] = ()
    #: On a Citus cluster: what the snapshot's build placed for per-shard searches (ranklock.snapshot.shards.
    #: place_snapshot: its version, shard count, whether its dead rows are in ``dead_<snapshot>``); None:
    #: nothing (one node, or a snapshot built before).
    shard_search: Mapping[str, Any] | None = None
    #: The layout a statement for one shard is composed over (ranklock.search.sharded): each table it names
    #: stands for that shard's own, and its dead rows are the shard's (``dead_<snapshot>``).
    on_shard: bool = False

    @classmethod
    def of(cls, snap: Mapping[str, Any]) -> Layout:
        """The layout of a resolved snapshot row (ranklock.snapshot.lifecycle.resolve_steps reads it)."""
        stats = snap.get("stats") or {}
        segments = tuple(SegmentInfo.of(r) for r in sorted(snap.get("segments") or [], key=lambda r: int(r["id"])))
        return cls(int(snap["id"]), segments, int(stats.get("dead_rows") or 0), segments, stats.get("shard_search"))

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(g.id for g in self.segments)

    @property
    def distributed(self) -> bool:
        """Its segments' tables are distributed over a Citus cluster (a collection's segments all are, or none)."""
        return any(g.shards for g in self.segments)

    @property
    def one_key(self) -> bool:
        """Its segments are placed by their partition value on a cluster, and all hold the same value."""
        return (
            all(g.distribution == SHARD_KEY for g in self.segments)
            and len({g.partition_key for g in self.segments}) == 1
        )

    @property
    def routed(self) -> bool:
        """The read skips some of the snapshot's segments."""
        return len(self.segments) != len(self.statistics)

    def only(self, ids: Sequence[int]) -> Layout:
        """The same snapshot read through fewer segments (routing; a merge's sources), its statistics whole."""
        keep = set(ids)
        return dataclasses.replace(self, segments=tuple(g for g in self.segments if g.id in keep))

    def full(self) -> Layout:
        """The snapshot read through all its segments."""
        return dataclasses.replace(self, segments=self.statistics)

    def on_one_shard(self) -> Layout:
        """The layout a statement run on each shard is composed over: its segments' tables read as plain tables.

        Each table name in that statement stands for the shard's own relation
        (the worker puts them in, ranklock.search.sharded), so it is the one-node
        statement: nothing in it is distributed, and no partition value is named.
        """

        def local(g: SegmentInfo) -> SegmentInfo:
            return dataclasses.replace(g, shards=None, distribution=None)

        return dataclasses.replace(
            self,
            segments=tuple(local(g) for g in self.segments),
            statistics=tuple(local(g) for g in self.statistics),
            on_shard=True,
        )


#: The kinds of a segment's tables that are distributed (the others are reference tables on a cluster).
KEYED: tuple[SegmentKind, ...] = ("chunks", "forward", "postings")


def union_sql(layout: Layout, kind: SegmentKind, columns: sql.Composable = sql.SQL("t.*")) -> sql.Composable:
    """``(SELECT <id>::bigint AS seg, <columns> FROM <kind>_<id> AS t UNION ALL …)``: one kind of table over the segments.

    Each arm is a plain scan of one segment's table, so the planner pulls the
    union up into an append relation: a filter, an ORDER BY with LIMIT, a join
    reach every arm and use its own indexes (measured: a Merge Append of one
    HNSW index scan per segment; an anti-join *inside* an arm would turn it
    into a join and lose its index order, which is why the dead rows are
    masked above the union).  Segment ids are written as literals: they name
    the tables too, and the statement is the segments'.  Every snapshot has at
    least one segment (an empty first build writes an empty one).
    """
    if not layout.segments:
        raise ValueError(f"snapshot {layout.snapshot_id} has no segment")
    # Segments placed by one partition value (a read routed to one tenant) are one shard on one node:
    # naming it in every arm lets Citus send the whole statement there.  Arms of several values
    # would name several shards, and Citus plans a union of differently pruned arms as a join it
    # refuses, so a read over several tenants names none and runs on every shard.
    keyed = kind in KEYED and layout.one_key
    arms = [
        sql.SQL("SELECT {id}::bigint AS {seg}, {cols} FROM {table} AS t{where}").format(
            id=sql.Literal(g.id),
            seg=sql.Identifier(SEGMENT_COLUMN),
            cols=columns,
            table=segment_table(kind, g.id),
            where=sql.SQL(" WHERE {}").format(g.key_sql("t")) if keyed else sql.SQL(""),
        )
        for g in layout.segments
    ]
    return sql.SQL("({})").format(sql.SQL(" UNION ALL ").join(arms))


def filter_rows_sql(layout: Layout) -> sql.Composable:
    """The rows a hard constraint is checked on: the segments' filter tables, or their chunk tables.

    The same columns by the same names either way (ranklock.snapshot.filter_table),
    with ``seg``: the filter tables when every segment read has a current one,
    since a union is one relation; dead rows masked by :func:`live_sql` as on the chunks.
    """
    return union_sql(layout, "fields") if has_filter_tables(layout) else chunks_sql(layout)


def has_filter_tables(layout: Layout) -> bool:
    """Every segment read has a current filter table (ranklock.snapshot.filter_table)."""
    return all(g.filter and g.filter.get("version") == FILTER_TABLE_VERSION for g in layout.segments)


def chunks_sql(layout: Layout) -> sql.Composable:
    """Every chunk row of the snapshot's segments, dead ones included (mask them with :func:`live_sql`)."""
    return union_sql(layout, "chunks")


def live_sql(layout: Layout, alias: str = "c") -> sql.Composable:
    """The predicate a row of the union (``alias.seg``, ``alias.row_id``) is live: not a dead row of the snapshot.

    TRUE when the snapshot masks nothing, so a snapshot of one segment reads its table plainly.
    """
    if layout.dead_rows == 0:
        return sql.SQL("TRUE")
    if layout.on_shard:
        # On one shard: its own dead rows, placed beside the chunks they mask (ranklock.snapshot.shards).
        return sql.SQL(
            "NOT EXISTS (SELECT 1 FROM {t} AS dead_row WHERE dead_row.seg = {a}.seg AND dead_row.row_id = {a}.row_id)"
        ).format(t=dead_table(layout.snapshot_id), a=sql.Identifier(alias))
    if layout.distributed:
        # A statement Citus plans over the shards (a count of what a filter admits): a correlated
        # subquery over a coordinator table cannot be pushed down; an uncorrelated one is computed
        # once, and its rows (a hashed NOT IN) go to every shard.  A search reads each shard's own.
        return sql.SQL(
            "({a}.seg, {a}.row_id) NOT IN (SELECT x.seg, x.row_id FROM ranklock.snapshot_dead_rows AS x "
            "WHERE x.snapshot_id = {sid})"
        ).format(sid=sql.Literal(layout.snapshot_id), a=sql.Identifier(alias))
    # Correlated: its alias must be one no caller names (a caller's row called x was shadowed by it once).
    return sql.SQL(
        "NOT EXISTS (SELECT 1 FROM ranklock.snapshot_dead_rows AS dead_row WHERE dead_row.snapshot_id = {sid} "
        "AND dead_row.seg = {a}.seg AND dead_row.row_id = {a}.row_id)"
    ).format(sid=sql.Literal(layout.snapshot_id), a=sql.Identifier(alias))


def segments_sql(snapshot: sql.Composable) -> sql.Composable:
    """A JSON list of the segments of ``snapshot`` (an expression of a snapshot id), for :meth:`Layout.of`."""
    return sql.SQL(
        "(SELECT coalesce(json_agg(json_build_object('id', g.id, 'documents', g.documents, 'chunks', g.chunks, "
        "'total_len', g.total_len, 'max_chunks', g.max_chunks, 'window_start', g.window_start, "
        "'window_end', g.window_end, 'partition_key', g.partition_key, 'bm25', g.stats -> 'bm25', "
        "'shards', g.stats -> 'shards', 'distribution', g.stats ->> 'distribution', 'filter', g.stats -> 'filter', 'counts', g.stats -> 'counts') "
        "ORDER BY g.id), "
        "'[]'::json) FROM ranklock.snapshot_segments AS ss JOIN ranklock.segments AS g ON g.id = ss.segment_id "
        "WHERE ss.snapshot_id = {})"
    ).format(snapshot)


def snapshot_totals(snap: Mapping[str, Any]) -> tuple[int, int, int]:
    """A resolved snapshot's live chunks, their total length and its most chunks of a document.

    Recorded when the snapshot was built (its statistics); a snapshot built
    before segments has one segment and no dead row, so its segment's totals
    are its own.
    """
    stats = snap.get("stats") or {}
    layout = Layout.of(snap)
    recorded = stats.get("chunks")
    chunks = int(recorded) if recorded is not None else sum(g.chunks for g in layout.segments)
    total_len = stats.get("total_len")
    if total_len is None:
        total_len = sum(g.total_len for g in layout.segments)
    max_chunks = int(stats.get("max_chunks_per_doc") or max((g.max_chunks for g in layout.segments), default=1))
    return chunks, int(total_len), max_chunks


def live_documents_sql(sid: str = "sid", ids: str = "ids") -> sql.Composable:
    """The live documents (``segment_id, doc_id, content_hash``) of the snapshot bound as ``sid``, of ``ids`` only
    unless that is NULL.

    A document is live in a snapshot when one of its segments holds it and
    the snapshot does not list it dead; exactly one version of an id is.
    """
    s, i = sql.Placeholder(sid), sql.Placeholder(ids)
    return sql.SQL(
        "SELECT sd.segment_id, sd.doc_id, sd.content_hash FROM ranklock.segment_documents AS sd "
        "JOIN ranklock.snapshot_segments AS ss ON ss.segment_id = sd.segment_id AND ss.snapshot_id = {s} "
        "WHERE ({i}::text[] IS NULL OR sd.doc_id = ANY ({i}::text[])) AND NOT EXISTS ("
        "SELECT 1 FROM ranklock.snapshot_dead AS x WHERE x.snapshot_id = {s} "
        "AND x.segment_id = sd.segment_id AND x.doc_id = sd.doc_id)"
    ).format(s=s, i=i)


def live_documents(db: Database, snapshot_id: int, ids: Sequence[str] | None = None) -> dict[str, tuple[int, str]]:
    """doc_id -> (segment id, content hash) of the live documents of a snapshot (of ``ids`` only, if given)."""
    rows = db.fetchall(live_documents_sql(), {"sid": snapshot_id, "ids": None if ids is None else list(ids)})
    return {r["doc_id"]: (int(r["segment_id"]), r["content_hash"]) for r in rows}


def live_count(db: Database, snapshot_id: int) -> int:
    """How many live documents a snapshot has (recorded when it was built)."""
    row = db.fetchone("SELECT doc_count FROM ranklock.snapshots WHERE id = %s", [snapshot_id])
    return int(row["doc_count"] or 0) if row else 0


def read_layout(db: Database, snapshot_id: int) -> Layout:
    """The layout of snapshot ``snapshot_id``, read from the catalog."""
    row = db.fetchone(
        sql.SQL("SELECT s.id, s.stats, {} AS segments FROM ranklock.snapshots AS s WHERE s.id = %s").format(
            segments_sql(sql.SQL("s.id"))
        ),
        [snapshot_id],
    )
    if row is None:
        raise ValueError(f"no snapshot {snapshot_id}")
    return Layout.of(row)


def collect_segments(conn: Any, collection_id: int) -> list[int]:
    """Delete the catalog rows of the collection's segments that no snapshot references; return their ids.

    The caller drops their tables in the same transaction (ranklock.snapshot.build.drop_segment_tables).
    A segment being written is referenced by its building snapshot from its first row on, so it is never
    collected under its builder.
    """
    rows = conn.execute(
        "DELETE FROM ranklock.segments AS g WHERE g.collection_id = %s AND NOT EXISTS ("
        "SELECT 1 FROM ranklock.snapshot_segments AS ss WHERE ss.segment_id = g.id) RETURNING g.id",
        [collection_id],
    ).fetchall()
    return sorted(int(r[0]) for r in rows)
