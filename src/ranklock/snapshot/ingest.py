"""An ingest as one feature: the new document set, its snapshot built and (optionally) activated.

The Engine loads the documents, finds or creates the collection and picks
its embedder; :func:`ingest_snapshot` does the rest::

    >>> given, skipped = split_empty(docs)
    >>> out = ingest_snapshot(db, coll, given, emb, lock_wait=300, skipped=skipped)
    >>> out.build.snapshot_id, out.added, out.parent_id

Writers of one collection run one at a time (ranklock.snapshot.writer): the
given documents are chunked and embedded first, with no lock held; then,
under the collection's writer lock, the new snapshot is built from the
snapshot active at that moment (its ``parent_id``) and activated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..collection import CollectionInfo, read_collection
from ..embed.base import Embedder
from ..errors import IngestError
from ..ingest.chunker import document_text
from ..ingest.document import Document
from ..ingest.fields import check_effective_dates, coerce_document_fields
from ..store.database import Database
from ..store.documents import load_versions, snapshot_hashes, store_versions
from . import lifecycle
from .build import BuildReport, Progress, build_snapshot, prepare_documents, reap_dead_builds
from .writer import writing

__all__ = ["IngestOutcome", "empty_snapshot_error", "ingest_snapshot", "split_empty"]


@dataclass
class IngestOutcome:
    """What :func:`ingest_snapshot` built, and how the document set changed from its parent."""

    build: BuildReport
    added: int
    changed: int
    removed: int
    unchanged: int
    #: The snapshot active when this one was built (what it was built from).
    parent_id: int | None
    #: Seconds spent waiting for the collection's writer lock.
    lock_wait: float


def _noop(stage: str, done: int, total: int) -> None:
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
    why = f"; {_named(skipped)} had empty text and were skipped" if skipped else ""
    was = (
        f"would remove all {previous} document(s) of the active snapshot {active} of {name!r}"
        if previous
        else f"would make a snapshot of {name!r} with no documents"
    )
    return IngestError(
        f"this ingest {was}: it holds no document with text{why}. Nothing was changed. Check the input file, "
        "or pass --allow-empty (allow_empty=True) to make an empty snapshot on purpose."
    )


def _named(ids: list[str], limit: int = 10) -> str:
    """``ids`` for a message: the first ``limit`` quoted, then how many more."""
    shown = ", ".join(repr(i) for i in ids[:limit])
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"{len(ids)} document{'s' if len(ids) != 1 else ''} ({shown}{more})"


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
    skipped: list[str] | None = None,
    progress: Progress | None = None,
) -> IngestOutcome:
    """Build a snapshot of ``coll`` from ``given`` (and, unless ``replace``, the active snapshot's other documents).

    ``given`` maps doc_id to a document with text (see :func:`split_empty`);
    ``skipped`` only feeds the message of the refusal of an empty snapshot.
    """
    name = coll.name
    progress = progress or _noop
    # Validate typed fields and effective dates before any work, so a bad document never half-applies.
    for d in given.values():
        coerce_document_fields(coll, d)
        check_effective_dates(d)
    # The slow part first, with no lock held: chunks cut, vectors cached.
    prepared = prepare_documents(db, coll, list(given.values()), emb, progress)
    with writing(db, coll.id, name, lock_wait) as waited:
        coll = read_collection(db, name)  # the active snapshot now is the parent
        reap_dead_builds(db, coll.id)
        # The new document set: previous active set, updated by the given docs.
        previous = snapshot_hashes(db, coll.active_snapshot_id) if coll.active_snapshot_id is not None else {}
        final: dict[str, Document] = {}
        if not replace and previous:
            keep = [i for i in previous if i not in given]
            for r in load_versions(db, coll.id, [(i, previous[i]) for i in keep]):
                final[r["doc_id"]] = Document(r["doc_id"], r["title"], r["body"], r["metadata"], r["display"])
        final.update(given)
        if not final and not allow_empty:
            raise empty_snapshot_error(name, len(previous), coll.active_snapshot_id, skipped or [])
        added = sum(1 for i in given if i not in previous)
        changed = sum(1 for i, d in given.items() if i in previous and previous[i] != d.content_hash)
        unchanged = sum(1 for i, d in given.items() if i in previous and previous[i] == d.content_hash)
        removed = sum(1 for i in previous if i not in final)
        # Shared version lock: a concurrent `snapshot drop` must not collect the
        # versions stored here before the new snapshot references them.
        with lifecycle.holding_versions(db, coll.id):
            store_versions(
                db,
                coll.id,
                [(d.doc_id, d.content_hash, d.title, d.body, d.metadata, d.display) for d in given.values()],
            )
            report = build_snapshot(
                db,
                coll,
                list(final.values()),
                emb,
                parent_id=coll.active_snapshot_id,
                progress=progress,
                prepared=prepared,
            )
        if activate:
            lifecycle.activate(db, coll, report.snapshot_id, lock_wait)
    return IngestOutcome(
        build=report,
        added=added,
        changed=changed,
        removed=removed,
        unchanged=unchanged,
        parent_id=coll.active_snapshot_id,
        lock_wait=waited,
    )
