"""What a search reads before its stages run, resolved once: the collection, the snapshot, their guard.

A search needs its collection's row (fields, language, embedder, defaults) and its snapshot's
(segments, statistics, ranking rules).  A snapshot never changes but by a purge, and a
collection's row only by a write (an ingest's activation, a retention setting), so a process
keeps both once read (:class:`Contexts`) and never reads them again for the next search.  It
never *assumes* they are current either: every search's first round trip carries the
:class:`Guard`, index lookups of the rows' ``xmin`` (PostgreSQL's id of the transaction that
wrote the row version: any change writes a new version with a new one), its segments' rows
too (a rebuilt BM25 table or filter table changes a segment's statistics, not the snapshot).  A guard that no
longer holds makes the search start over from freshly read rows
(:class:`StaleContext`, caught by the pipeline), so a search always runs against the rows as
they are when its statement runs.

Also kept per process, because the snapshot (or the model) fixes them: each query's lexical
probe on a snapshot and each text's query vector (:class:`Memo`, bounded).

>>> ctx = yield from contexts.steps(request)   # doctest: +SKIP
>>> ctx.layout.ids
(12, 15)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from psycopg import sql

from ..collection import CollectionInfo
from ..errors import ConfigError, NotFound
from ..snapshot.segments import Layout, segments_sql
from ..store.steps import Batch, Fetch, Steps
from ..store.tables import SEGMENT_COLUMN

__all__ = ["Contexts", "Guard", "Memo", "SearchContext", "StaleContext"]

#: Entries of each memo (probes, query vectors): a vector is 1.5 kB at 384 dimensions, a probe ~100 bytes.
MEMO_ENTRIES = 4096


class StaleContext(Exception):
    """The collection or snapshot rows changed since this process read them: read them again, search again."""


@dataclass(frozen=True)
class Guard:
    """The row versions a context was read at: a search checks them in its first round trip."""

    collection_id: int
    collection_xmin: str
    snapshot_id: int
    snapshot_xmin: str
    #: Its segments' row versions, in id order (their statistics: a rebuilt BM25 table, a filter table).
    segments_xmin: str

    def fetch(self) -> Fetch:
        """Index lookups of each row's version (NULL for a row that is gone)."""
        return Fetch(GUARD_SQL, [self.collection_id, self.snapshot_id, self.snapshot_id], dicts=False)

    def check(self, rows: Sequence[Sequence[Any]]) -> None:
        """Raise :class:`StaleContext` unless every row is the version this context was read at."""
        if not rows or tuple(rows[0]) != (self.collection_xmin, self.snapshot_xmin, self.segments_xmin):
            raise StaleContext


#: The versions a guard compares: the collection's row, the snapshot's, and its segments' in id order.
GUARD_SQL = (
    "SELECT (SELECT xmin::text FROM ranklock.collections WHERE id = %s) AS c, "
    "(SELECT xmin::text FROM ranklock.snapshots WHERE id = %s) AS s, "
    "(SELECT string_agg(g.xmin::text, ',' ORDER BY g.id) FROM ranklock.snapshot_segments AS ss "
    "JOIN ranklock.segments AS g ON g.id = ss.segment_id WHERE ss.snapshot_id = %s) AS g"
)


@dataclass(frozen=True)
class SearchContext:
    """A search's collection and snapshot, read once, and the guard that says they still are."""

    coll: CollectionInfo
    #: The snapshot's row: id, status, manifest_hash, manifest, stats and its segments (never changed).
    snap: dict[str, Any]
    layout: Layout
    guard: Guard


class Memo:
    """A bounded, thread-safe map of what a snapshot or a model fixes (least recently used goes first)."""

    def __init__(self, entries: int = MEMO_ENTRIES) -> None:
        self._entries = entries
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._entries:
                self._items.popitem(last=False)


