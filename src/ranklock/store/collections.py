"""Collection records in ``ranklock.collections``: read, list, insert.

The checks on what a collection may be (names, fields, index) and the
:class:`~ranklock.collection.CollectionInfo` record built from a row live in
:mod:`ranklock.collection` (above this layer); this module only reads and
writes the rows::

    >>> collection_row(db, "docs")["active_snapshot_id"]
    >>> [c.name for c in list_collections(db)]
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from psycopg import sql

from .database import Database
from .steps import Fetch, Steps, run_steps

__all__ = [
    "CollectionSummary",
    "collection_names",
    "collection_names_steps",
    "collection_row",
    "collection_row_steps",
    "insert_collection",
    "list_collections",
    "list_collections_steps",
    "read_creation",
    "text_search_configs",
]


def collection_row(db: Database, name: str) -> dict[str, Any] | None:
    """The ``ranklock.collections`` row of ``name`` (every column), or None."""
    return run_steps(db, collection_row_steps(name))


def collection_row_steps(name: str) -> Steps[dict[str, Any] | None]:
    """:func:`collection_row` as steps (ranklock.store.steps)."""
    rows = yield Fetch("SELECT * FROM ranklock.collections WHERE name = %s", [name])
    return rows[0] if rows else None


def collection_names(db: Database) -> list[str]:
    """The names of every collection, sorted."""
    return run_steps(db, collection_names_steps())


def collection_names_steps() -> Steps[list[str]]:
    """:func:`collection_names` as steps (ranklock.store.steps)."""
    rows = yield Fetch("SELECT name FROM ranklock.collections ORDER BY name")
    return [r["name"] for r in rows]


@dataclass(frozen=True)
class CollectionSummary:
    """One line of ``ranklock collections``: a collection and its active snapshot's counts (None: no snapshot yet)."""

    name: str
    language: str
    accent: str
    embedder_id: str
    dim: int
    index_kind: str
    active_snapshot_id: int | None
    documents: int | None
    chunks: int | None
    manifest_hash: str | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``ranklock collections --json`` and ``GET /api/collections``, keys in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def list_collections(db: Database) -> list[CollectionSummary]:
    """Every collection by name, with its active snapshot's document and chunk counts."""
    return run_steps(db, list_collections_steps())


def list_collections_steps() -> Steps[list[CollectionSummary]]:
    """:func:`list_collections` as steps (ranklock.store.steps)."""
    rows: list[dict[str, Any]] = yield Fetch(
        "SELECT c.name, c.language, c.accent, c.embedder_id, c.dim, c.index_kind, c.active_snapshot_id, "
        "s.doc_count AS documents, s.chunk_count AS chunks, s.manifest_hash "
        "FROM ranklock.collections c LEFT JOIN ranklock.snapshots s ON s.id = c.active_snapshot_id "
        "ORDER BY c.name"
    )
    return [CollectionSummary(**r) for r in rows]


def text_search_configs(db: Database) -> list[str]:
    """The names of the server's text-search configurations (the languages a collection may use)."""
    return [r["cfgname"] for r in db.fetchall("SELECT cfgname FROM pg_ts_config ORDER BY cfgname")]


def insert_collection(db: Database, values: dict[str, Any]) -> bool:
    """Insert a collection row with ``values`` (column -> value); False when the name is taken.

    ON CONFLICT: two processes creating one name at once must not fail on
    the unique constraint; the loser learns it lost from the empty RETURNING.
    """
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in values)
    created = db.fetchone(
        sql.SQL("INSERT INTO ranklock.collections ({}) VALUES ({}) ON CONFLICT (name) DO NOTHING RETURNING id").format(
            cols, sql.SQL(", ").join(sql.Placeholder() * len(values))
        ),
        list(values.values()),
    )
    return created is not None


def read_creation(db: Database, name: str, columns: list[str]) -> dict[str, Any]:
    """The creation settings (``columns``) of the existing collection ``name``; {} if it vanished."""
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    return db.fetchone(sql.SQL("SELECT {} FROM ranklock.collections WHERE name = %s").format(cols), [name]) or {}
