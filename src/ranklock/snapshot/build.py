"""Building a snapshot: a new segment for what a write changed, the rest shared with its parent.

A snapshot is a set of immutable segments plus the documents of those
segments that are no longer live (ranklock.snapshot.segments).  A build
writes one new segment holding the documents the write added or changed (a
chunk table ``ranklock_data.chunks_<id>``, written once with COPY and
indexed once, and its BM25 tables, under the id of the snapshot being
built), references its parent's segments without copying them, and records
as dead the parent's versions the write replaced or removed: it costs what
the write changes, not the corpus.  Readers of an active snapshot cannot be
disturbed by a build, and an HNSW graph is never rebuilt under a query.

The builder holds a session-level advisory lock on the snapshot id
(``ranklock.store.locks.BUILD``) from the INSERT of its row until the row is
``ready`` (manifest written) or ``failed``: nobody can see the row
``building`` with its lock free while its builder lives.  A build killed
mid-way (kill -9) loses its connection, and with it the lock;
:func:`reap_dead_builds` finds such snapshots (status ``building``, lock
free), marks them failed, forgets what they referenced and drops the
segment they were writing (``ranklock.store.tables``).  Every status change
is conditional on the status it expects (``WHERE status = 'building'``) and
checked, so a reaper and a finishing builder can never both win.

Embeddings already computed were committed to the embedding cache batch by
batch, so the next build resumes instead of re-embedding.
:func:`prepare_documents` does that chunking and embedding up front, so an
ingest can do its expensive part before it takes the collection's writer lock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ..collection import CollectionInfo
from ..embed.base import Embedder, vector_digest
from ..errors import SnapshotError
from ..ingest.chunker import Chunk, chunk_text, document_text
from ..ingest.loaders import Document
from ..ingest.normalize import text_sha256
from ..segmenting import Segmenting, SegmentKey
from ..store import locks
from ..store.database import Database
from ..store.tables import (
    CHUNK_COLUMNS,
    SCHEMA,
    chunk_columns_ddl,
    segment_table,
    segment_table_names,
    snapshot_table_names,
)
from . import composition
from .finish import finish_snapshot
from .indexes import create_indexes
from .segments import chunks_sql, live_documents_sql, live_sql
from .value_counts import complete_counts

__all__ = [
    "DIED",
    "BuildReport",
    "Prepared",
    "Progress",
    "build_snapshot",
    "chunk_table",
    "drop_segment_tables",
    "drop_snapshot_tables",
    "prepare_documents",
    "reap_dead_builds",
]

Progress = Callable[[str, int, int], None]
#: Texts per embedding call, per commit to the embedding cache and per step of the progress bar: one
#: forward pass of the default model (ranklock.embed.sentence.BATCH_SIZE), so the bar moves with each
#: pass (at 256 it sat still for the first 256 chunks, seconds on a laptop's CPU) and a killed build
#: loses at most one pass.  The commit per batch is one small COPY and INSERT, next to a forward
#: pass of the model on a CPU (bench/mirror.py --model times whole ingests side by side).
EMBED_BATCH = 32


def chunk_table(segment_id: int) -> sql.Identifier:
    """The chunk table of a segment (every table is named in ranklock.store.tables)."""
    return segment_table("chunks", segment_id)


def drop_segment_tables(conn: psycopg.Connection[Any], segment_id: int) -> list[str]:
    """Drop every table segment ``segment_id`` owns; return the names of those that existed, sorted."""
    return _drop(conn, segment_table_names(segment_id))


def drop_snapshot_tables(conn: psycopg.Connection[Any], snapshot_id: int) -> list[str]:
    """Drop the tables snapshot ``snapshot_id`` owns itself (its value counts, its placed dead rows), if they exist."""
    return _drop(conn, snapshot_table_names(snapshot_id))


def _drop(conn: psycopg.Connection[Any], names: list[str]) -> list[str]:
    existing = [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename = ANY(%s) ORDER BY tablename",
            [SCHEMA, names],
        ).fetchall()
    ]
    for name in names:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(SCHEMA, name)))
    return existing


def _noop(_stage: str, _done: int, _total: int) -> None:
    return None


@dataclass
class BuildReport:
    snapshot_id: int
    documents: int
    chunks: int
    embedded: int
    reused: int
    seconds: dict[str, float] = field(default_factory=dict)
    #: The manifest written when the snapshot was marked ready.
    manifest: dict[str, Any] = field(default_factory=dict)
    #: How the vector index of its new segment was built (ranklock.snapshot.indexes.create_indexes), for the manifest.
    index_build: dict[str, Any] = field(default_factory=dict)
    #: The segments it wrote (the first has its own id), none when it only masked documents (a delete).
    segments: list[int] = field(default_factory=list)


@dataclass
class Prepared:
    """Documents chunked and their vectors in the embedding cache, ahead of a build (:func:`prepare_documents`)."""

    #: (doc_id, content_hash) -> the document's chunks.
    chunks: dict[tuple[str, str], list[Chunk]]
    #: Texts embedded by the preparation (the others were in the cache already).
    embedded: int
    seconds: dict[str, float] = field(default_factory=dict)


def _chunks(coll: CollectionInfo, embedder: Embedder, d: Document) -> list[Chunk]:
    return chunk_text(document_text(d.title, d.body), embedder.tokenizer, coll.chunker.window, coll.chunker.overlap)


def prepare_documents(
    db: Database, coll: CollectionInfo, docs: Sequence[Document], embedder: Embedder, progress: Progress = _noop
) -> Prepared:
    """Chunk ``docs`` and put every chunk's vector in the embedding cache; the slow part of a build.

    Nothing of the collection is touched (the cache is keyed by the weights'
    and the text's sha256), so this runs before the writer lock is taken and
    a concurrent writer waits only for the database work.  A build given the
    result reuses its chunks and finds every vector cached.

    >>> prep = prepare_documents(db, coll, docs, embedder)   # doctest: +SKIP
    >>> build_snapshot(db, coll, docs, embedder, parent_id=None, prepared=prep)   # doctest: +SKIP
    """
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    chunks: dict[tuple[str, str], list[Chunk]] = {}
    texts: dict[str, str] = {}
    progress("chunk", 0, len(docs))
    for i, d in enumerate(docs):
        found = _chunks(coll, embedder, d)
        chunks[(d.doc_id, d.content_hash)] = found
        for ch in found:
            texts[text_sha256(ch.text)] = ch.text
        if i % 500 == 0:
            progress("chunk", i, len(docs))
    progress("chunk", len(docs), len(docs))
    seconds["chunk"] = time.perf_counter() - t0
    _, embedded = _embed_missing(db, embedder, texts, progress, seconds)
    return Prepared(chunks, embedded, seconds)


#: The failure recorded for a build whose builder died (read back by ranklock.snapshot.lifecycle).
DIED = "builder died"


def reap_dead_builds(db: Database, collection_id: int | None = None) -> list[int]:
    """Discard snapshots whose builder died: mark them failed, drop what they were writing; return their ids."""
    reaped: list[int] = []
    rows = db.fetchall(
        "SELECT id FROM ranklock.snapshots WHERE status = 'building'"
        + (" AND collection_id = %s" if collection_id is not None else "")
        + " ORDER BY id",
        [collection_id] if collection_id is not None else None,
    )
    for row in rows:
        sid = int(row["id"])
        with db.connection() as conn:
            got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", [locks.BUILD, sid]).fetchone()
            if not got or not got[0]:
                continue  # a live builder holds it
            try:
                with conn.transaction():
                    # Conditional: the build may have finished (ready) or failed
                    # between the SELECT above and the lock; then it is not dead.
                    cur = conn.execute(
                        "UPDATE ranklock.snapshots SET status = 'failed', "
                        "stats = stats || jsonb_build_object('failure', %s::text) "
                        "WHERE id = %s AND status = 'building'",
                        [DIED, sid],
                    )
                    if cur.rowcount == 1:
                        _forget(conn, sid)
                        reaped.append(sid)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", [locks.BUILD, sid])
    return reaped


def _coerce_fields(coll: CollectionInfo, doc: Document) -> list[Any]:
    """Typed field values for a document, validated (see ranklock.search.filters for the language)."""
    from ..ingest.fields import coerce_document_fields

    return coerce_document_fields(coll, doc)


def build_snapshot(
    db: Database,
    coll: CollectionInfo,
    docs: Sequence[Document],
    embedder: Embedder,
    *,
    parent_id: int | None,
    dead: Sequence[tuple[int, str]] = (),
    merge: Sequence[int] = (),
    progress: Progress = _noop,
    prepared: Prepared | None = None,
) -> BuildReport:
    """Build (but do not activate) a snapshot: ``parent_id``'s segments, ``dead`` masked, ``docs`` in a new one.

    With ``merge`` (segment ids of the parent; ``docs`` and ``dead`` empty) it
    is a merge: the live documents of those segments are copied into one new
    segment that replaces them, so the snapshot holds the same documents.

    ``docs`` are the documents the write adds or changes: they are written
    into a new segment (with the new snapshot's id), unless there are none
    (a delete: the snapshot only masks).  ``dead`` lists the (segment id,
    doc_id) of the parent's live versions the write replaces or removes.  A
    first build (no parent) always writes a segment, empty or not.  It is
    ``ready`` on return.  ``prepared`` (from :func:`prepare_documents`)
    supplies chunks already cut and vectors already cached for some of ``docs``.
    """
    t_all = time.perf_counter()
    seconds: dict[str, float] = {}
    field_values = {d.doc_id: _coerce_fields(coll, d) for d in docs}  # validate before writing anything
    ordered = sorted(docs, key=lambda d: d.doc_id.encode("utf-8"))

    with db.connection() as lock_conn:
        row = lock_conn.execute(
            "INSERT INTO ranklock.snapshots (collection_id, parent_id, status, builder_pid) "
            "VALUES (%s, %s, 'building', pg_backend_pid()) RETURNING id, pg_advisory_lock(%s, id::integer)::text",
            [coll.id, parent_id, locks.BUILD],
        ).fetchone()
        if row is None:  # INSERT ... RETURNING always returns the row
            raise RuntimeError("INSERT returned no row")
        # The lock is taken by the INSERT itself, so no reaper can ever see this
        # row 'building' with its lock free and discard a live build.
        sid = int(row[0])

        def held() -> None:
            _check_build_lock(lock_conn, sid, coll.name)

        try:
            t0 = time.perf_counter()
            # The parent's segments and dead documents first: referenced by this row,
            # no segment of them can be collected while it builds.
            masked = composition.inherit(db, sid, parent_id, dead, drop=merge)
            seconds["compose"] = time.perf_counter() - t0
            held()
            report = BuildReport(sid, 0, 0, 0, 0)
            if merge and parent_id is not None:
                report = _write_merged(db, coll, sid, parent_id, merge, progress, seconds, held)
            elif ordered or parent_id is None:
                report = _write_segments(
                    db, coll, ordered, field_values, embedder, sid, progress, seconds, prepared, held
                )
            totals = composition.finish_totals(db, sid, masked, merged=bool(merge))
            held()
            placed: dict[str, Any] = {}
            if coll.shards:
                from .shards import place_snapshot

                # What its searches need on the shards: its dead rows beside the chunks they mask.
                t6 = time.perf_counter()
                by_key = Segmenting.of(coll.segmenting).partition_field is not None
                placed = {"shard_search": place_snapshot(db, sid, coll.shards, by_key=by_key)}
                seconds["place"] = time.perf_counter() - t6
                held()
            # Finished while the lock is still held: released only once the
            # row says 'ready', a reaper never mistakes a finishing build for a
            # dead one and drops its tables under it.
            report.documents, report.chunks = totals.documents, totals.chunks
            # Every chunk whose vector this write did not compute: from the embedding cache or a shared segment.
            report.reused = max(report.chunks - report.embedded, 0)
            report.manifest = finish_snapshot(
                db,
                coll,
                embedder,
                sid,
                totals=totals,
                stats={"embedded": report.embedded, "reused": report.reused, "seconds": seconds, **placed},
                index_build=report.index_build,
                conn=lock_conn,
            )
            # The value counts its filtered searches read (ranklock.snapshot.value_counts): made by the
            # writer, for what it wrote, so a search only reads.
            t5 = time.perf_counter()
            complete_counts(db, sid, [f.name for f in coll.fields])
            seconds["value_counts"] = time.perf_counter() - t5
        except BaseException as exc:
            try:
                _discard(db, sid, exc)
            finally:
                # A lock connection that died took the lock with it: nothing to release.
                with contextlib.suppress(psycopg.Error):
                    lock_conn.execute("SELECT pg_advisory_unlock(%s, %s)", [locks.BUILD, sid])
            raise
        lock_conn.execute("SELECT pg_advisory_unlock(%s, %s)", [locks.BUILD, sid])
    seconds["total"] = time.perf_counter() - t_all
    report.seconds = seconds
    return report


def _check_build_lock(lock_conn: psycopg.Connection[Any], sid: int, name: str) -> None:
    """Raise SnapshotError unless this builder still holds snapshot ``sid``'s build lock.

    The lock lives with the connection that took it.  If that connection died
    (the server ended its backend), a reaper may already have marked the
    snapshot failed and dropped its tables, while the build went on over other
    pool connections: it must stop, and mark nothing ready.
    """
    try:
        row = lock_conn.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND classid::bigint = %s "
            "AND objid::bigint = %s AND objsubid = 2 AND granted",
            [locks.BUILD, sid],
        ).fetchone()
    except psycopg.Error as exc:
        reason = f"its lock connection ended: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
    else:
        if row is not None:
            return
        reason = "its lock is no longer held"
    raise SnapshotError(
        f"the build of snapshot {sid} of {name!r} lost its build lock ({reason}), so another process may take it "
        "for dead and drop its tables; it stopped, marked nothing ready and activated nothing. Ingest again."
    )


def _discard(db: Database, sid: int, exc: BaseException) -> None:
    """After a failed build: mark it failed and forget what it wrote, unless it had become ready."""
    reason = f"{type(exc).__name__}: {exc}"[:500]
    with db.connection() as conn, conn.transaction():
        conn.execute(
            "UPDATE ranklock.snapshots SET status = 'failed', stats = stats || jsonb_build_object('failure', %s::text) "
            "WHERE id = %s AND status = 'building'",
            [reason, sid],
        )
        status = conn.execute("SELECT status FROM ranklock.snapshots WHERE id = %s", [sid]).fetchone()
        # A snapshot that reached 'ready' keeps its tables (the failure came
        # after the finish); any other is garbage, whoever marked it failed.
        if status is None or status[0] != "ready":
            _forget(conn, sid)


def _forget(conn: psycopg.Connection[Any], sid: int) -> None:
    """A failed snapshot references nothing and owns nothing: its segment and tables go, its rows are emptied.

    Its row stays (``failed``, with the reason) so ``snapshot list`` says what happened.
    """
    for table in ("snapshot_segments", "snapshot_dead", "snapshot_dead_rows", "snapshot_dead_terms"):
        conn.execute(sql.SQL("DELETE FROM {} WHERE snapshot_id = %s").format(sql.Identifier("ranklock", table)), [sid])
    for row in conn.execute("DELETE FROM ranklock.segments WHERE created_by = %s RETURNING id", [sid]).fetchall():
        drop_segment_tables(conn, int(row[0]))
    drop_segment_tables(conn, sid)  # a build killed before its segment's catalog row: the tables by name
    drop_snapshot_tables(conn, sid)


def _embed_missing(
    db: Database, embedder: Embedder, texts: dict[str, str], progress: Progress, seconds: dict[str, float]
) -> tuple[dict[str, np.ndarray], int]:
    """Vectors for every text hash, from the cache where possible; returns (vectors, newly embedded)."""
    t0 = time.perf_counter()
    hashes = sorted(texts)
    vectors: dict[str, np.ndarray] = {}
    for start in range(0, len(hashes), 5000):
        part = hashes[start : start + 5000]
        with db.connection() as conn:
            cur = conn.execute(
                "SELECT text_sha256, embedding FROM ranklock.embedding_cache "
                "WHERE embedder_sha256 = %s AND text_sha256 = ANY(%s)",
                [embedder.sha256, part],
            )
            for h, v in cur.fetchall():
                vectors[h] = np.asarray(v.to_numpy(), dtype=np.float32)
    # Shortest first (then by text, so the order is fixed): each batch holds texts of about one length,
    # which pads least, and the same texts always meet the same batch-mates.
    missing = sorted((h for h in hashes if h not in vectors), key=lambda h: (len(texts[h]), texts[h]))
    seconds["cache_lookup"] = time.perf_counter() - t0
    t_embed = 0.0
    t_db = 0.0
    if missing:  # nothing to embed (all cached, or prepared before the build): no empty progress bar
        progress("embed", 0, len(missing))
    for start in range(0, len(missing), EMBED_BATCH):
        part = missing[start : start + EMBED_BATCH]
        t1 = time.perf_counter()
        mat = embedder.embed([texts[h] for h in part])
        t2 = time.perf_counter()
        if mat.shape[1] != embedder.dim:
            raise SnapshotError(f"embedder {embedder.id} returned dimension {mat.shape[1]}, declared {embedder.dim}.")
        # Committed batch by batch so a killed build resumes from here.
        # Staged and merged with ON CONFLICT: two builds embedding the same
        # text at once must not fail on the primary key.
        with db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE IF NOT EXISTS emb_stage (embedder_sha256 text, text_sha256 text, embedding vector) "
                "ON COMMIT DELETE ROWS"
            )
            with cur.copy(
                "COPY emb_stage (embedder_sha256, text_sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
            ) as cp:
                cp.set_types(["text", "text", "vector"])
                for h, v in zip(part, mat, strict=True):
                    cp.write_row([embedder.sha256, h, v])
            cur.execute(
                "INSERT INTO ranklock.embedding_cache SELECT * FROM emb_stage ORDER BY text_sha256 ON CONFLICT DO NOTHING"
            )
        t_db += time.perf_counter() - t2
        t_embed += t2 - t1
        for h, v in zip(part, mat, strict=True):
            vectors[h] = v
        progress("embed", min(start + EMBED_BATCH, len(missing)), len(missing))
    seconds["embed"] = t_embed
    seconds["embed_cache_write"] = t_db
    return vectors, len(missing)


def _write_segments(
    db: Database,
    coll: CollectionInfo,
    docs: list[Document],
    field_values: dict[str, list[Any]],
    embedder: Embedder,
    sid: int,
    progress: Progress,
    seconds: dict[str, float],
    prepared: Prepared | None,
    held: Callable[[], None],
) -> BuildReport:
    """Write ``docs`` into one segment per segment key (ranklock.segmenting; one for a collection that does not
    cut), the first with the building snapshot's own id, the others with ids from the same sequence."""
    seg = Segmenting.of(coll.segmenting)
    groups: dict[SegmentKey, list[Document]] = {}
    for d in docs:
        groups.setdefault(seg.key(d.metadata), []).append(d)
    if not groups:
        groups[SegmentKey()] = []  # an empty first build: one empty segment
    out = BuildReport(sid, 0, 0, 0, 0)
    keys = sorted(groups, key=lambda k: (k.window_start is None, k.window_start or 0, k.partition or ""))
    for i, key in enumerate(keys):
        seg_id = sid if i == 0 else _next_id(db)
        r = _write_segment(
            db, coll, groups[key], field_values, embedder, sid, seg_id, key, progress, seconds, prepared, held
        )
        out.documents += r.documents
        out.chunks += r.chunks
        out.embedded += r.embedded
        out.reused += r.reused
        out.index_build = out.index_build or r.index_build
        out.segments.append(seg_id)
        prepared = None  # counted once
    return out


def _next_id(db: Database) -> int:
    """A new segment id from the snapshots' sequence: its table names can never collide with another's."""
    row = db.fetchone("SELECT nextval('ranklock.snapshots_id_seq') AS id")
    assert row is not None
    return int(row["id"])


def _write_segment(
    db: Database,
    coll: CollectionInfo,
    docs: list[Document],
    field_values: dict[str, list[Any]],
    embedder: Embedder,
    sid: int,
    seg_id: int,
    seg_key: SegmentKey,
    progress: Progress,
    seconds: dict[str, float],
    prepared: Prepared | None,
    held: Callable[[], None],
) -> BuildReport:
    """Write segment ``seg_id`` of snapshot ``sid``, holding ``docs`` under ``seg_key``: chunks, vectors, indexes, BM25."""
    table = chunk_table(seg_id)
    t0 = time.perf_counter()
    # Document.content_hash hashes the whole document each time it is read:
    # once per document here, never once per chunk (a 5 MB document of 3,000
    # chunks spent 330 s re-hashing itself).
    doc_hashes = {d.doc_id: d.content_hash for d in docs}
    # 1. chunk (or take the chunks prepare_documents cut)
    rows: list[tuple[Document, int, int, int, str, str]] = []
    texts: dict[str, str] = {}
    done = prepared.chunks if prepared is not None else {}
    progress("chunk", 0, len(docs))
    for i, d in enumerate(docs):
        key = (d.doc_id, doc_hashes[d.doc_id])
        for ch in done[key] if key in done else _chunks(coll, embedder, d):
            h = text_sha256(ch.text)
            texts[h] = ch.text
            rows.append((d, ch.number, ch.start, ch.end, ch.text, h))
        if i % 500 == 0:
            progress("chunk", i, len(docs))
    progress("chunk", len(docs), len(docs))
    seconds["chunk"] = time.perf_counter() - t0

    # 2. embed what the cache lacks
    vectors, embedded = _embed_missing(db, embedder, texts, progress, seconds)
    held()  # each step below writes: only while the build lock is still this builder's

    # 3. write the table
    t1 = time.perf_counter()
    with db.connection() as conn:
        with conn.transaction():
            _create_segment(conn, coll, sid, seg_id, seg_key)
            conn.execute(
                "INSERT INTO ranklock.segment_documents (segment_id, doc_id, content_hash) "
                "SELECT %s::bigint, d.doc_id, d.content_hash FROM unnest(%s::text[], %s::text[]) AS d(doc_id, content_hash)",
                [seg_id, [d.doc_id for d in docs], [doc_hashes[d.doc_id] for d in docs]],
            )
        stage = sql.Identifier(f"stage_{seg_id}")
        conn.execute(sql.SQL("CREATE TEMP TABLE {} AS SELECT * FROM {} WITH NO DATA").format(stage, table))
        copied = [c for c in CHUNK_COLUMNS if c.copy_type is not None]
        types = [c.copy_type for c in copied if c.copy_type is not None] + [f.sql_type() for f in coll.fields]
        cols = [c.name for c in copied] + [f.name for f in coll.fields]
        progress("write", 0, len(rows))
        with (
            conn.cursor() as cur,
            cur.copy(
                sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
                    stage, sql.SQL(", ").join(sql.Identifier(c) for c in cols)
                )
            ) as cp,
        ):
            cp.set_types(types)
            for n, (d, number, start, end, text, h) in enumerate(rows):
                v = vectors[h]
                value = {
                    "row_id": n,
                    "doc_id": d.doc_id,
                    "chunk": number,
                    "char_start": start,
                    "char_end": end,
                    "content_hash": doc_hashes[d.doc_id],
                    "text": text,
                    "text_sha256": h,
                    "embedding": v,
                    "embedder_id": embedder.id,
                    "vec_digest": vector_digest(v),
                    "effective_from": _ts(d.metadata.get("effective_from")),
                    "effective_to": _ts(d.metadata.get("effective_to")),
                }
                cp.write_row([value[c.name] for c in copied] + field_values[d.doc_id])
                if n % 5000 == 0:
                    progress("write", n, len(rows))
        progress("write", len(rows), len(rows))
        # The tsvector is computed by the same SQL function the query side uses.
        col_list = sql.SQL(", ").join(sql.Identifier(c) for c in cols)
        with conn.transaction():
            conn.execute(
                sql.SQL(
                    "INSERT INTO {table} ({cols}, tsv, doc_len) "
                    "SELECT {cols}, t.tsv, (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0) "
                    "                       FROM unnest(t.tsv) AS u) "
                    "FROM {stage} AS s "
                    "CROSS JOIN LATERAL (SELECT ranklock.doc_tsvector(%s::regconfig, %s, s.text) AS tsv) AS t "
                    "ORDER BY s.row_id"
                ).format(table=table, cols=col_list, stage=stage),
                [coll.language, coll.accent],
            )
        conn.execute(sql.SQL("DROP TABLE {}").format(stage))
    seconds["write"] = time.perf_counter() - t1
    held()

    index_build = _index_segment(db, coll, seg_id, progress, seconds, held)
    if prepared is not None:
        # What the preparation embedded was found in the cache here: count it
        # as embedded, once, and its time as this build's.
        embedded += prepared.embedded
        for step, secs in prepared.seconds.items():
            seconds[step] = seconds.get(step, 0.0) + secs
    reused = max(len(texts) - embedded, 0)
    return BuildReport(sid, len(docs), len(rows), embedded, reused, index_build=index_build)


def _create_segment(
    conn: psycopg.Connection[Any], coll: CollectionInfo, sid: int, seg_id: int, key: SegmentKey
) -> None:
    """In the caller's transaction: segment ``seg_id``'s empty chunk table and its catalog row, referenced by ``sid``.

    The catalog row first, referenced by the building snapshot: a reaper that
    finds the build dead drops the tables of the segments it wrote.
    """
    table = chunk_table(seg_id)
    field_cols = [sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(f.sql_type())) for f in coll.fields]
    columns = chunk_columns_ddl(coll.dim) + field_cols
    conn.execute(
        "INSERT INTO ranklock.segments (id, collection_id, created_by, documents, chunks, total_len, max_chunks, "
        "window_start, window_end, partition_key) VALUES (%s, %s, %s, 0, 0, 0, 0, %s, %s, %s)",
        [seg_id, coll.id, sid, key.window_start, key.window_end, key.partition],
    )
    conn.execute("INSERT INTO ranklock.snapshot_segments (snapshot_id, segment_id) VALUES (%s, %s)", [sid, seg_id])
    conn.execute(
        sql.SQL("CREATE TABLE {table} ({columns}, UNIQUE (doc_id, chunk))").format(
            table=table, columns=sql.SQL(", ").join(columns)
        )
    )
    # Keep vectors inline in the heap row (the chunk text is what gets
    # TOASTed instead): an exact scan then reads each vector without a
    # detour through the TOAST table, which halves its cost.  A vector
    # must fit comfortably in an 8 kB page for that.  It comes right
    # after the fixed-width columns, so reaching it never walks over
    # the variable-width ones (~1-2 ms less per exact scan of 9,564
    # chunks, measured).
    if coll.dim <= 1500:
        conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN embedding SET STORAGE PLAIN").format(table))


