"""What the document writes return: an ingest, a delete and a merge, each with the dict the CLI and HTTP print.

:class:`IngestReport` is ``ranklock ingest`` (built by ranklock.snapshot.ingest_run),
:class:`DeleteReport` ``ranklock delete`` and :class:`MergeReport` ``ranklock snapshot merge``.
They sit below the facade, beside the snapshot operations' values (ranklock.snapshot.info);
``ranklock.IngestReport`` and ``ranklock.engine`` re-export them where users import them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeleteReport", "IngestReport", "MergeReport"]


@dataclass
class IngestReport:
    """What :meth:`Engine.ingest` did: the snapshot built (or kept), how the document set changed, the seconds."""

    collection: str
    snapshot_id: int
    activated: bool
    documents: int
    added: int
    changed: int
    removed: int
    unchanged: int
    chunks: int
    embedded: int
    reused: int
    corpus_digest: str
    manifest_hash: str
    seconds: dict[str, float] = field(default_factory=dict)
    #: The snapshot active when this one was built (what it was built from).
    parent_id: int | None = None
    #: Ids of given documents with empty text: not part of the snapshot (they could never be found).
    skipped: list[str] = field(default_factory=list)
    #: The typed fields this ingest inferred from the metadata when it created the collection
    #: (ranklock.ingest.infer: ``fields``, ``untyped`` keys with the reason); None otherwise.
    field_inference: dict[str, Any] | None = None
    #: The snapshot the merge policy made right after (the active one now), or None (ranklock.snapshot.merge).
    merged: int | None = None
    #: False: the input changed nothing; no snapshot was built and ``snapshot_id``, the active one, stays.
    built: bool = True
    #: Ids an earlier snapshot held but the active one did not (deleted, or removed by a replace), added back.
    deleted_readded: list[str] = field(default_factory=list)
    #: Ids a purge erased, each with that purge's id: left out, or (``allow_purged``) added back.
    purged_skipped: dict[str, int] = field(default_factory=dict)
    purged_readded: dict[str, int] = field(default_factory=dict)
    #: Snapshots the collection's retention policy dropped after this write (ranklock.snapshot.retention).
    snapshots_dropped: list[int] = field(default_factory=list)
    #: True: the collection did not exist; this ingest created it.
    created: bool = False
    #: The folder read, by its real path, when the input was a folder of files (ranklock.snapshot.sources).
    source: str | None = None
    #: The ids ``removed`` counts, byte-sorted: files gone from the mirrored folder, or not given to ``replace``.
    removed_ids: list[str] = field(default_factory=list)
    #: Ids of the folder whose files are there but could not be read: their stored versions stay.
    kept_unreadable: list[str] = field(default_factory=list)
    #: Ids another folder gave before, with that folder's path: this folder gives them now.
    moved: dict[str, str] = field(default_factory=dict)
    #: A later read of the same folder was written first; this one wrote nothing (it is older news).
    superseded: bool = False

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass(frozen=True)
class DeleteReport:
    """What :meth:`Engine.delete` did."""

    collection: str
    #: The snapshot without the documents (activated).
    snapshot_id: int
    parent_id: int
    deleted: tuple[str, ...]
    #: Ids the snapshot did not hold (only with ``missing_ok``).
    missing: tuple[str, ...]
    merged: int | None = None
    #: Snapshots the collection's retention policy dropped after it (ranklock.snapshot.retention).
    snapshots_dropped: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class MergeReport:
    """What :meth:`Engine.merge` did: the merge snapshot (None: nothing to merge) and the segments it folded."""

    collection: str
    snapshot_id: int | None
    segments: tuple[int, ...]
    seconds: float
    #: Snapshots the collection's retention policy dropped after it (ranklock.snapshot.retention).
    snapshots_dropped: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}
