"""An ingest as one feature: the new document set, its snapshot built and (optionally) activated.

The ingest workflow (ranklock.snapshot.ingest_run) loads the documents, finds or
creates the collection and picks its embedder; :func:`ingest_snapshot` does the rest::

    >>> given, skipped = split_empty(docs)
    >>> out = ingest_snapshot(db, coll, given, emb, lock_wait=300, skipped=skipped)
    >>> out.build.snapshot_id, out.added, out.parent_id

Writers of one collection run one at a time (ranklock.snapshot.writer): the
given documents are chunked and embedded first, with no lock held; then,
under the collection's writer lock, the new snapshot is built from the
snapshot active at that moment (its ``parent_id``) and activated.  The new
snapshot shares its parent's segments: only the documents the ingest adds or
changes are written (one new segment), and the versions they replace, or
that ``replace`` removes, are masked (ranklock.snapshot.segments).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..collection import CollectionInfo, read_collection
from ..embed.base import Embedder
from ..errors import IngestError
from ..ingest.chunker import document_text
from ..ingest.document import Document
from ..ingest.fields import check_effective_dates, coerce_document_fields
from ..phrasing import named, plural
from ..store.database import Database
from ..store.documents import store_versions
from . import lifecycle
from .build import BuildReport, Progress, build_snapshot, prepare_documents, reap_dead_builds
from .merge import MergeOutcome, merge
from .purged import purged_among
from .segments import live_count, live_documents
from .writer import writing

__all__ = [
    "DeleteOutcome",
    "IngestOutcome",
    "delete_documents",
    "empty_snapshot_error",
    "ingest_snapshot",
    "split_empty",
]


@dataclass
class IngestOutcome:
    """What :func:`ingest_snapshot` built, and how the document set changed from its parent."""

    #: The snapshot built, or None: the input changed nothing, so the active snapshot stays (``parent_id``).
    build: BuildReport | None
    added: int
    changed: int
    removed: int
    unchanged: int
    #: The snapshot active when this one was built (what it was built from).
    parent_id: int | None
    #: Seconds spent waiting for the collection's writer lock.
    lock_wait: float
    #: The merge the policy ran after activating (ranklock.snapshot.merge), if any.
    merge: MergeOutcome | None = None
    #: Given ids that an earlier snapshot held but the active one did not (deleted, or removed by a
    #: replace): added back, and said so.
    deleted_readded: tuple[str, ...] = ()
    #: Given ids a purge erased, with the purge's id: left out (``purged_readded`` with ``allow_purged``).
    purged_skipped: dict[str, int] = field(default_factory=dict)
    purged_readded: dict[str, int] = field(default_factory=dict)


def _noop(_stage: str, _done: int, _total: int) -> None:
    return None


def _c_order(doc_id: str) -> bytes:
    return doc_id.encode("utf-8")


def split_empty(docs: Sequence[Document]) -> tuple[dict[str, Document], list[str]]:
    """The documents with text by id (a later one of an id wins), and the ids of those without, byte-sorted."""
    skipped = sorted((d.doc_id for d in docs if not document_text(d.title, d.body).strip()), key=_c_order)
    empty = set(skipped)
    return {d.doc_id: d for d in docs if d.doc_id not in empty}, skipped


def empty_snapshot_error(name: str, previous: int, active: int | None, skipped: list[str]) -> IngestError:
    """Refusal of a snapshot with no document (``allow_empty`` overrides it)."""
    verb = "was" if len(skipped) == 1 else "were"
    why = f"; {_named(skipped)} had empty text and {verb} skipped" if skipped else ""
    was = (
        f"would remove {'the' if previous == 1 else 'all'} {plural(previous, 'document')} of the active snapshot "
        f"{active} of {name!r}"
        if previous
        else f"would make a snapshot of {name!r} with no documents"
    )
    return IngestError(
        f"this ingest {was}: it holds no document with text{why}. Nothing was changed. Check the input file, "
        "or pass --allow-empty (allow_empty=True) to make an empty snapshot on purpose."
    )


def _named(ids: list[str]) -> str:
    """``ids`` for a message: ``document 'a'``, or ``2 documents ('a', 'b')``."""
    return f"document {named(ids)}" if len(ids) == 1 else f"{plural(len(ids), 'document')} ({named(ids)})"


def ingest_snapshot(
    db: Database,
    coll: CollectionInfo,
    given: dict[str, Document],
    emb: Embedder,
    *,
    lock_wait: float,
    replace: bool = False,
    activate: bool = True,
    allow_empty: bool = False,
    allow_purged: bool = False,
    skipped: list[str] | None = None,
    progress: Progress | None = None,
) -> IngestOutcome:
    """Build a snapshot of ``coll`` from ``given`` (and, unless ``replace``, the active snapshot's other documents).

    ``given`` maps doc_id to a document with text (see :func:`split_empty`);
    ``skipped`` only feeds the message of the refusal of an empty snapshot.
    An input that changes nothing builds nothing: the active snapshot stays (``build`` is None), unless
    ``activate`` is False (a candidate asked for is built).
    An id a purge erased is left out unless ``allow_purged``, and named either way.
    """
    name = coll.name
    progress = progress or _noop
    # Validate typed fields and effective dates before any work, so a bad document never half-applies.
    for d in given.values():
        coerce_document_fields(coll, d)
        check_effective_dates(d)
    # A purge is an erasure: its ids come back only when the caller says so, and before anything of
    # them is chunked or embedded (the purge emptied the embedding cache of their texts too).
    purged = purged_among(db, coll, list(given))
    if purged and not allow_purged:
        given = {i: d for i, d in given.items() if i not in purged}
    # The slow part first, with no lock held: chunks cut, vectors cached (nothing to do for an
    # input the active snapshot already holds, as when the same folder is ingested again).
    unchanged_before = activate and _unchanged(db, coll, given, replace)
    prepared = None if unchanged_before else prepare_documents(db, coll, list(given.values()), emb, progress)
    with writing(db, coll.id, name, lock_wait) as waited:
        coll = read_collection(db, name)  # the active snapshot now is the parent
        reap_dead_builds(db, coll.id)
        # The live versions of the given ids in the active snapshot (all of its live documents for
        # ``replace``): what the ingest adds, changes, keeps and masks.
        parent = coll.active_snapshot_id
        live = live_documents(db, parent, None if replace else list(given)) if parent is not None else {}
        total = live_count(db, parent) if parent is not None else 0
        write = [d for i, d in given.items() if i not in live or live[i][1] != d.content_hash]
        dead = [(live[i][0], i) for i, d in given.items() if i in live and live[i][1] != d.content_hash]
        removed_ids = [i for i in live if i not in given] if replace else []
        dead += [(live[i][0], i) for i in removed_ids]
        remaining = total - len(dead) + len(write)
        if remaining == 0 and not allow_empty:
            raise empty_snapshot_error(name, total, parent, skipped or [])
        added = sum(1 for i in given if i not in live)
        changed = len(write) - added
        unchanged = len(given) - len(write)
        removed = len(removed_ids)
        readded = tuple(sorted(_stored_ids(db, coll.id, [i for i in given if i not in live]), key=_c_order))
        purged_skipped, purged_readded = ({}, purged) if allow_purged else (purged, {})
        if parent is not None and not write and not dead and activate:
            # The active snapshot holds exactly this: a new one would differ only in its id.  (A build
            # asked not to be activated is a candidate the caller wants, identical or not: built.)
            return IngestOutcome(
                None,
                0,
                0,
                0,
                unchanged,
                parent,
                waited,
                deleted_readded=readded,
                purged_skipped=purged_skipped,
                purged_readded=purged_readded,
            )
        # Shared version lock: a concurrent `snapshot drop` must not collect the
        # versions stored here before the new snapshot references them.
        with lifecycle.holding_versions(db, coll.id):
            store_versions(
                db,
                coll.id,
                [(d.doc_id, d.content_hash, d.title, d.body, d.metadata, d.display) for d in given.values()],
            )
            report = build_snapshot(
                db, coll, write, emb, parent_id=parent, dead=dead, progress=progress, prepared=prepared
            )
        merged = None
        if activate:
            lifecycle.activate(db, coll, report.snapshot_id, lock_wait)
            # Small segments are folded as they accumulate (ranklock.snapshot.merge): a further
            # snapshot with the same documents, activated in turn.
            merged = merge(db, coll, emb, lock_wait=lock_wait)
    return IngestOutcome(
        build=report,
        added=added,
        changed=changed,
        removed=removed,
        unchanged=unchanged,
        parent_id=coll.active_snapshot_id,
        lock_wait=waited,
        merge=merged,
        deleted_readded=readded,
        purged_skipped=purged_skipped,
        purged_readded=purged_readded,
    )


def _unchanged(db: Database, coll: CollectionInfo, given: dict[str, Document], replace: bool) -> bool:
    """Whether the active snapshot holds exactly these versions (all of its documents, for ``replace``).

    Read with no lock held, only to skip the preparation; the build decides again under the lock.
    """
    if coll.active_snapshot_id is None:
        return False
    live = live_documents(db, coll.active_snapshot_id, None if replace else list(given))
    same = all(i in live and live[i][1] == d.content_hash for i, d in given.items())
    return same and (not replace or len(live) == len(given))


def _stored_ids(db: Database, collection_id: int, ids: list[str]) -> set[str]:
    """The ids among ``ids`` with a stored version: an earlier snapshot held them (a purge erases the versions)."""
    if not ids:
        return set()
    rows = db.fetchall(
        "SELECT DISTINCT doc_id FROM ranklock.documents WHERE collection_id = %s AND doc_id = ANY (%s)",
        [collection_id, ids],
    )
    return {r["doc_id"] for r in rows}


@dataclass(frozen=True)
class DeleteOutcome:
    """What :func:`delete_documents` did: the snapshot it made, the ids it masked and those it did not find."""

    build: BuildReport
    deleted: tuple[str, ...]
    missing: tuple[str, ...]
    parent_id: int
    merge: MergeOutcome | None = None


def delete_documents(
    db: Database,
    coll: CollectionInfo,
    ids: Sequence[str],
    emb: Embedder,
    *,
    lock_wait: float,
    missing_ok: bool = False,
) -> DeleteOutcome:
    """A new active snapshot without the documents ``ids``: their versions masked, nothing rewritten.

    An id the active snapshot does not hold is an error naming it (nothing is
    changed) unless ``missing_ok``.  Deleting every document is allowed: the
    snapshot is empty, as asked.
    """
    wanted = sorted(set(ids), key=_c_order)
    if not wanted:
        raise IngestError("no document id to delete; name at least one, e.g. `ranklock delete docs d1`.")
    with writing(db, coll.id, coll.name, lock_wait):
        coll = read_collection(db, coll.name)
        parent = coll.active_snapshot_id
        if parent is None:
            raise IngestError(f"collection {coll.name!r} has no active snapshot; there is nothing to delete.")
        reap_dead_builds(db, coll.id)
        live = live_documents(db, parent, wanted)
        missing = tuple(i for i in wanted if i not in live)
        if missing and not missing_ok:
            raise IngestError(
                f"snapshot {parent} of {coll.name!r} holds no {_named(list(missing))}; nothing was deleted. "
                "Check the ids (a search hit's doc_id), or pass --missing-ok to delete the others."
            )
        deleted = tuple(i for i in wanted if i in live)
        report = build_snapshot(db, coll, [], emb, parent_id=parent, dead=[(live[i][0], i) for i in deleted])
        lifecycle.activate(db, coll, report.snapshot_id, lock_wait)
        merged = merge(db, coll, emb, lock_wait=lock_wait)
    return DeleteOutcome(report, deleted, missing, parent, merged)
