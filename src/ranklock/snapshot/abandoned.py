"""Collections a first ingest made and never finished, and an ingest's settings that a collection lacks.

An ingest into a collection that does not exist creates it with the ingest's
settings (language, index, chunk window, typed fields), marked *provisional*,
and holds its writer lock from then on.  When a snapshot of it is ready the
mark goes.  A first ingest killed before that leaves a provisional collection
with no ready snapshot and a free writer lock: :func:`reap_abandoned` removes
it, so the retry creates it again with the settings it gives, and `ranklock
collections` lists no collection nobody finished.

An ingest that names settings a collection was not made with
(:func:`creation_conflicts`) is refused, naming each, instead of ignoring them:
they are fixed for the collection's lifetime.

>>> creation_conflicts(coll, {"index": "exact", "language": "simple"})   # doctest: +SKIP
['index exact (the collection has hnsw)', 'language simple (the collection has english)']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..collection import CollectionInfo, FieldSpec, parse_field_spec
from ..errors import SnapshotError
from ..settings import ChunkerParams
from ..store.database import Database
from .build import reap_dead_builds
from .writer import writing

__all__ = ["creation_conflicts", "reap_abandoned"]

#: How old a provisional collection without any snapshot must be before it counts as abandoned: its
#: first ingest takes the writer lock right after creating it, and only that moment is unguarded.
_UNGUARDED_S = 60


def reap_abandoned(db: Database, name: str | None = None) -> list[str]:
    """Remove the provisional collections (of ``name`` only, if given) whose first ingest died; their names."""
    rows = db.fetchall(
        "SELECT id, name, created_at < now() - make_interval(secs => %s) AS old, EXISTS (SELECT 1 FROM "
        "ranklock.snapshots AS s WHERE s.collection_id = c.id) AS built FROM ranklock.collections AS c "
        "WHERE c.provisional" + (" AND c.name = %s" if name is not None else "") + " ORDER BY c.name",
        [_UNGUARDED_S, name] if name is not None else [_UNGUARDED_S],
    )
    gone: list[str] = []
    for row in rows:
        if not (row["built"] or row["old"]):
            continue  # just made: its ingest is about to take the lock
        try:
            with writing(db, int(row["id"]), row["name"], 0.0):
                reap_dead_builds(db, int(row["id"]))
                deleted = db.fetchone(
                    "DELETE FROM ranklock.collections AS c WHERE c.id = %s AND c.provisional AND NOT EXISTS ("
                    "SELECT 1 FROM ranklock.snapshots AS s WHERE s.collection_id = c.id AND s.status <> 'failed') "
                    "RETURNING c.name",
                    [row["id"]],
                )
        except SnapshotError:
            continue  # a live writer holds it: its first ingest is running
        if deleted is not None:
            gone.append(str(deleted["name"]))
    return gone


def creation_conflicts(coll: CollectionInfo, given: Mapping[str, Any]) -> list[str]:
    """The settings in ``given`` (an ingest's ``create``, None: not given) that ``coll`` was not made with."""
    out: list[str] = []

    def differs(what: str, wanted: Any, has: Any) -> None:
        if wanted != has:
            out.append(f"{what} {wanted} (the collection has {has})")

    if given.get("language") is not None:
        differs("language", given["language"], coll.language)
    if given.get("accent") is not None:
        differs("accent", given["accent"], coll.accent)
    if given.get("index") is not None:
        differs("index", given["index"], coll.index_kind)
    chunker = given.get("chunker")
    if chunker is not None:
        ch = chunker if isinstance(chunker, ChunkerParams) else ChunkerParams(**chunker)
        for key in sorted(ch.model_fields_set):  # what was given, not its defaults
            differs(key, getattr(ch, key), getattr(coll.chunker, key))
    if given.get("fields") is not None:
        wanted = sorted(_spec(f).model_dump_json() for f in given["fields"])
        has = sorted(f.model_dump_json() for f in coll.fields)
        if wanted != has:
            out.append(
                f"fields {', '.join(_field(_spec(f)) for f in given['fields']) or '(none)'} (the collection has "
                f"{', '.join(_field(f) for f in coll.fields) or 'none'})"
            )
    return out


def _spec(f: str | FieldSpec) -> FieldSpec:
    return f if isinstance(f, FieldSpec) else parse_field_spec(f)


def _field(f: FieldSpec) -> str:
    return f"{f.name}:{f.type}{'!' if f.required else ''}"
