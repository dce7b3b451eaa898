"""Purge: erase documents from everything ranklock stores, for an owner who asks to be forgotten.

A delete (ranklock.snapshot.ingest.delete_documents) makes a new snapshot
without a document; older snapshots keep it, which is what makes a rollback
possible.  A purge erases it: from every segment of the collection (so from
every retained snapshot), from the stored document versions, from the
embedding cache (the vectors of its chunks' texts that nothing else holds),
from the result cache, and from the query and answer logs whose entries
name it.  It breaks the immutability of the segments on purpose, in one
transaction under the collection's writer lock:

* a segment loses the document's rows (chunks, forward rows, postings,
  filter rows), its terms' document frequencies are decremented and the
  terms only it held are dropped (lexemes are words of its text); its dense
  blocks keep numbers at the rows' positions (weights, no text: they only
  ever bound scores, and nothing is left to score there); its value counts
  are dropped, to be counted anew by the next search that needs them;
* a snapshot where it was live gets its totals and manifest corrected (the
  manifest records the purge, so its hash changes: a replay of an older
  query reports that), one where it was dead forgets it;
* the log entries that name it are deleted (:class:`_Names`: an entry whose
  result lists it, whose request holds its id as a token, or whose query holds
  a word only the purged documents held in the collection), and the purge
  records which (``ranklock.purges``: ids, time, an HMAC of each purged id under
  the home's purge key (ranklock.snapshot.purge_key), never the content), so
  replaying one says it was purged instead of "not found".

Deleted rows leave their bytes behind (in heap pages, TOAST, indexes, the
statistics and the WAL), readable by anyone with the files or the catalog.  So
every table of a touched segment is rewritten in the same transaction by copy
and swap (ranklock.store.rewrite: searches read the old table meanwhile and
wait only for the swap; the copy holds the rows the purge's own snapshot sees,
so never the deleted ones) and analyzed again; after the commit the shared
tables it deleted from and ``pg_statistic`` are rewritten, checked and the WAL
retired, on the server and every Citus worker (ranklock.store.erasure).  A
rewrite keeps every row an older snapshot may still read: it first waits,
bounded by ``PurgeContext.wait``, for older transactions and replicas to let go
(ranklock.store.horizon), and afterwards reads the rewritten files for the
purged ids and words (ranklock.store.residue).  Only when nothing is found is
the record marked erased (``erased_at``); otherwise the outcome says where the
bytes remain and what held them, and the same purge run again finishes it (as
it does a purge killed after its commit).  The purge says what it could not
reach (a WAL archive, backups, replicas' free blocks, the disk's free blocks, a
worker it could not connect to, a field name only the documents had).

>>> eng.purge("resumes", ["cand-17"]).log_entries_removed   # doctest: +SKIP
3
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..collection import CollectionInfo, read_collection
from ..errors import DatabaseUnavailable, IngestError
from ..store import locks
from ..store.database import Database
from ..store.erasure import Erasure, erase_leftovers
from ..store.horizon import next_xid
from ..store.residue import needles
from ..store.rewrite import Copy, copy_table
from ..store.tables import (
    SCHEMA,
    SEGMENT_KINDS,
    SegmentKind,
    dead_table,
    dead_table_name,
    segment_table,
    segment_table_name,
    snapshot_table_name,
)
from .build import reap_dead_builds
from .composition import recount_dead_terms, set_digest
from .gate import open_gates, swap_behind_gates
from .indexes import index_build_settings
from .manifest import manifest_hash
from .purge_key import PurgeKey
from .value_counts import complete_counts
from .writer import writing

__all__ = ["SHARED_TABLES", "PurgeOutcome", "purge_documents"]


#: The shared tables a purge deletes or updates rows of: rewritten after it commits
#: (ranklock.store.erasure), so no old row version keeps a byte of the documents.
SHARED_TABLES = (
    "ranklock.documents",
    "ranklock.segment_documents",
    "ranklock.segments",
    "ranklock.snapshots",
    "ranklock.snapshot_dead",
    "ranklock.snapshot_dead_rows",
    "ranklock.snapshot_dead_terms",
    "ranklock.embedding_cache",
    "ranklock.result_cache",
    "ranklock.query_log",
    "ranklock.answer_log",
    # Its own records: rekeying the hashes of records made before keys leaves their old versions there.
    "ranklock.purges",
)
#: The shared tables whose files the purge checks for the purged ids and words after the rewrite: all but the
#: embedding cache, which holds hashes and vectors (no text; its random bytes would only give chance matches).
SCANNED_TABLES = tuple(t for t in SHARED_TABLES if t != "ranklock.embedding_cache")


@dataclass(frozen=True)
class PurgeContext:
    """Where a purge runs.

    ``key``: the home's purge key, which its record's id hashes are made with (ranklock.snapshot.purge_key);
    ``owned``: the servers are ranklock's own (the embedded one, the home's local cluster), so the purge
    may turn their ``wal_recycle`` off; ``wait``: the longest it waits, in all, for older sessions and
    replicas to let go of the deleted rows (ranklock.store.horizon); ``nudges``: how to make each local
    standby report its position at once, by its replication slot.
    """

    key: PurgeKey
    owned: bool = False
    wait: float = 60.0
    nudges: Mapping[str, Callable[[], None]] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class PurgeOutcome:
    """What a purge erased, by count; ``purge_id`` is its record in ``ranklock.purges``.

    ``rewritten``: the relations rewritten; ``remaining``: where the check after the rewrite still found
    bytes of the documents, in sentences with who held them: empty when the purge is finished
    (:attr:`finished`), else the record stays unfinished and the same purge run again finishes it;
    ``unreached``: what it could not reach, in sentences (ranklock.store.erasure).
    """

    purge_id: int
    documents: int
    segments: tuple[int, ...]
    snapshots: tuple[int, ...]
    versions: int
    cache_vectors: int
    log_entries_removed: int
    answers_removed: int
    rewritten: tuple[str, ...] = ()
    wal_removed: int = 0
    unreached: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()
    #: Whether the files of the rewritten tables were read for the purged ids and words (it needs a superuser).
    checked: bool = False
    #: Typed fields that only the purged documents had: their names stay in the collection's schema.
    fields_kept: tuple[str, ...] = ()
    #: Canary records (``<home>/canary``) the purged ids were taken out of (set by the engine).
    canary_records: tuple[str, ...] = ()
    #: True when this run only finished the rewrite of an earlier purge that was interrupted after its commit.
    resumed: bool = False
    #: Wall seconds of its parts: ``transaction`` (deletes, copy and swap, logs), ``erase`` (after the commit,
    #: of which ``wait``: waiting for older sessions and replicas to let go of the rows).
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Whether the check found no byte of the documents left in what the purge rewrote."""
        return not self.remaining