def _index_segment(
    db: Database,
    coll: CollectionInfo,
    sid: int,
    progress: Progress,
    seconds: dict[str, float],
    held: Callable[[], None],
) -> dict[str, Any]:
    """Segment ``sid``'s indexes and BM25 tables, built once its rows are written; returns the vector index build."""
    from .filter_table import build_filter_table
    from .lexical_stats import build_lexical_stats

    def indexes() -> dict[str, Any]:
        t = time.perf_counter()
        progress("index", 0, 1)
        built = create_indexes(db, coll, sid)
        progress("index", 1, 1)
        seconds["index"] = time.perf_counter() - t
        held()
        return built

    index_build: dict[str, Any] = {}
    if not coll.shards:
        index_build = indexes()
    t3 = time.perf_counter()
    build_lexical_stats(db, sid)
    seconds["lexical_stats"] = time.perf_counter() - t3
    held()
    if not coll.shards:
        # A placed segment's statements join co-located tables only: its chunk table serves constraints.
        t5 = time.perf_counter()
        build_filter_table(db, sid)
        seconds["filter_table"] = time.perf_counter() - t5
        held()
    else:
        from .shards import distribute_segment

        # Built on the coordinator by the one-node statements (the same weights, bit for bit), then placed.
        t4 = time.perf_counter()
        distribute_segment(db, sid, coll.shards, by_key=Segmenting.of(coll.segmenting).partition_field is not None)
        seconds["distribute"] = seconds.get("distribute", 0.0) + time.perf_counter() - t4
        held()
        # Its indexes once its rows are on the shards: each shard's built by its worker, the workers in
        # parallel.  Built on the coordinator first, every one was built twice (the coordinator's copy,
        # then each shard's when the rows moved), and the vector index's graph once whole.
        index_build = indexes()
    composition.record_segment(db, sid, index_build)
    return index_build


