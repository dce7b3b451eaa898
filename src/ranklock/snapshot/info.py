"""What the snapshot operations return: frozen values, each with the JSON dict the CLI and HTTP print.

:class:`SnapshotInfo` is one row of ``ranklock snapshot list``;
:class:`SnapshotDetail` adds the collection, the build statistics and the
manifest (``snapshot show``); :class:`Activation` is an activation or a
rollback (which snapshot was active, which is now), :class:`GatedActivation`
one behind the promotion gate; :class:`SnapshotDiff`, :class:`DropReport` and
:class:`LexicalStatsReport` are ``snapshot diff``, ``snapshot drop`` and
``snapshot lexical-stats``.  ``as_dict`` gives the keys in the order the JSON
has always had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "Activation",
    "DropReport",
    "GatedActivation",
    "LexicalStatsReport",
    "SnapshotDetail",
    "SnapshotDiff",
    "SnapshotInfo",
]


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot as the catalog records it, the collection's active and previous ones marked."""

    id: int
    status: str
    active: bool
    previous: bool
    parent_id: int | None
    documents: int | None
    chunks: int | None
    corpus_digest: str | None
    manifest_hash: str | None
    #: Chunks this snapshot's build embedded, and those it did not (ranklock.snapshot.build).
    embedded: int | None
    reused: int | None
    #: ISO 8601 times.
    created_at: str | None
    built_at: str | None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class SnapshotDetail(SnapshotInfo):
    """A snapshot with its collection, its build statistics and its manifest (None while it builds)."""

    collection: str
    stats: Mapping[str, Any]
    manifest: Mapping[str, Any] | None
    #: The purges that rewrote it, oldest first (ranklock.snapshot.purged.purges_of): its manifest hash and
    #: its scores changed then, as an erasure must.
    purges: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Activation:
    """An activation or a rollback: the snapshot active before (None: none was) and the one active now."""

    collection: str
    before: int | None
    after: int

    def as_dict(self) -> dict[str, Any]:
        return {"collection": self.collection, "from": self.before, "to": self.after}


@dataclass(frozen=True)
class SnapshotDiff:
    """From snapshot ``old`` to ``new``: documents added, removed and changed, and manifest fields changed."""

    collection: str
    old: int
    new: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    #: ``{doc_id, old, new}`` content hashes of each changed document.
    changed: tuple[Mapping[str, str], ...]
    #: Manifest field -> ``{old, new}``; None when either snapshot has no manifest yet.
    manifest: Mapping[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "old": self.old,
            "new": self.new,
            "documents": {"added": list(self.added), "removed": list(self.removed), "changed": list(self.changed)},
            "manifest": self.manifest,
        }


@dataclass(frozen=True)
class DropReport:
    """What ``snapshot drop`` removed: the snapshot, its tables, the segments no snapshot references any more."""

    collection: str
    #: The snapshot dropped (None when several were: ``snapshots``).
    dropped: int | None
    tables: tuple[str, ...]
    segments_dropped: tuple[int, ...]
    #: "done", or why the collection of unreferenced document versions was deferred.
    versions_gc: str
    versions_deleted: int
    #: Every snapshot dropped.
    snapshots: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class GatedActivation:
    """An activation behind the promotion gate: whether it happened, the gate's report, what stays or was active."""

    collection: str
    snapshot_id: int
    activated: bool
    #: The promotion gate's report (ranklock.eval.gate), None for an activation without a gate.
    gate: Mapping[str, Any] | None
    #: The snapshot active before: replaced when ``activated``, still active when not.
    previous: int | None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class LexicalStatsReport:
    """BM25 tables built or found current for each segment of a snapshot (``snapshot lexical-stats``)."""

    collection: str
    snapshot_id: int
    seconds: float
    #: The ``bm25`` stats entry of the snapshot's largest segment: what the CLI prints.
    bm25: Mapping[str, Any]
    #: Segment id -> its ``bm25`` stats entry.
    segments: Mapping[int, Mapping[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