@dataclass(frozen=True)
class _Found:
    """What the purge's transaction learnt for the erasure after it: not stored anywhere."""

    #: Distributed segment tables, rewritten after the commit.
    later: list[str]
    #: Words (lexemes) only the purged documents held in the collection: looked for in the rewritten files.
    words: list[str]
    #: The purge transaction's id: the rows it deleted are gone once the horizon passes it.
    xid: int


def purge_documents(
    db: Database, coll: CollectionInfo, ids: Sequence[str], *, lock_wait: float, context: PurgeContext
) -> PurgeOutcome:
    """Erase the documents ``ids`` from every place ranklock stores them (see the module docstring)."""
    wanted = sorted(set(ids))
    if not wanted:
        raise IngestError("no document id to purge; name at least one, e.g. `ranklock purge docs d1`.")
    with writing(db, coll.id, coll.name, lock_wait):
        # A build killed mid-way left a segment with some of its tables: discarded first, as every
        # writer does, so the purge never meets a half-written segment.
        reap_dead_builds(db, coll.id)
        coll = read_collection(db, coll.name)
        t0 = time.perf_counter()
        with db.connection() as conn:
            try:
                with conn.transaction():
                    done = _purge(conn, coll, wanted, lock_wait, context.key)
            finally:
                open_gates(conn)  # closed for the swap; searches read the new tables from here
        if done is None:
            return _resume(db, coll, wanted, context)
        outcome, found = done
        outcome = dataclasses.replace(outcome, seconds={"transaction": round(time.perf_counter() - t0, 3)})
        erased = _erase(db, outcome, context, found.later, wanted, found.words, before=found.xid + 1)
        _remake_counts(db, coll, erased)
        return erased


