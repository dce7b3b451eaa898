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
changes are chunked, embedded and written (one new segment), and the versions
they replace, or that ``replace`` or the mirror of a folder removes
(ranklock.snapshot.sources), are masked (ranklock.snapshot.segments).
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
from ..store.documents import claim_versions, store_versions
from . import lifecycle
from .build import BuildReport, Progress, build_snapshot, prepare_documents, reap_dead_builds
from .merge import MergeOutcome, merge
from .purge_key import PurgeKey
from .purged import purged_among
from .segments import live_count, live_documents
from .sources import FolderRead, emptied_error, find_source, record_source, source_documents, version_sources
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
    #: The ids removed: by ``replace``, or by the mirror of a folder (their files are gone), byte-sorted.
    removed_ids: tuple[str, ...] = ()
    #: Ids of a mirrored folder whose files are there but could not be read: their stored versions stay.
    kept_unreadable: tuple[str, ...] = ()
    #: Given ids whose live version another folder gave, with that folder: this source holds them now.
    moved: dict[str, str] = field(default_factory=dict)
    #: A mirror that read the folder before the last mirror of it written: it wrote nothing.
    superseded: bool = False


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
    purge_key: PurgeKey,
    skipped: list[str] | None = None,
    progress: Progress | None = None,
    folder: FolderRead | None = None,
    mirror: bool = True,
) -> IngestOutcome:
    """Build a snapshot of ``coll`` from ``given`` (and, unless ``replace``, the active snapshot's other documents).

    ``given`` maps doc_id to a document with text (see :func:`split_empty`);
    ``skipped`` only feeds the message of the refusal of an empty snapshot.
    An input that changes nothing builds nothing: the active snapshot stays (``build`` is None), unless
    ``activate`` is False (a candidate asked for is built).
    An id a purge erased is left out unless ``allow_purged``, and named either way (``purge_key``: the
    home's, which the purge records' id hashes are made with).
    ``folder``: ``given`` is what a read of that folder found; its documents are recorded as given by it
    and, with ``mirror``, the documents it gave before whose files are gone are removed
    (ranklock.snapshot.sources).
    """
    name = coll.name
    progress = progress or _noop
    # Validate typed fields and effective dates before any work, so a bad document never half-applies.
    for d in given.values():
        coerce_document_fields(coll, d)
        check_effective_dates(d)
    # A purge is an erasure: its ids come back only when the caller says so, and before anything of
    # them is chunked or embedded (the purge emptied the embedding cache of their texts too).
    read_any = bool(given)
    purged = purged_among(db, coll, list(given), purge_key)
    if purged and not allow_purged:
        given = {i: d for i, d in given.items() if i not in purged}
    # The slow part first, with no lock held: chunks cut, vectors cached, for the documents the
    # active snapshot does not hold as they are (none, when the same folder is ingested again).
    new = _not_held(db, coll, given)
    prepared = prepare_documents(db, coll, new, emb, progress) if new else None
    with writing(db, coll.id, name, lock_wait) as waited:
        coll = read_collection(db, name)  # the active snapshot now is the parent
        reap_dead_builds(db, coll.id)
        # The live versions of the given ids in the active snapshot (all of its live documents for
        # ``replace``): what the ingest adds, changes, keeps and masks.
        parent = coll.active_snapshot_id
        live = live_documents(db, parent, None if replace else list(given)) if parent is not None else {}
        source = None
        mirrored: dict[str, tuple[int, str]] = {}
        if folder is not None:
            known = find_source(db, coll.id, folder.path)
            if mirror and known is not None and known.mirrored_at is not None and known.mirrored_at > folder.read_at:
                # A later read of this folder was written first: this one is older news.
                return IngestOutcome(None, 0, 0, 0, 0, parent, waited, superseded=True)
            if mirror and known is not None and parent is not None:
                mirrored = source_documents(db, parent, known.id)
        total = live_count(db, parent) if parent is not None else 0
        write = [d for i, d in given.items() if i not in live or live[i][1] != d.content_hash]
        dead = [(live[i][0], i) for i, d in given.items() if i in live and live[i][1] != d.content_hash]
        if replace:
            removed_ids = [i for i in live if i not in given]
        else:
            removed_ids = [i for i in mirrored if i not in given and not (folder and folder.keeps(i))]
            live.update({i: mirrored[i] for i in removed_ids})
        removed_ids.sort(key=_c_order)
        gone = set(removed_ids)
        kept = () if replace else tuple(sorted((i for i in mirrored if i not in given and i not in gone), key=_c_order))
        if folder is not None and not read_any and not allow_empty:
            from ..ingest.formats import no_files_error

            # Nothing read from the folder: a drive not mounted looks so. Removing is said on purpose.
            raise emptied_error(name, folder.path, len(mirrored)) if mirrored else no_files_error(folder.path)
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
        # Who gave the versions the snapshot keeps: this folder (or no source) now.
        before = version_sources(db, parent, coll.id, [i for i in given if i in live]) if parent is not None else {}
        if folder is not None:
            source = record_source(db, coll.id, folder.path, folder.read_at if mirror else None)
        source_id = source.id if source is not None else None
        moved = {i: path for i, (sid, path) in sorted(before.items()) if sid != source_id and source_id is not None}
        claim_versions(
            db,
            coll.id,
            [
                (i, live[i][1])
                for i, d in given.items()
                if i in live and live[i][1] == d.content_hash and before.get(i, (None, ""))[0] != source_id
            ],
            source_id,
        )
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
                kept_unreadable=kept,
                moved=moved,
            )
        # Shared version lock: a concurrent `snapshot drop` must not collect the
        # versions stored here before the new snapshot references them.
        with lifecycle.holding_versions(db, coll.id):
            # Only the versions this snapshot adds: the others are stored already.
            store_versions(
                db,
                coll.id,
                [(d.doc_id, d.content_hash, d.title, d.body, d.metadata, d.display) for d in write],
                source_id,
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
        removed_ids=tuple(removed_ids),
        kept_unreadable=kept,
        moved=moved,
    )


def _not_held(db: Database, coll: CollectionInfo, given: dict[str, Document]) -> list[Document]:
    """The given documents the active snapshot does not hold as they are: what a build will write.

    Read with no lock held, only to choose what to prepare; the build decides again under the lock
    (and chunks there whatever a concurrent writer made new).
    """
    if coll.active_snapshot_id is None:
        return list(given.values())
    live = live_documents(db, coll.active_snapshot_id, list(given))
    return [d for i, d in given.items() if i not in live or live[i][1] != d.content_hash]


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