def _write_merged(
    db: Database,
    coll: CollectionInfo,
    sid: int,
    parent_id: int,
    merged: Sequence[int],
    progress: Progress,
    seconds: dict[str, float],
    held: Callable[[], None],
) -> BuildReport:
    """Write segment ``sid`` holding the live documents of ``merged`` (segments of ``parent_id``), copied.

    Rows are copied as they are (text, vector, tsvector, fields: nothing is
    chunked or embedded again), renumbered in (doc_id, chunk) order, which is
    row-id order in every segment.
    """
    from .segments import read_layout

    t1 = time.perf_counter()
    parent = read_layout(db, parent_id).only(merged)
    first = parent.segments[0]
    key = SegmentKey(first.window_start, first.window_end, first.partition_key)
    table = chunk_table(sid)
    cols = [c.name for c in CHUNK_COLUMNS if c.name != "row_id"] + [f.name for f in coll.fields]
    col_list = sql.SQL(", ").join(sql.Identifier(c) for c in cols)
    source_cols = sql.SQL(", ").join(sql.SQL("c.{}").format(sql.Identifier(c)) for c in cols)
    with db.connection() as conn, conn.transaction():
        _create_segment(conn, coll, sid, sid, key)
        conn.execute(
            sql.SQL(
                "INSERT INTO {table} (row_id, {cols}) "
                'SELECT row_number() OVER (ORDER BY c.doc_id COLLATE "C", c.chunk) - 1, {src} '
                'FROM {chunks} AS c WHERE {live} ORDER BY c.doc_id COLLATE "C", c.chunk'
            ).format(table=table, cols=col_list, src=source_cols, chunks=chunks_sql(parent), live=live_sql(parent)),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO ranklock.segment_documents (segment_id, doc_id, content_hash) "
                "SELECT %(new)s::bigint, l.doc_id, l.content_hash FROM ({live}) AS l WHERE l.segment_id = ANY (%(merged)s)"
            ).format(live=live_documents_sql()),
            {"new": sid, "sid": parent_id, "ids": None, "merged": list(merged)},
        )
    seconds["write"] = time.perf_counter() - t1
    held()
    index_build = _index_segment(db, coll, sid, progress, seconds, held)
    return BuildReport(sid, 0, 0, 0, 0, index_build=index_build, segments=[sid])


def _ts(value: Any) -> Any:
    from ..ingest.fields import effective_timestamp
    from ..ingest.timestamps import TimestampError

    try:
        # Naive only for documents stored before ingest refused it: read as UTC, never the session's zone.
        return effective_timestamp(value)
    except TimestampError as exc:
        raise SnapshotError(f"bad effective_from/effective_to value {value!r}: use ISO 8601.") from exc