def _purge(
    conn: Any, coll: CollectionInfo, wanted: list[str], lock_wait: float, key: PurgeKey
) -> tuple[PurgeOutcome, _Found] | None:
    """The purge's transaction; None when the collection holds none of ``wanted`` (nothing is changed)."""
    found = conn.execute(
        "SELECT sd.segment_id, sd.doc_id FROM ranklock.segment_documents AS sd "
        "JOIN ranklock.segments AS g ON g.id = sd.segment_id WHERE g.collection_id = %s AND sd.doc_id = ANY (%s) "
        "ORDER BY 1, 2",
        [coll.id, wanted],
    ).fetchall()
    versions = conn.execute(
        "SELECT count(*) FROM ranklock.documents WHERE collection_id = %s AND doc_id = ANY (%s)", [coll.id, wanted]
    ).fetchone()
    if not found and not (versions and versions[0]):
        return None
    segments = sorted({int(r[0]) for r in found})
    hashes: set[str] = set()
    gone: set[str] = set()
    for seg in segments:
        texts, lexemes = _purge_segment(conn, seg, wanted)
        hashes |= texts
        gone |= lexemes
    words = _only_theirs(conn, coll, gone)
    snapshots = _fix_snapshots(conn, segments, wanted)
    keys = {
        str(r[0])
        for r in conn.execute(
            "SELECT DISTINCT k FROM ranklock.documents AS d CROSS JOIN LATERAL jsonb_object_keys("
            "CASE WHEN jsonb_typeof(d.metadata) = 'object' THEN d.metadata ELSE '{}' END) AS k "
            "WHERE d.collection_id = %s AND d.doc_id = ANY (%s)",
            [coll.id, wanted],
        ).fetchall()
    }
    n_versions = conn.execute(
        "WITH d AS (DELETE FROM ranklock.documents WHERE collection_id = %s AND doc_id = ANY (%s) RETURNING 1) "
        "SELECT count(*) FROM d",
        [coll.id, wanted],
    ).fetchone()
    fields_kept = _fields_only_theirs(conn, coll, keys)
    cache = _purge_vectors(conn, coll, hashes)
    # Entries that name the documents (ranklock.snapshot.purge's rule, in _names): found now, while
    # searches run; deleted at the end, with those logged since.
    names = _Names(coll, wanted, words, _unheld(conn, coll))
    seen_query = _quoting(conn, "query_log", names)
    seen_answer = _quoting(conn, "answer_log", names)
    copies, later = _copy_segments(conn, segments)
    later += _placed_dead_tables(conn, snapshots)
    # The swap, behind the read gates of the snapshots that hold the touched segments
    # (ranklock.snapshot.gate), and from there to the commit as little as can be.
    swap_behind_gates(conn, snapshots, copies, _value_counts(conn, segments, snapshots), lock_wait=lock_wait)
    # Their value counts counted the purged rows and are dropped with the swap: said so in the catalog (a
    # search counts rows meanwhile), and made again from the rewritten tables after the commit.
    conn.execute("UPDATE ranklock.segments SET stats = stats - 'counts' WHERE id = ANY (%s)", [segments])
    conn.execute("UPDATE ranklock.snapshots SET stats = stats - 'dead_counts' WHERE id = ANY (%s)", [list(snapshots)])
    # The logs are locked against writes until the commit: a search that read the old segment tables
    # and logs after this point waits, then finds its snapshot's manifest changed and logs nothing
    # (ranklock.search.log), so no entry that quotes a purged document is written behind the purge.
    conn.execute(
        "LOCK TABLE ranklock.query_log, ranklock.answer_log, ranklock.result_cache IN SHARE ROW EXCLUSIVE MODE"
    )
    query_ids = [int(r[0]) for r in _delete_quoting(conn, "query_log", seen_query, names)]
    answers = _delete_quoting(conn, "answer_log", seen_answer, names)
    conn.execute("DELETE FROM ranklock.result_cache WHERE snapshot_id = ANY (%s)", [list(snapshots)])
    documents = len({r[1] for r in found})
    # Records made before keys held unkeyed hashes, which a dump confirms a guessed id with: keyed now.
    key.rekey(conn)
    row = conn.execute(
        "INSERT INTO ranklock.purges (collection_id, id_hashes, key_id, documents, snapshots, query_ids, answer_ids, "
        "answer_keys) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id, pg_current_xact_id()::text",
        [
            coll.id,
            [key.hash(coll.name, i) for i in wanted],
            key.key_id,
            documents,
            list(snapshots),
            query_ids,
            [r[0] for r in answers],
            sorted({r[1] for r in answers if r[1]}),
        ],
    ).fetchone()
    assert row is not None  # INSERT … RETURNING always returns the row
    purge_id = int(row[0])
    _record_in_manifests(conn, snapshots, purge_id)
    outcome = PurgeOutcome(
        purge_id=purge_id,
        documents=documents,
        segments=tuple(segments),
        snapshots=tuple(snapshots),
        versions=int(n_versions[0]) if n_versions else 0,
        cache_vectors=cache,
        log_entries_removed=len(query_ids),
        answers_removed=len(answers),
        rewritten=tuple(f"{c.schema}.{c.name}" for c in copies),
        fields_kept=tuple(fields_kept),
    )
    return outcome, _Found(later, sorted(words), int(row[1]))


def _only_theirs(conn: Any, coll: CollectionInfo, gone: set[str]) -> set[str]:
    """Of the lexemes the purge took out of the touched segments, those no segment of the collection holds now:
    words only the purged documents had (a name, an address), which a log entry that holds one quotes."""
    if not gone:
        return set()
    left = set(gone)
    for (seg,) in conn.execute(
        "SELECT id FROM ranklock.segments WHERE collection_id = %s ORDER BY id", [coll.id]
    ).fetchall():
        terms = segment_table("terms", int(seg))
        if not left or not conn.execute("SELECT to_regclass(%s)", [terms.as_string(None)]).fetchone()[0]:
            continue
        held = conn.execute(
            sql.SQL("SELECT lexeme FROM {} WHERE lexeme = ANY (%s) AND df > 0").format(terms), [sorted(left)]
        ).fetchall()
        left -= {str(r[0]) for r in held}
    return left


def _fields_only_theirs(conn: Any, coll: CollectionInfo, keys: set[str]) -> list[str]:
    """The collection's typed fields that were metadata keys of the purged versions and of no version left."""
    named = sorted(f.name for f in coll.fields if f.name in keys)
    if not named:
        return []
    rows = conn.execute(
        "SELECT f FROM unnest(%s::text[]) AS f WHERE NOT EXISTS (SELECT 1 FROM ranklock.documents AS d "
        "WHERE d.collection_id = %s AND d.metadata ? f) ORDER BY f",
        [named, coll.id],
    ).fetchall()
    return [str(r[0]) for r in rows]


