"""Every table of a segment and of a snapshot, named in one place.

A *segment* (ranklock.snapshot.segments) owns one table of each kind below
in the ``ranklock_data`` schema, named ``<kind>_<segment id>``; a segment's
id is the id of the snapshot whose build wrote it.  A *snapshot* owns its
value counts.  Whatever creates, drops or reaps them takes their names from
here, so a new kind of table can never be left behind by a drop or a reap
that did not know about it::

    chunks        the chunks: text, tsvector, vector, typed fields (ranklock.snapshot.build)
    terms         BM25 terms: df, idf, impact quantiles (ranklock.snapshot.lexical_stats)
    forward       BM25 forward index: each chunk's terms, term frequencies and weights
    postings      BM25 postings in impact order
    dense         BM25 weights of the frequent terms as float4 sparsevec blocks (made by lexical stats)
    fields        what a hard constraint reads of each chunk: typed fields, effective dates
                  (ranklock.snapshot.filter_table)
    counts        per-value document and chunk counts of typed fields, made on first use
                  (ranklock.search.scope)

    valuecounts   per snapshot: the same counts of its dead rows only, subtracted from its
                  segments' (ranklock.search.scope)
    dead          per snapshot of a sharded collection: its dead rows, each beside the chunk it
                  masks on the shard holding it (ranklock.snapshot.shards)

On a Citus cluster one more table, shared by every sharded collection of one shard count::

    anchors       one row on each shard: what a search's query phase fans out over
                  (ranklock.snapshot.shards, ranklock.search.sharded)

Example::

    >>> segment_table("chunks", 12).as_string(None)
    '"ranklock_data"."chunks_12"'
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from psycopg import sql

__all__ = [
    "CHUNK_COLUMNS",
    "SCHEMA",
    "SEGMENT_KINDS",
    "SEGMENT_COLUMN",
    "SHARD_KEY",
    "ADDED_COLUMNS",
    "ChunkColumn",
    "anchor_table",
    "SegmentKind",
    "chunk_columns_ddl",
    "field_index_name",
    "segment_table",
    "segment_table_name",
    "segment_table_names",
    "dead_table",
    "dead_table_name",
    "snapshot_table",
    "snapshot_table_name",
    "snapshot_table_names",
]

SCHEMA = "ranklock_data"
#: On a Citus cluster, the column a partitioned collection's segment tables are distributed by: the
#: segment's partition value in every row (ranklock.snapshot.shards).
SHARD_KEY = "shard_key"
#: The column :func:`ranklock.snapshot.segments.union_sql` puts beside a segment table's own in every row of
#: a union over a snapshot's segments: the id of the segment the row is from.
SEGMENT_COLUMN = "seg"
#: The columns the SQL adds to a segment table's rows, beside the chunk table's own and the typed fields:
#: a typed field of one of these names would give a row two columns of one name (``SELECT seg, t.*``), and
#: every statement that names it would fail as ambiguous; ranklock.collection reserves them.
ADDED_COLUMNS: tuple[str, ...] = (SEGMENT_COLUMN, SHARD_KEY)
SegmentKind = Literal["chunks", "terms", "forward", "postings", "dense", "fields", "counts"]
#: Every kind of table a segment owns.
SEGMENT_KINDS: tuple[SegmentKind, ...] = ("chunks", "terms", "forward", "postings", "dense", "fields", "counts")


def segment_table_name(kind: SegmentKind, segment_id: int) -> str:
    """The unqualified name of a segment's table of ``kind``, e.g. ``chunks_12``."""
    if kind not in SEGMENT_KINDS:
        raise ValueError(f"unknown segment table kind {kind!r}; known: {', '.join(SEGMENT_KINDS)}")
    return f"{kind}_{int(segment_id)}"


def segment_table(kind: SegmentKind, segment_id: int) -> sql.Identifier:
    """The schema-qualified identifier of a segment's table of ``kind``."""
    return sql.Identifier(SCHEMA, segment_table_name(kind, segment_id))


def segment_table_names(segment_id: int) -> list[str]:
    """The unqualified names of every table a segment may own, in ``SEGMENT_KINDS`` order."""
    return [segment_table_name(k, segment_id) for k in SEGMENT_KINDS]


def snapshot_table_name(snapshot_id: int) -> str:
    """The unqualified name of the one table a snapshot owns: its dead rows' value counts."""
    return f"valuecounts_{int(snapshot_id)}"


