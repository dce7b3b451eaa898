"""A new snapshot's composition: its parent's segments, the dead documents, and its live totals.

A build (ranklock.snapshot.build) references its parent's segments, carries
the parent's dead documents over and adds the versions its write replaces or
removes (:func:`inherit`), writes its own segment if it has documents, then
sums up what is live (:func:`finish_totals`): counts and lengths (the BM25
statistics of the snapshot), and two digests that identify the live set
whatever its segmentation.  Everything here costs what the write changed
(its documents, the ones it masks, the number of segments), never the corpus.

The digests are sums modulo 2**256 of a sha256 per element: a document
(``doc_id``, content hash) for the corpus, a chunk (``doc_id``, chunk,
vector digest) for the vectors.  A sum does not depend on the order or the
grouping of its terms, and a dead element is subtracted, so the same live
documents give the same digest built in one go or by a hundred ingests.

>>> set_digest([])
'0000000000000000000000000000000000000000000000000000000000000000'
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..store.database import Database
from ..store.tables import segment_table

__all__ = ["Masked", "Totals", "finish_totals", "inherit", "recount_dead_terms", "record_segment", "set_digest"]

_MOD = 2**256


def _element(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x00".join(parts).encode("utf-8")).digest(), "big")


def set_digest(elements: Iterable[Sequence[str]], start: int = 0, *, minus: Iterable[Sequence[str]] = ()) -> str:
    """``start`` plus the sha256 of each element, minus those of ``minus``, modulo 2**256, as 64 hex digits."""
    total = start
    for e in elements:
        total += _element(*e)
    for e in minus:
        total -= _element(*e)
    return f"{total % _MOD:064x}"


@dataclass(frozen=True)
class Masked:
    """What a build's new dead documents took out of the parent's live set."""

    documents: int
    chunks: int
    total_len: int
    #: (doc_id, content_hash) of the documents, for the corpus digest.
    doc_hashes: tuple[tuple[str, str], ...]
    #: (doc_id, chunk, vector digest) of their chunks, for the vectors digest.
    vectors: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Totals:
    """A snapshot's live totals: its BM25 statistics, its digests, its segments."""

    documents: int
    chunks: int
    total_len: int
    max_chunks: int
    dead_rows: int
    corpus_digest: str
    vectors_digest: str
    #: Its segments (ranklock.snapshot.segments.SegmentInfo fields), ascending id.
    segments: tuple[dict[str, Any], ...]

    def stats(self) -> dict[str, Any]:
        """The snapshot's ``stats`` entries a search reads (ranklock.snapshot.segments.snapshot_totals)."""
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "total_len": self.total_len,
            "max_chunks_per_doc": self.max_chunks,
            "dead_rows": self.dead_rows,
            "corpus_sum": self.corpus_digest,
            "vectors_sum": self.vectors_digest,
        }