@dataclass(frozen=True)
class _Names:
    """What names a purged document in a log entry (the rule docs/reliability.md states).

    An entry names it when its result (or rerank) lists one of its ids; when a string of its request
    (the query, a filter) holds one of its ids as a whole token; when its query (a question, for the
    answer log) holds a word that only the purged documents held in the collection (:func:`_only_theirs`),
    analysed as the collection analyses text (a query made of such words and others still quotes them:
    the entry goes whole); or when its query is made only of words no document of the collection holds
    now (``unheld``): nothing left answers it, and it may have been a search for what was purged.
    """

    coll: CollectionInfo
    ids: list[str]
    words: set[str]
    unheld: set[str]

    def params(self) -> dict[str, Any]:
        return {
            "c": self.coll.name,
            "ids": self.ids,
            "pats": [_token_pattern(i) for i in self.ids],
            "words": sorted(self.words),
            "unheld": sorted(self.unheld),
            "cfg": self.coll.language,
            "accent": self.coll.accent,
        }


def _token_pattern(doc_id: str) -> str:
    """A case-insensitive regular expression (PostgreSQL's) for ``doc_id`` as a whole token of a longer text.

    Every character that is not a letter or digit is escaped: in PostgreSQL's ARE a backslash before such
    a character makes it literal.
    """
    body = "".join(ch if ch.isalnum() else "\\" + ch for ch in doc_id)
    return f"(^|[^[:alnum:]_]){body}($|[^[:alnum:]_])"


# A string anywhere in an entry's request that holds one of the ids as a token.
_REQUEST_NAMES = (
    "EXISTS (SELECT 1 FROM jsonb_path_query(t.request, 'strict $.**') AS v "
    "WHERE jsonb_typeof(v) = 'string' AND (v #>> '{}') ~* ANY (%(pats)s::text[]))"
)
# The entry's query text (a question) holds a word only the purged documents held, or holds only words no
# document of the collection holds now.
_WORDS = (
    "(t.request ? {key} AND EXISTS (SELECT 1 FROM (SELECT tsvector_to_array(ranklock.doc_tsvector("
    "%(cfg)s::regconfig, %(accent)s, t.request ->> {key})) AS q) AS x WHERE cardinality(x.q) > 0 "
    "AND (x.q && %(words)s::text[] OR x.q <@ %(unheld)s::text[])))"
)
_QUERY_WORDS = _WORDS.format(key="'query'")
_QUESTION_WORDS = _WORDS.format(key="'question'")
#: Which entries of each log name one of the purged documents (:class:`_Names`): a condition on the log row ``t``.
_QUOTES = {
    "query_log": sql.SQL(
        "(EXISTS (SELECT 1 FROM unnest(%(ids)s::text[]) AS x WHERE "
        "jsonb_path_exists(t.result, '$.** ? (@ == $id)', jsonb_build_object('id', x)) "
        "OR jsonb_path_exists(coalesce(t.rerank, '{}'), '$.** ? (@ == $id)', jsonb_build_object('id', x))) "
        f"OR {_REQUEST_NAMES} OR {_QUERY_WORDS})"
    ),
    "answer_log": sql.SQL(
        "(EXISTS (SELECT 1 FROM jsonb_array_elements(t.chunks) AS c WHERE c ->> 1 = ANY (%(ids)s::text[])) "
        f"OR {_REQUEST_NAMES} OR {_QUESTION_WORDS})"
    ),
}
#: What the purge record keeps of a removed entry: its id, and the answer log's public answer id.
_RETURNING = {"query_log": sql.SQL("t.id, NULL"), "answer_log": sql.SQL("t.id, t.answer_id")}


#: Where each log keeps the text a search was asked with.
_TEXT_KEY = {"query_log": "query", "answer_log": "question"}


def _unheld(conn: Any, coll: CollectionInfo, *, since: int = 0, logs: Sequence[str] = tuple(_TEXT_KEY)) -> set[str]:
    """The words of the collection's logged queries and questions (of entries after ``since``) that no segment of
    the collection holds now, analysed as the collection analyses text."""
    lexemes: set[str] = set()
    for log in logs:
        key = _TEXT_KEY[log]
        rows = conn.execute(
            sql.SQL(
                "SELECT DISTINCT l FROM {} AS t CROSS JOIN LATERAL unnest(tsvector_to_array(ranklock.doc_tsvector("
                "%(cfg)s::regconfig, %(accent)s, t.request ->> %(key)s))) AS l "
                "WHERE t.collection = %(c)s AND t.id > %(since)s AND t.request ? %(key)s"
            ).format(sql.Identifier("ranklock", log)),
            {"cfg": coll.language, "accent": coll.accent, "key": key, "c": coll.name, "since": since},
        ).fetchall()
        lexemes |= {str(r[0]) for r in rows}
    return _only_theirs(conn, coll, lexemes)