def snapshot_table(snapshot_id: int) -> sql.Identifier:
    """The schema-qualified identifier of a snapshot's (dead rows') value-counts table."""
    return sql.Identifier(SCHEMA, snapshot_table_name(snapshot_id))


def dead_table_name(snapshot_id: int) -> str:
    """The unqualified name of a sharded snapshot's dead rows, placed beside the chunks they mask."""
    return f"dead_{int(snapshot_id)}"


def dead_table(snapshot_id: int) -> sql.Identifier:
    """The schema-qualified identifier of a sharded snapshot's dead rows (:func:`dead_table_name`)."""
    return sql.Identifier(SCHEMA, dead_table_name(snapshot_id))


def snapshot_table_names(snapshot_id: int) -> list[str]:
    """The unqualified names of every table a snapshot may own itself: its value counts, its placed dead rows."""
    return [snapshot_table_name(snapshot_id), dead_table_name(snapshot_id)]


def anchor_table(shards: int) -> sql.Identifier:
    """The table with one row on each of ``shards`` shards, shared by every collection of that shard count."""
    return sql.Identifier(SCHEMA, f"anchors_{int(shards)}")


@dataclass(frozen=True)
class ChunkColumn:
    """One column of every chunk table."""

    name: str
    #: Type and constraints as in CREATE TABLE; ``{dim}`` stands for the collection's vector size.
    ddl: str
    #: The binary COPY type when the builder writes the value; None when SQL computes it (tsv, doc_len).
    copy_type: str | None


#: The chunk table's own columns, in CREATE TABLE order; the collection's typed
#: fields follow them.  The order is the physical layout and must not change:
#: fixed-width columns first, then the vector (stored inline, see
#: ranklock.snapshot.build), so that reaching it never walks over a
#: variable-width column.
CHUNK_COLUMNS: tuple[ChunkColumn, ...] = (
    ChunkColumn("row_id", "bigint PRIMARY KEY", "bigint"),
    ChunkColumn("chunk", "integer NOT NULL", "integer"),
    ChunkColumn("char_start", "integer NOT NULL", "integer"),
    ChunkColumn("char_end", "integer NOT NULL", "integer"),
    ChunkColumn("doc_len", "integer NOT NULL", None),
    ChunkColumn("embedding", "vector({dim}) NOT NULL", "vector"),
    ChunkColumn("doc_id", 'text COLLATE "C" NOT NULL', "text"),
    ChunkColumn("content_hash", "text NOT NULL", "text"),
    ChunkColumn("text", "text NOT NULL", "text"),
    ChunkColumn("text_sha256", "text NOT NULL", "text"),
    ChunkColumn("tsv", "tsvector NOT NULL", None),
    ChunkColumn("embedder_id", "text NOT NULL", "text"),
    ChunkColumn("vec_digest", "text NOT NULL", "text"),
    ChunkColumn("effective_from", "timestamptz", "timestamptz"),
    ChunkColumn("effective_to", "timestamptz", "timestamptz"),
)


def chunk_columns_ddl(dim: int) -> list[sql.Composable]:
    """The CREATE TABLE column definitions of :data:`CHUNK_COLUMNS` for vectors of ``dim``."""
    return [
        sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.ddl).format(dim=sql.Literal(dim)))
        for c in CHUNK_COLUMNS
    ]


#: PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1); a longer one is cut to it, with a NOTICE.
MAX_IDENTIFIER_BYTES = 63


def field_index_name(table_name: str, field: str) -> str:
    """The name of the index of typed field ``field`` on the table ``table_name``: ``<table>_f_<field>``.

    PostgreSQL cuts a name past 63 bytes, so two long fields that share their first
    fifty-odd characters would be given one index name and the second CREATE INDEX would
    fail; a name that would be cut keeps a prefix of the field and ends in a digest of
    the whole field name instead, which no two fields share.

    >>> field_index_name("chunks_12", "year")
    'chunks_12_f_year'
    >>> len(field_index_name("chunks_12", "k" * 63))
    63
    """
    name = f"{table_name}_f_{field}"
    if len(name.encode("utf-8")) <= MAX_IDENTIFIER_BYTES:
        return name
    digest = hashlib.sha256(field.encode("utf-8")).hexdigest()[:12]
    head = f"{table_name}_f_"
    room = MAX_IDENTIFIER_BYTES - len(head) - len(digest) - 1
    return f"{head}{field[:room]}_{digest}"
