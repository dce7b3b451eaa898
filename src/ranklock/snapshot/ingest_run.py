"""One ingest from its source to its report: load, drop empty documents, create the collection, build, report.

:meth:`ranklock.Engine.ingest` hands this module the source and three doors back into
the engine it must not import (dependencies point one way): ``create`` (its
``create_collection``), ``embedder`` (the collection's checked embedder) and ``retain``
(the snapshot retention a write applies after it)::

    >>> report = run_ingest(db, "docs", "corpus.jsonl", create=eng.create_collection,
    ...                     embedder=eng._collection_embedder, retain=retain, lock_wait=300)   # doctest: +SKIP

A collection this call creates is provisional until its first snapshot is ready
(ranklock.snapshot.abandoned), and removed at once when the ingest is interrupted first
(Ctrl-C): no empty collection is left for a later command to find.
:func:`ranklock.snapshot.ingest.ingest_snapshot` builds the snapshot itself; a folder of
files is a source it mirrors (ranklock.snapshot.sources).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..collection import CollectionInfo, read_collection
from ..errors import ConfigError, NotFound
from .reports import IngestReport

if TYPE_CHECKING:
    from ..embed.base import Embedder
    from ..ingest.document import Document
    from ..ingest.formats import FileLoad
    from ..store.database import Database
    from .build import Progress
    from .purge_key import PurgeKey

__all__ = ["existing_collection", "run_ingest"]


def existing_collection(db: Database, name: str) -> CollectionInfo | None:
    """The collection ``name``, or None; one left by a first ingest that died is removed and is None."""
    try:
        coll = read_collection(db, name)
    except NotFound:
        return None
    if coll.provisional:
        from .abandoned import reap_abandoned

        if reap_abandoned(db, name):
            return None
    return coll


def run_ingest(
    db: Database,
    name: str,
    source: str | Path | Sequence[Document] | FileLoad,
    *,
    create: Callable[..., CollectionInfo],
    embedder: Callable[[CollectionInfo], Embedder],
    retain: Callable[[CollectionInfo], tuple[int, ...]],
    lock_wait: float,
    replace: bool = False,
    activate: bool = True,
    allow_empty: bool = False,
    progress: Progress | None = None,
    create_options: dict[str, Any] | None = None,
    allow_purged: bool = False,
    mirror: bool = True,
    purge_key: PurgeKey,
) -> IngestReport:
    """Ingest ``source`` into a new snapshot of ``name`` (see :meth:`ranklock.Engine.ingest` for the keywords).

    ``purge_key``: the home's purge key, to recognise an id a purge erased (ranklock.snapshot.purge_key)."""
    from ..ingest.formats import FileLoad, handles, load_files, no_files_error
    from ..ingest.loaders import check_text_sizes, load_corpus
    from .ingest import empty_snapshot_error, ingest_snapshot, split_empty
    from .sources import FolderRead, missing_error

    t0 = time.perf_counter()
    coll = existing_collection(db, name)
    if isinstance(source, (str, Path)) and not Path(source).exists():
        raise missing_error(
            db, coll.id if coll else None, coll.active_snapshot_id if coll else None, name, Path(source)
        )
    read = source if isinstance(source, FileLoad) else None
    if isinstance(source, (str, Path)) and Path(source).is_dir() and handles(source):
        # A folder of files: read here as a source, so the ingest can mirror it (an empty one too:
        # ingest_snapshot says what an empty source means for what the collection holds).
        read = load_files(source, allow_empty=True)
    folder = FolderRead.of(read) if read is not None and read.root is not None else None
    if read is not None:
        docs = read.documents
    elif isinstance(source, (str, Path)):
        docs = load_corpus(source)
    elif not isinstance(source, FileLoad):
        docs = list(source)
        check_text_sizes(docs)  # the loaders hold a file or a record to it before reading it whole
    seconds = {"load": time.perf_counter() - t0}
    given, skipped = split_empty(docs)
    inferred: dict[str, Any] | None = None
    if coll is None:
        if not given and not allow_empty:
            if folder is not None:
                raise no_files_error(folder.path)
            raise empty_snapshot_error(name, 0, None, skipped) from None
        options = {k: v for k, v in (create_options or {}).items() if v is not None}
        if options.get("fields") is None:
            from ..ingest.infer import infer_fields

            inference = infer_fields(list(given.values()))
            options["fields"] = inference.fields
            options["field_inference"] = inferred = inference.record()
        coll = create(name, **options, if_missing=True)
        # Provisional until a snapshot of it is ready, and held by this ingest from now on: if it
        # dies first, the next ingest or listing removes the collection (ranklock.snapshot.abandoned).
        db.execute(
            "UPDATE ranklock.collections SET provisional = true WHERE id = %s AND active_snapshot_id IS NULL",
            [coll.id],
        )
        coll = coll.model_copy(update={"provisional": True})
    elif create_options:
        from .abandoned import creation_conflicts

        conflicts = creation_conflicts(coll, create_options)
        if conflicts:
            raise ConfigError(
                f"collection {name!r} exists, and this ingest asks for settings it was not made with: "
                f"{'; '.join(conflicts)}. They are fixed for a collection's lifetime: leave them out to ingest "
                "into it, or ingest into a new collection (another name)."
            )
    created = coll.provisional
    with contextlib.ExitStack() as held:
        if created:
            from .writer import writing

            held.enter_context(writing(db, coll.id, name, lock_wait))
        try:
            out = ingest_snapshot(
                db,
                coll,
                given,
                embedder(coll),
                lock_wait=lock_wait,
                replace=replace,
                activate=activate,
                allow_empty=allow_empty,
                allow_purged=allow_purged,
                purge_key=purge_key,
                skipped=skipped,
                progress=progress,
                folder=folder,
                mirror=mirror,
            )
        except BaseException:
            if created:
                # Interrupted (Ctrl-C) or failed before its first snapshot: the collection this call
                # made goes now, under the writer lock still held, not at a later command.
                _discard_new(db, coll.id)
            raise
        if created:
            db.execute("UPDATE ranklock.collections SET provisional = false WHERE id = %s", [coll.id])
    seconds.update(out.build.seconds if out.build is not None else {})
    seconds["lock_wait"] = out.lock_wait
    seconds["total"] = time.perf_counter() - t0
    if out.build is None:
        from . import lifecycle

        kept = lifecycle.snapshot_info(db, coll, out.parent_id)
        built = (kept.id, kept.documents or 0, kept.chunks or 0, 0, 0, kept.corpus_digest, kept.manifest_hash)
    else:
        b = out.build
        built = (
            b.snapshot_id,
            b.documents,
            b.chunks,
            b.embedded,
            b.reused,
            b.manifest["corpus"]["digest"],
            b.manifest["manifest_hash"],
        )
    snapshot_id, documents, chunks, embedded, reused, digest, mhash = built
    return IngestReport(
        collection=name,
        snapshot_id=snapshot_id,
        activated=activate and out.build is not None,
        documents=documents,
        added=out.added,
        changed=out.changed,
        removed=out.removed,
        unchanged=out.unchanged,
        chunks=chunks,
        embedded=embedded,
        reused=reused,
        corpus_digest=digest or "",
        manifest_hash=mhash or "",
        seconds=seconds,
        parent_id=out.parent_id,
        skipped=skipped,
        field_inference=inferred,
        merged=out.merge.build.snapshot_id if out.merge is not None else None,
        built=out.build is not None,
        deleted_readded=list(out.deleted_readded),
        purged_skipped=out.purged_skipped,
        purged_readded=out.purged_readded,
        snapshots_dropped=list(retain(coll)) if out.build is not None else [],
        created=created,
        source=folder.path if folder is not None else None,
        removed_ids=list(out.removed_ids),
        kept_unreadable=list(out.kept_unreadable),
        moved=out.moved,
        superseded=out.superseded,
    )


def _discard_new(db: Database, collection_id: int) -> None:
    """Remove the provisional collection ``collection_id`` if no snapshot of it got ready (best effort)."""
    from .build import reap_dead_builds

    # Best effort: a second Ctrl-C, or a server gone, leaves it to ranklock.snapshot.abandoned.
    with contextlib.suppress(Exception):
        reap_dead_builds(db, collection_id)
        db.execute(
            "DELETE FROM ranklock.collections AS c WHERE c.id = %s AND c.provisional AND NOT EXISTS ("
            "SELECT 1 FROM ranklock.snapshots AS s WHERE s.collection_id = c.id AND s.status <> 'failed')",
            [collection_id],
        )