def _quoting(conn: Any, log: str, names: _Names) -> tuple[list[int], int]:
    """The entries of ``log`` that name the documents, and the highest id of the log when they were found."""
    table = sql.Identifier("ranklock", log)
    top = conn.execute(sql.SQL("SELECT coalesce(max(id), 0) FROM {}").format(table)).fetchone()
    found = conn.execute(
        sql.SQL("SELECT t.id FROM {} AS t WHERE t.collection = %(c)s AND t.id <= %(top)s AND {}").format(
            table, _QUOTES[log]
        ),
        {**names.params(), "top": top[0]},
    ).fetchall()
    return [int(r[0]) for r in found], int(top[0])


def _delete_quoting(conn: Any, log: str, seen: tuple[list[int], int], names: _Names) -> list[tuple[int, str | None]]:
    """Delete the entries found by :func:`_quoting` and those of ``log`` written since that name the documents."""
    found, top = seen
    # The words of the entries written since that nothing holds were not known when ``names`` was made.
    names = dataclasses.replace(names, unheld=names.unheld | _unheld(conn, names.coll, since=top, logs=[log]))
    rows = conn.execute(
        sql.SQL(
            "DELETE FROM {} AS t WHERE t.id = ANY (%(found)s) OR (t.id > %(top)s AND t.collection = %(c)s AND {}) "
            "RETURNING {}"
        ).format(sql.Identifier("ranklock", log), _QUOTES[log], _RETURNING[log]),
        {**names.params(), "found": found, "top": top},
    ).fetchall()
    return [(int(r[0]), r[1]) for r in rows]


def _value_counts(conn: Any, segments: list[int], snapshots: list[int]) -> list[sql.Identifier]:
    """The value counts of the touched segments and snapshots, to drop at the swap: they counted the purged rows.

    Only writers make them (ranklock.snapshot.value_counts), and the purge holds the collection's
    writer lock; the advisory locks, taken here until the commit, keep out a writer of another
    collection's snapshot that shares none of these (a merge), for good measure.
    """
    for seg in segments:
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.SEGMENT_COUNTS, seg])
    for sid in snapshots:
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", [locks.VALUE_COUNTS, sid])
    names = [segment_table_name("counts", seg) for seg in segments] + [snapshot_table_name(sid) for sid in snapshots]
    return [
        sql.Identifier(SCHEMA, str(r[0]))
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename = ANY (%s) ORDER BY tablename",
            [SCHEMA, names],
        ).fetchall()
    ]


def _copy_segments(conn: Any, segments: list[int]) -> tuple[list[Copy], list[str]]:
    """A copy of every table of the touched segments (every kind ranklock.store.tables names but their value
    counts, dropped at the swap), analyzed, to swap in.  Also the tables left to rewrite after the commit
    instead: a Citus cluster's distributed ones, whose shards ``VACUUM FULL`` reaches."""
    copies: list[Copy] = []
    later: list[str] = []
    index_build_settings(conn)
    for seg in segments:
        distributed = _distributed(conn, seg)
        for name in _existing_tables(conn, seg):
            if distributed:
                later.append(f"{SCHEMA}.{name}")
            else:
                copies.append(copy_table(conn, SCHEMA, name))
    return copies, later


def _exists(conn: Any, name: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [sql.Identifier(SCHEMA, name).as_string(conn)]).fetchone()
    return bool(row and row[0])


def _placed_dead_tables(conn: Any, snapshots: Sequence[int]) -> list[str]:
    """The placed dead rows of ``snapshots`` on a cluster (``dead_<snapshot>``): rewritten after the commit too."""
    return [f"{SCHEMA}.{dead_table_name(sid)}" for sid in snapshots if _exists(conn, dead_table_name(sid))]


def _distributed(conn: Any, seg: int) -> bool:
    row = conn.execute("SELECT stats -> 'shards' FROM ranklock.segments WHERE id = %s", [seg]).fetchone()
    return bool(row and row[0])


#: The kinds of segment table a purge rewrites; a segment's value counts it drops instead.
_REWRITTEN: tuple[SegmentKind, ...] = tuple(k for k in SEGMENT_KINDS if k != "counts")


def _existing_tables(conn: Any, seg: int) -> list[str]:
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename = ANY (%s) ORDER BY tablename",
            [SCHEMA, [segment_table_name(k, seg) for k in _REWRITTEN]],
        ).fetchall()
    ]