class Contexts:
    """The contexts searches of one database run in, by collection name and snapshot id (see the module docstring).

    One per database and process (:meth:`of`): every engine a process opens on it (a command service
    runs each command with an engine of its own) shares what was read.
    """

    _registry: ClassVar[dict[str, Contexts]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, database: str) -> Contexts:
        """The contexts of ``database`` (its DSN) in this process."""
        with cls._registry_lock:
            found = cls._registry.get(database)
            if found is None:
                found = cls._registry[database] = cls()
            return found

    def __init__(self) -> None:
        self._by_name: dict[tuple[str, int | None], SearchContext] = {}
        self._lock = threading.Lock()
        #: Lexical probes, by snapshot version and query (ranklock.search.lexical).
        self.probes = Memo()
        #: Query vectors, by embedder weights and text (ranklock.search.embedding).
        self.vectors = Memo()

    def steps(self, name: str, snapshot: int | None, *, fresh: bool = False) -> Steps[SearchContext]:
        """The context of collection ``name`` at ``snapshot`` (None: the active one): kept, or read in one round trip."""
        key = (name, snapshot)
        if not fresh:
            with self._lock:
                kept = self._by_name.get(key)
            if kept is not None:
                return kept
        ctx = yield from _read_steps(name, snapshot)
        with self._lock:
            self._by_name[key] = ctx
        return ctx


def _read_steps(name: str, snapshot: int | None) -> Steps[SearchContext]:
    """The collection's row and the snapshot's (with its segments), in one round trip; refused unless ready."""
    from ..collection import missing_collection
    from ..snapshot.lifecycle import check_ready_steps
    from ..store.collections import collection_names_steps

    coll_rows, snap_rows = yield Batch(
        (
            Fetch('SELECT c.*, c.xmin::text AS "rl#xmin" FROM ranklock.collections AS c WHERE c.name = %s', [name]),
            Fetch(
                sql.SQL(
                    "SELECT s.id, s.status, s.manifest_hash, s.manifest, s.stats, {segments} AS segments, "
                    "s.xmin::text AS \"rl#xmin\", (SELECT string_agg(g.xmin::text, ',' ORDER BY g.id) "
                    "FROM ranklock.snapshot_segments AS ss JOIN ranklock.segments AS g ON g.id = ss.segment_id "
                    'WHERE ss.snapshot_id = s.id) AS "rl#segments" FROM ranklock.snapshots AS s '
                    "JOIN ranklock.collections AS c ON c.id = s.collection_id "
                    "WHERE c.name = %s AND s.id = coalesce(%s, c.active_snapshot_id)"
                ).format(segments=segments_sql(sql.SQL("s.id"))),
                [name, snapshot],
            ),
        )
    )
    if not coll_rows:
        names = yield from collection_names_steps()
        raise missing_collection(name, names)
    row = dict(coll_rows[0])
    coll_xmin = str(row.pop("rl#xmin"))
    row.pop("created_at", None)
    coll = CollectionInfo(**row)
    if coll.field(SEGMENT_COLUMN) is not None:
        # Inferred from a metadata key before ranklock reserved the name: every union over the segments
        # would hold two columns of that name, and PostgreSQL refuses each statement that reads it.
        raise ConfigError(
            f"collection {coll.name!r} has a typed field {SEGMENT_COLUMN!r}, a name ranklock's SQL gives a column of "
            "its own (the field was inferred from a metadata key before ranklock reserved the name), so no search "
            "of it can run; ingest its documents into a new collection, whose first ingest leaves the key untyped."
        )
    sid = snapshot if snapshot is not None else coll.active_snapshot_id
    if sid is None:
        raise NotFound(f"collection {coll.name!r} has no active snapshot yet; ingest documents first.")
    if not snap_rows:
        raise NotFound(f"collection {coll.name!r} has no snapshot {sid}; see `ranklock snapshot list {coll.name}`.")
    snap = dict(snap_rows[0])
    snap_xmin = str(snap.pop("rl#xmin"))
    segments_xmin = snap.pop("rl#segments")
    snap = yield from check_ready_steps(coll, snap)
    guard = Guard(coll.id, coll_xmin, int(snap["id"]), snap_xmin, segments_xmin)
    return SearchContext(coll=coll, snap=snap, layout=Layout.of(snap), guard=guard)