def inherit(
    db: Database,
    sid: int,
    parent_id: int | None,
    dead: Sequence[tuple[int, str]],
    *,
    drop: Sequence[int] = (),
) -> Masked:
    """Give snapshot ``sid`` its parent's segments and dead documents, plus ``dead`` (segment id, doc_id).

    In one transaction: the rows ``sid`` references (``snapshot_segments``),
    its dead documents, their chunks (``snapshot_dead_rows``) and how many of
    those hold each lexeme (``snapshot_dead_terms``, subtracted from the df).
    Segments in ``drop`` (a merge replaces them) are not inherited, nor their
    dead documents; the lexeme counts are then recounted from the dead rows left.
    """
    by_segment: dict[int, list[str]] = {}
    for seg, doc_id in dead:
        by_segment.setdefault(int(seg), []).append(doc_id)
    docs: list[tuple[str, str]] = []
    vectors: list[tuple[str, str, str]] = []
    chunks = total_len = 0
    with db.connection() as conn, conn.transaction():
        if parent_id is not None:
            dropped = [int(g) for g in drop]
            for table, cols, seg_col in (
                ("snapshot_segments", "segment_id", "segment_id"),
                ("snapshot_dead", "segment_id, doc_id", "segment_id"),
                ("snapshot_dead_rows", "seg, row_id", "seg"),
            ):
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} (snapshot_id, {c}) SELECT %s, {c} FROM {t} "
                        "WHERE snapshot_id = %s AND NOT ({s} = ANY (%s::bigint[]))"
                    ).format(t=sql.Identifier("ranklock", table), c=sql.SQL(cols), s=sql.Identifier(seg_col)),
                    [sid, parent_id, dropped],
                )
            if not dropped:
                conn.execute(
                    "INSERT INTO ranklock.snapshot_dead_terms (snapshot_id, lexeme, chunks) "
                    "SELECT %s, lexeme, chunks FROM ranklock.snapshot_dead_terms WHERE snapshot_id = %s",
                    [sid, parent_id],
                )
            else:
                recount_dead_terms(conn, sid)
        for seg, ids in sorted(by_segment.items()):
            chunk_rows = segment_table("chunks", seg)
            conn.execute(
                "INSERT INTO ranklock.snapshot_dead (snapshot_id, segment_id, doc_id) "
                "SELECT %s, %s, unnest(%s::text[])",
                [sid, seg, ids],
            )
            got = conn.execute(
                sql.SQL(
                    "INSERT INTO ranklock.snapshot_dead_rows (snapshot_id, seg, row_id) "
                    "SELECT %s, %s, c.row_id FROM {} AS c WHERE c.doc_id = ANY (%s) RETURNING row_id"
                ).format(chunk_rows),
                [sid, seg, ids],
            ).fetchall()
            rows = [int(r[0]) for r in got]
            for r in conn.execute(
                sql.SQL(
                    "SELECT c.doc_id, c.chunk, c.vec_digest, c.doc_len, c.content_hash FROM {} AS c "
                    "WHERE c.row_id = ANY (%s)"
                ).format(chunk_rows),
                [rows],
            ).fetchall():
                vectors.append((r[0], str(r[1]), r[2]))
                total_len += int(r[3])
                chunks += 1
            docs += [
                (r[0], r[1])
                for r in conn.execute(
                    "SELECT doc_id, content_hash FROM ranklock.segment_documents WHERE segment_id = %s AND "
                    "doc_id = ANY (%s)",
                    [seg, ids],
                ).fetchall()
            ]
            # How many of the masked chunks hold each lexeme, added to the parent's counts.
            conn.execute(
                sql.SQL(
                    "INSERT INTO ranklock.snapshot_dead_terms AS d (snapshot_id, lexeme, chunks) "
                    "SELECT %s, t.lexeme, count(*) FROM {forward} AS f CROSS JOIN LATERAL unnest(f.tids) AS u(tid) "
                    "JOIN {terms} AS t ON t.term_id = u.tid WHERE f.row_id = ANY (%s) GROUP BY t.lexeme "
                    "ON CONFLICT (snapshot_id, lexeme) DO UPDATE SET chunks = d.chunks + EXCLUDED.chunks"
                ).format(forward=segment_table("forward", seg), terms=segment_table("terms", seg)),
                [sid, rows],
            )
    return Masked(len(docs), chunks, total_len, tuple(docs), tuple(vectors))


def recount_dead_terms(conn: Any, sid: int) -> None:
    """``snapshot_dead_terms`` of ``sid`` counted anew from its dead rows, segment by segment."""
    segs = [
        int(r[0])
        for r in conn.execute(
            "SELECT DISTINCT seg FROM ranklock.snapshot_dead_rows WHERE snapshot_id = %s ORDER BY 1", [sid]
        ).fetchall()
    ]
    for seg in segs:
        conn.execute(
            sql.SQL(
                "INSERT INTO ranklock.snapshot_dead_terms AS d (snapshot_id, lexeme, chunks) "
                "SELECT %s, t.lexeme, count(*) FROM {forward} AS f CROSS JOIN LATERAL unnest(f.tids) AS u(tid) "
                "JOIN {terms} AS t ON t.term_id = u.tid WHERE f.row_id IN ("
                "SELECT x.row_id FROM ranklock.snapshot_dead_rows AS x WHERE x.snapshot_id = %s AND x.seg = %s) "
                "GROUP BY t.lexeme ON CONFLICT (snapshot_id, lexeme) DO UPDATE SET chunks = d.chunks + EXCLUDED.chunks"
            ).format(forward=segment_table("forward", seg), terms=segment_table("terms", seg)),
            [sid, sid, seg],
        )