def _erase(
    db: Database,
    outcome: PurgeOutcome,
    context: PurgeContext,
    later: Sequence[str],
    ids: Sequence[str],
    words: Sequence[str],
    *,
    before: int,
) -> PurgeOutcome:
    """After the commit: what still holds the bytes is rewritten and checked (ranklock.store.erasure), and the
    record says so; it is marked erased only when the check found nothing left."""
    t0 = time.perf_counter()
    looked_for, short = needles(ids, words)
    left = erase_leftovers(
        db,
        Erasure(
            tables=SHARED_TABLES,
            distributed=later,
            scan=SCANNED_TABLES,
            before=before,
            needles=looked_for,
            owned=context.owned,
            wait=context.wait,
            nudges=context.nudges,
        ),
    )
    unreached = list(left.unreached)
    if short and left.checked:
        unreached.append(
            f"{short} of the purged ids are shorter than 5 characters: the check of the files looked for the "
            "others and for the words only the documents held, not for those (too short to tell from other bytes)"
        )
    # What the record keeps says how many field names stay, not which: a name may be the very thing erased.
    stored = list(unreached)
    if outcome.fields_kept:
        n = len(outcome.fields_kept)
        unreached.append(
            f"the typed field name(s) {', '.join(repr(f) for f in outcome.fields_kept)}: only the purged documents "
            "had them, and a purge leaves a collection's schema as it is (the name is in collections.fields, the "
            "filter tables' column and index names, the manifest of every snapshot since the field came and the "
            "canary records), so that filters, replays and the manifests of snapshots it did not touch keep "
            "their meaning; to be rid of a name, ingest the documents into a new collection and drop this one"
        )
        stored.append(f"{n} typed field name(s) only the purged documents had stay in the collection's schema")
    db.execute(
        "UPDATE ranklock.purges SET erased_at = CASE WHEN %s THEN clock_timestamp() END, unreached = %s WHERE id = %s",
        [not left.remaining, [*left.remaining, *stored], outcome.purge_id],
    )
    rewritten = (*outcome.rewritten, *left.rewritten)
    seconds = {**outcome.seconds, "erase": round(time.perf_counter() - t0, 3), "wait": left.waited_s}
    return dataclasses.replace(
        outcome,
        rewritten=rewritten,
        wal_removed=left.wal_removed,
        unreached=tuple(unreached),
        remaining=left.remaining,
        checked=left.checked,
        seconds=seconds,
    )


def _resume(db: Database, coll: CollectionInfo, wanted: list[str], context: PurgeContext) -> PurgeOutcome:
    """None of ``wanted`` is stored: finish the erasure of an unfinished purge of them, or say nothing is there."""
    key = context.key
    rows = db.fetchall(
        "SELECT id, key_id, id_hashes, documents, snapshots, query_ids, answer_ids FROM ranklock.purges "
        "WHERE collection_id = %s AND erased_at IS NULL ORDER BY id DESC",
        [coll.id],
    )
    mine = [
        r
        for r in rows
        if r["key_id"] in (key.key_id, None)
        and all(any(h in r["id_hashes"] for h in key.hashes(coll.name, i)) for i in wanted)
    ]
    if not mine:
        others = sorted({str(r["id"]) for r in rows if r["key_id"] not in (key.key_id, None)})
        elsewhere = (
            f" Unfinished purge(s) {', '.join(others)} of it were recorded with another home's purge key, so "
            "whether they erased these ids cannot be told here: run the purge again from that home (or with its "
            "purge.key)."
            if others
            else ""
        )
        raise IngestError(
            f"collection {coll.name!r} holds no document {', '.join(repr(i) for i in wanted[:10])} in any "
            f"snapshot; nothing was purged. Check the ids (a search hit's doc_id).{elsewhere}"
        )
    row = mine[0]
    outcome = PurgeOutcome(
        purge_id=int(row["id"]),
        documents=int(row["documents"]),
        segments=(),
        snapshots=tuple(int(s) for s in row["snapshots"]),
        versions=0,
        cache_vectors=0,
        log_entries_removed=len(row["query_ids"]),
        answers_removed=len(row["answer_ids"]),
        resumed=True,
    )
    # The segment tables were swapped in the purge's own transaction; the shared tables and the WAL
    # remain, and on a cluster the distributed segment tables (which ones the purge touched is not
    # recorded: all of the collection's).  The rows were deleted before this run began: the horizon
    # it waits for is now.  The words only the documents held are not known any more (nothing keeps
    # them): the check looks for the ids.
    with db.connection() as conn:
        later = [
            f"{SCHEMA}.{name}"
            for r in conn.execute(
                "SELECT id FROM ranklock.segments WHERE collection_id = %s ORDER BY id", [coll.id]
            ).fetchall()
            if _distributed(conn, int(r[0]))
            for name in _existing_tables(conn, int(r[0]))
        ]
        later += _placed_dead_tables(conn, outcome.snapshots)
        before = next_xid(conn)
    erased = _erase(db, outcome, context, later, wanted, (), before=before)
    _remake_counts(db, coll, erased)
    return erased


def _remake_counts(db: Database, coll: CollectionInfo, erased: PurgeOutcome) -> None:
    """The value counts the purge's swap dropped, made again from the rewritten tables.

    When the erasure could not reach a node (it says which, and stays unfinished), the counts cannot be
    made on it either: searches count rows meanwhile, and the same purge run again makes them.
    """
    try:
        for sid in erased.snapshots:
            complete_counts(db, sid, [f.name for f in coll.fields])
    except DatabaseUnavailable:
        if erased.finished:
            raise


def _purge_segment(conn: Any, seg: int, ids: list[str]) -> tuple[set[str], set[str]]:
    """Delete the documents' rows from segment ``seg``'s tables and correct its catalog row; their text hashes,
    and the lexemes the segment held only in them."""
    chunks, forward, postings = (
        segment_table("chunks", seg),
        segment_table("forward", seg),
        segment_table("postings", seg),
    )
    terms, dense = segment_table("terms", seg), segment_table("dense", seg)
    rows = conn.execute(
        sql.SQL(
            "SELECT row_id, doc_id, chunk, doc_len, vec_digest, text_sha256, content_hash FROM {} WHERE doc_id = ANY (%s)"
        ).format(chunks),
        [ids],
    ).fetchall()
    row_ids = [int(r[0]) for r in rows]
    # The df each purged chunk counted, per term of the segment: read, then subtracted in a second
    # statement (on a Citus cluster the terms are a reference table, which an UPDATE cannot join to
    # the distributed forward table).
    counted = conn.execute(
        sql.SQL(
            "SELECT u.tid, count(*) AS n FROM {forward} AS f CROSS JOIN LATERAL unnest(f.tids) AS u(tid) "
            "WHERE f.row_id = ANY (%s) GROUP BY u.tid ORDER BY u.tid"
        ).format(forward=forward),
        [row_ids],
    ).fetchall()
    conn.execute(
        sql.SQL(
            "UPDATE {terms} AS t SET df = t.df - x.n FROM unnest(%s::int[], %s::bigint[]) AS x(tid, n) "
            "WHERE x.tid = t.term_id"
        ).format(terms=terms),
        [[int(r[0]) for r in counted], [int(r[1]) for r in counted]],
    )
    for table in (forward, postings, chunks):
        conn.execute(sql.SQL("DELETE FROM {} WHERE row_id = ANY (%s)").format(table), [row_ids])
    # The filter table's rows go before its copy (ranklock.store.rewrite), which so holds none of them.
    # Its per-value counts counted the purged rows: they are dropped at the swap (:func:`_value_counts`).
    fields = segment_table("fields", seg)
    if conn.execute("SELECT to_regclass(%s)", [fields.as_string(None)]).fetchone()[0]:
        conn.execute(sql.SQL("DELETE FROM {} WHERE row_id = ANY (%s)").format(fields), [row_ids])
    # Terms only the purged documents held: their lexemes are words of the text.
    dropped = conn.execute(sql.SQL("DELETE FROM {} WHERE df <= 0 RETURNING term_id, lexeme").format(terms)).fetchall()
    gone = [int(r[0]) for r in dropped]
    if gone and conn.execute("SELECT to_regclass(%s)", [dense.as_string(None)]).fetchone()[0]:
        conn.execute(sql.SQL("DELETE FROM {} WHERE term_id = ANY (%s)").format(dense), [gone])
    docs = conn.execute(
        "DELETE FROM ranklock.segment_documents WHERE segment_id = %s AND doc_id = ANY (%s) RETURNING doc_id, "
        "content_hash",
        [seg, ids],
    ).fetchall()
    stats = conn.execute("SELECT stats FROM ranklock.segments WHERE id = %s", [seg]).fetchone()[0] or {}
    if "corpus_sum" in stats:
        stats["corpus_sum"] = set_digest([], int(stats["corpus_sum"], 16), minus=[(d[0], d[1]) for d in docs])
        stats["vectors_sum"] = set_digest(
            [], int(stats["vectors_sum"], 16), minus=[(r[1], str(r[2]), r[4]) for r in rows]
        )
    conn.execute(
        "UPDATE ranklock.segments SET documents = documents - %s, chunks = chunks - %s, total_len = total_len - %s, "
        "stats = %s WHERE id = %s",
        [len(docs), len(rows), sum(int(r[3]) for r in rows), Jsonb(stats), seg],
    )
    return {r[5] for r in rows}, {str(r[1]) for r in dropped}


def _fix_snapshots(conn: Any, segments: list[int], ids: list[str]) -> list[int]:
    """Correct every snapshot that references one of ``segments``: live totals where the documents were live,
    dead records where they were dead.  Returns the snapshots touched."""
    touched = [
        int(r[0])
        for r in conn.execute(
            "SELECT DISTINCT snapshot_id FROM ranklock.snapshot_segments WHERE segment_id = ANY (%s) ORDER BY 1",
            [segments],
        ).fetchall()
    ]
    for sid in touched:
        conn.execute("DELETE FROM ranklock.snapshot_dead WHERE snapshot_id = %s AND doc_id = ANY (%s)", [sid, ids])
        _recount(conn, sid)  # its dead rows' value counts go at the swap, with the old segment tables
    return touched