def record_segment(db: Database, segment_id: int, index_build: dict[str, Any]) -> None:
    """Fill the catalog row of a segment just written from its chunk table: counts, lengths, digests."""
    table = segment_table("chunks", segment_id)
    with db.connection() as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT count(DISTINCT doc_id), count(*), coalesce(sum(doc_len), 0), coalesce(max(chunk) + 1, 0) FROM {}"
            ).format(table)
        ).fetchone()
        assert row is not None  # an aggregate always returns one row
        vectors = set_digest(
            (r[0], str(r[1]), r[2])
            for r in conn.execute(sql.SQL("SELECT doc_id, chunk, vec_digest FROM {}").format(table)).fetchall()
        )
        corpus = set_digest(
            (r[0], r[1])
            for r in conn.execute(
                "SELECT doc_id, content_hash FROM ranklock.segment_documents WHERE segment_id = %s", [segment_id]
            ).fetchall()
        )
        conn.execute(
            "UPDATE ranklock.segments SET documents = %s, chunks = %s, total_len = %s, max_chunks = %s, "
            "stats = stats || %s WHERE id = %s",
            [
                row[0],
                row[1],
                row[2],
                row[3],
                Jsonb({"corpus_sum": corpus, "vectors_sum": vectors, "index_build": index_build}),
                segment_id,
            ],
        )


def _parent_totals(db: Database, parent_id: int) -> dict[str, Any]:
    """The parent's live totals and digests: recorded, or (a snapshot built before segments) recounted once."""
    row = db.fetchone("SELECT stats FROM ranklock.snapshots WHERE id = %s", [parent_id])
    stats: dict[str, Any] = dict(row["stats"] or {}) if row else {}
    if "corpus_sum" in stats and "total_len" in stats:
        return stats
    seg = db.fetchone("SELECT total_len, max_chunks FROM ranklock.segments WHERE id = %s", [parent_id])
    table = segment_table("chunks", parent_id)
    vectors = set_digest(
        (r["doc_id"], str(r["chunk"]), r["vec_digest"])
        for r in db.fetchall(sql.SQL("SELECT doc_id, chunk, vec_digest FROM {}").format(table))
    )
    corpus = set_digest(
        (r["doc_id"], r["content_hash"])
        for r in db.fetchall(
            "SELECT doc_id, content_hash FROM ranklock.segment_documents WHERE segment_id = %s", [parent_id]
        )
    )
    return {
        **stats,
        "total_len": int(seg["total_len"]) if seg else 0,
        "max_chunks_per_doc": int(seg["max_chunks"]) if seg else 1,
        "dead_rows": 0,
        "corpus_sum": corpus,
        "vectors_sum": vectors,
    }


def finish_totals(db: Database, sid: int, masked: Masked, *, merged: bool = False) -> Totals:
    """The live totals of snapshot ``sid``: its parent's, plus the segments it wrote, minus what it masked.

    ``merged``: its segment holds documents its parent already had (a merge), so it adds nothing.
    """
    snap = db.fetchone("SELECT parent_id FROM ranklock.snapshots WHERE id = %s", [sid])
    parent_id = snap["parent_id"] if snap else None
    base: dict[str, Any] = _parent_totals(db, int(parent_id)) if parent_id is not None else {}
    # The segments this build wrote (a merge's holds what its parent had: it adds nothing).
    owned = (
        []
        if merged
        else db.fetchall(
            "SELECT g.documents, g.chunks, g.total_len, g.stats FROM ranklock.segments AS g WHERE g.created_by = %s",
            [sid],
        )
    )
    segments = db.fetchall(
        "SELECT g.id, g.documents, g.chunks, g.total_len, g.max_chunks, g.window_start, g.window_end, "
        "g.partition_key FROM ranklock.snapshot_segments AS ss JOIN ranklock.segments AS g ON g.id = ss.segment_id "
        "WHERE ss.snapshot_id = %s ORDER BY g.id",
        [sid],
    )
    dead = db.fetchone("SELECT count(*) AS n FROM ranklock.snapshot_dead_rows WHERE snapshot_id = %s", [sid])

    def plus(key: str, own_key: str) -> int:
        return int(base.get(key) or 0) + sum(int(o[own_key]) for o in owned)

    corpus = int(base.get("corpus_sum") or "0", 16) + sum(int(o["stats"]["corpus_sum"], 16) for o in owned)
    vectors = int(base.get("vectors_sum") or "0", 16) + sum(int(o["stats"]["vectors_sum"], 16) for o in owned)
    return Totals(
        documents=plus("documents", "documents") - masked.documents,
        chunks=plus("chunks", "chunks") - masked.chunks,
        total_len=plus("total_len", "total_len") - masked.total_len,
        # Of every segment, dead documents included: an upper bound, which is all a search needs of it.
        max_chunks=max((int(g["max_chunks"]) for g in segments), default=0),
        dead_rows=int(dead["n"]) if dead else 0,
        corpus_digest=set_digest([], corpus, minus=masked.doc_hashes),
        vectors_digest=set_digest([], vectors, minus=masked.vectors),
        segments=tuple({k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in g.items()} for g in segments),
    )