def _recount(conn: Any, sid: int) -> None:
    """A purged snapshot's live totals and dead records, counted anew from its segments (a purge is rare)."""
    segs = [
        int(r[0])
        for r in conn.execute(
            "SELECT segment_id FROM ranklock.snapshot_segments WHERE snapshot_id = %s ORDER BY 1", [sid]
        ).fetchall()
    ]
    # Dead rows whose chunk no longer exists (a purged document's) are forgotten.  Found first, then
    # deleted: a Citus coordinator cannot delete from its own table by a subquery over a distributed one.
    for seg in segs:
        dead = conn.execute(
            "SELECT array_agg(row_id) FROM ranklock.snapshot_dead_rows WHERE snapshot_id = %s AND seg = %s",
            [sid, seg],
        ).fetchone()[0]
        if not dead:
            continue
        kept = conn.execute(
            sql.SQL("SELECT coalesce(array_agg(row_id), '{{}}') FROM {} WHERE row_id = ANY (%s)").format(
                segment_table("chunks", seg)
            ),
            [dead],
        ).fetchone()[0]
        gone = sorted(set(dead) - set(kept))
        conn.execute(
            "DELETE FROM ranklock.snapshot_dead_rows WHERE snapshot_id = %s AND seg = %s AND row_id = ANY (%s)",
            [sid, seg, gone],
        )
        if gone and _exists(conn, dead_table_name(sid)):
            # On a cluster the same rows were placed beside their chunks, with their doc_id: erased too.
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE seg = %s AND row_id = ANY (%s)").format(dead_table(sid)), [seg, gone]
            )
    conn.execute("DELETE FROM ranklock.snapshot_dead_terms WHERE snapshot_id = %s", [sid])
    recount_dead_terms(conn, sid)
    documents = chunks = total_len = 0
    corpus: list[tuple[str, str]] = []
    vectors: list[tuple[str, str, str]] = []
    for seg in segs:
        table = segment_table("chunks", seg)
        for r in conn.execute(
            sql.SQL(
                # NOT IN of an uncorrelated subquery: a Citus cluster sends its rows to the shards.
                "SELECT c.doc_id, c.chunk, c.vec_digest, c.doc_len FROM {} AS c WHERE c.row_id NOT IN ("
                "SELECT x.row_id FROM ranklock.snapshot_dead_rows AS x WHERE x.snapshot_id = %s AND x.seg = %s)"
            ).format(table),
            [sid, seg],
        ).fetchall():
            chunks += 1
            total_len += int(r[3])
            vectors.append((r[0], str(r[1]), r[2]))
        for r in conn.execute(
            "SELECT sd.doc_id, sd.content_hash FROM ranklock.segment_documents AS sd WHERE sd.segment_id = %s "
            "AND NOT EXISTS (SELECT 1 FROM ranklock.snapshot_dead AS x WHERE x.snapshot_id = %s "
            "AND x.segment_id = sd.segment_id AND x.doc_id = sd.doc_id)",
            [seg, sid],
        ).fetchall():
            documents += 1
            corpus.append((r[0], r[1]))
    dead = conn.execute("SELECT count(*) FROM ranklock.snapshot_dead_rows WHERE snapshot_id = %s", [sid]).fetchone()
    totals = {
        "documents": documents,
        "chunks": chunks,
        "total_len": total_len,
        "dead_rows": int(dead[0]) if dead else 0,
        "corpus_sum": set_digest(corpus),
        "vectors_sum": set_digest(vectors),
    }
    conn.execute(
        "UPDATE ranklock.snapshots SET stats = stats || %s, doc_count = %s, chunk_count = %s WHERE id = %s",
        [Jsonb(totals), documents, chunks, sid],
    )


def _purge_vectors(conn: Any, coll: CollectionInfo, hashes: set[str]) -> int:
    """Delete the embedding-cache vectors of the purged texts that no remaining chunk of any collection holds."""
    if not hashes:
        return 0
    left = set(hashes)
    for (seg,) in conn.execute("SELECT id FROM ranklock.segments ORDER BY id").fetchall():
        if not left:
            break
        held = conn.execute(
            sql.SQL("SELECT DISTINCT text_sha256 FROM {} WHERE text_sha256 = ANY (%s)").format(
                segment_table("chunks", int(seg))
            ),
            [sorted(left)],
        ).fetchall()
        left -= {r[0] for r in held}
    got = conn.execute(
        "WITH d AS (DELETE FROM ranklock.embedding_cache WHERE embedder_sha256 = %s AND text_sha256 = ANY (%s) "
        "RETURNING 1) SELECT count(*) FROM d",
        [coll.embedder_sha256, sorted(left)],
    ).fetchone()
    return int(got[0]) if got else 0


def _record_in_manifests(conn: Any, snapshots: list[int], purge_id: int) -> None:
    """Each touched snapshot's manifest gets its corrected totals and the purge, and a new hash."""
    for sid in snapshots:
        row = conn.execute("SELECT manifest, stats FROM ranklock.snapshots WHERE id = %s", [sid]).fetchone()
        if row is None or row[0] is None:
            continue
        m, stats = dict(row[0]), row[1] or {}
        m["corpus"] = {
            **m.get("corpus", {}),
            "digest": stats.get("corpus_sum"),
            "documents": stats.get("documents"),
            "chunks": stats.get("chunks"),
        }
        m["embedder"] = {**m.get("embedder", {}), "vectors_digest": stats.get("vectors_sum")}
        m["purges"] = [*m.get("purges", []), purge_id]
        m["manifest_hash"] = manifest_hash(m)
        conn.execute(
            "UPDATE ranklock.snapshots SET manifest = %s, manifest_hash = %s WHERE id = %s",
            [Jsonb(m), m["manifest_hash"], sid],
        )
