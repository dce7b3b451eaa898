"""Collections and their declared typed fields."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from .errors import ConfigError, NotFound
from .settings import ChunkerParams
from .store.tables import ADDED_COLUMNS, CHUNK_COLUMNS

if TYPE_CHECKING:
    from .embed.base import Embedder
    from .store.database import Database
    from .store.steps import Steps

__all__ = [
    "CollectionInfo",
    "FieldSpec",
    "FIELD_TYPES",
    "RESERVED_COLUMNS",
    "SYSTEM_COLUMNS",
    "check_field_name",
    "creation_differences",
    "insert_new_collection",
    "missing_collection",
    "reserved_kind",
    "new_collection_values",
    "parse_field_spec",
    "read_collection",
    "read_collection_steps",
    "validate_name",
]

FieldType = Literal["int", "float", "bool", "keyword", "keyword[]", "date", "timestamp"]
FIELD_TYPES: tuple[str, ...] = ("bool", "date", "float", "int", "keyword", "keyword[]", "timestamp")

#: PostgreSQL column type for each field type.
SQL_TYPES: dict[str, str] = {
    "int": "bigint",
    "float": "double precision",
    "bool": "boolean",
    "keyword": "text",
    "keyword[]": "text[]",
    "date": "date",
    "timestamp": "timestamptz",
}

#: PostgreSQL's system columns, which every table has: a column of that name cannot be created
#: (``oid`` was one until PostgreSQL 12 and is kept reserved for servers and tools that treat it so).
SYSTEM_COLUMNS = frozenset({"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid", "oid"})

#: Columns of every chunk table (ranklock.store.tables.CHUNK_COLUMNS), ``title`` (a document's own
#: attribute), the columns the SQL adds beside them (ranklock.store.tables.ADDED_COLUMNS: ``seg`` in a
#: union over segments, ``shard_key`` on a cluster) and the system columns: a typed field may not take
#: one of these names.  Taken from the declarations the SQL itself is written from, so a column added
#: there is reserved here; tests/test_reserved_names.py ingests every name the search SQL uses as a key.
RESERVED_COLUMNS = frozenset({c.name for c in CHUNK_COLUMNS} | {"title"} | set(ADDED_COLUMNS) | SYSTEM_COLUMNS)

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


def validate_name(kind: str, name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"invalid {kind} name {name!r}: use 1-63 characters, lowercase letters, digits and "
            "underscores, starting with a letter (e.g. 'scifact', 'resumes_2026')."
        )
    return name


#: HNSW build parameters of a new collection.  Twice pgvector's defaults (m 16,
#: ef_construction 64): measured on 200,000 generated 384-d vectors
#: (docs/benchmarks.md, issue 14), m 16 / 64 left recall@10 at 0.953 (ef_search
#: 100) and 0.995 (ef_search 1000) with 4 of 100 top-10 lists never exact,
#: while m 32 / 128 gave 1.000 at ef_search 100: a denser graph leaves no
#: poorly linked points for the search to miss, and answers that do not depend
#: on which random graph a build drew.  It costs ~2.5x the build time and
#: ~20% more index.  Existing collections keep the parameters they recorded.
HNSW_DEFAULTS = {"m": 32, "ef_construction": 128}


class FieldSpec(BaseModel):
    name: str
    type: FieldType
    required: bool = False

    def sql_type(self) -> str:
        return SQL_TYPES[self.type]


def reserved_kind(name: str) -> str:
    """What a reserved name (one of :data:`RESERVED_COLUMNS`) is to ranklock, for a message."""
    if name in SYSTEM_COLUMNS:
        return "a PostgreSQL system column"
    if name in ADDED_COLUMNS:
        return "a column ranklock's SQL adds to a segment's rows"
    if name == "title":
        return "a document's own title"
    return "a column of ranklock's chunk tables"


def check_field_name(name: str) -> None:
    """Refuse a field name that is not a name, or that a chunk table already has (its own or a system column)."""
    validate_name("field", name)
    if name in RESERVED_COLUMNS:
        kind = reserved_kind(name)
        raise ConfigError(
            f"field name {name!r} is reserved ({kind}); reserved names are {', '.join(sorted(RESERVED_COLUMNS))}. "
            "Rename the field."
        )


def parse_field_spec(text: str) -> FieldSpec:
    """Parse ``name:type`` or ``name:type!`` (required), e.g. ``years_exp:int!``, ``skills:keyword[]``."""
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([a-z\[\]]+)\s*(!?)\s*", text)
    if not m:
        raise ConfigError(
            f"bad field declaration {text!r}: write name:type (append ! for required), "
            f"type one of {', '.join(FIELD_TYPES)}; e.g. years_exp:int!"
        )
    name, ftype, req = m.group(1), m.group(2), m.group(3)
    check_field_name(name)
    if ftype not in FIELD_TYPES:
        raise ConfigError(f"unknown field type {ftype!r} for {name!r}; valid types: {', '.join(FIELD_TYPES)}.")
    return FieldSpec(name=name, type=ftype, required=bool(req))


class CollectionInfo(BaseModel):
    id: int
    name: str
    language: str
    accent: Literal["sensitive", "insensitive"]
    embedder_id: str
    embedder_sha256: str
    dim: int
    fields: list[FieldSpec] = Field(default_factory=list)
    index_kind: Literal["hnsw", "ivfflat", "exact"] = "hnsw"
    index_params: dict[str, Any] = Field(default_factory=dict)
    chunker: ChunkerParams
    normalization: str
    search_defaults: dict[str, Any] = Field(default_factory=dict)
    #: How the fields were inferred at the first ingest (ranklock.ingest.infer), or None: declared.
    field_inference: dict[str, Any] | None = None
    #: How its segments are cut (ranklock.segmenting): a time window, a partition key; {} for neither.
    segmenting: dict[str, Any] = Field(default_factory=dict)
    #: Its segments' shards on a Citus cluster (ranklock.snapshot.shards); None: ordinary tables on one node.
    shards: int | None = None
    #: Its snapshot retention (ranklock.snapshot.retention): ``{"keep", "keep_for_s"}``; None: the default.
    retention: dict[str, Any] | None = None
    active_snapshot_id: int | None = None
    previous_snapshot_id: int | None = None
    #: Made by an ingest that has not finished a snapshot yet (ranklock.snapshot.abandoned).
    provisional: bool = False

    def field(self, name: str) -> FieldSpec | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


def new_collection_values(
    name: str,
    *,
    language: str,
    accent: str,
    fields: Sequence[str | FieldSpec],
    index: str,
    index_params: dict[str, Any] | None,
    chunker: ChunkerParams | None,
    search_defaults: dict[str, Any] | None,
    configs: list[str],
    embedder: Callable[[], Embedder],
    normalization: str,
    field_inference: dict[str, Any] | None = None,
    window: str | None = None,
    partition: str | None = None,
    shards: int | None = None,
) -> dict[str, Any]:
    """The ``ranklock.collections`` row of a new collection, each setting checked (ConfigError).

    ``configs`` are the server's text-search configurations (the languages);
    ``embedder`` is called once every other setting has passed, since
    resolving it may load a model.
    """
    validate_name("collection", name)
    if accent not in ("sensitive", "insensitive"):
        raise ConfigError(f"accent policy {accent!r} is not valid; use 'sensitive' or 'insensitive'.")
    if index not in ("hnsw", "ivfflat", "exact"):
        raise ConfigError(f"index type {index!r} is not valid; use one of exact, hnsw, ivfflat.")
    specs = [f if isinstance(f, FieldSpec) else parse_field_spec(f) for f in fields]
    for spec in specs:
        check_field_name(spec.name)  # a FieldSpec built in Python skipped parse_field_spec's checks
    names = [f.name for f in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"field(s) declared twice: {', '.join(dupes)}; declare each field once.")
    if language not in configs:
        raise ConfigError(
            f"text-search language {language!r} is not a PostgreSQL text-search configuration; "
            f"available: {', '.join(configs)}."
        )
    params = dict(index_params or {})
    allowed = {"hnsw": {"m", "ef_construction"}, "ivfflat": {"lists"}, "exact": set()}[index]
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ConfigError(
            f"index parameter(s) {', '.join(unknown)} do not apply to {index}; "
            f"valid: {', '.join(sorted(allowed)) or 'none'}."
        )
    if index == "hnsw":
        params = {k: int(params.get(k, v)) for k, v in HNSW_DEFAULTS.items()}
    elif index == "ivfflat":
        params = {"lists": int(params.get("lists", 100))}
    from psycopg.types.json import Jsonb

    from .validation import parse_search_params

    sdefaults = parse_search_params(search_defaults or {}, error=ConfigError).model_dump(exclude_defaults=True)
    from .segmenting import Segmenting

    segmenting = Segmenting.declare(window, partition, {f.name: f.type for f in specs}).as_json()
    emb = embedder()
    ch = chunker or ChunkerParams()
    return {
        "name": name,
        "language": language,
        "accent": accent,
        "embedder_id": emb.id,
        "embedder_sha256": emb.sha256,
        "dim": emb.dim,
        "fields": Jsonb([f.model_dump() for f in specs]),
        "index_kind": index,
        "index_params": Jsonb(params),
        "chunker": Jsonb(ch.model_dump()),
        "normalization": normalization,
        "search_defaults": Jsonb(sdefaults),
        "field_inference": Jsonb(field_inference) if field_inference is not None else None,
        "segmenting": Jsonb(segmenting),
        "shards": shards,
    }


def insert_new_collection(db: Database, values: dict[str, Any], *, if_missing: bool) -> None:
    """Insert the row ``values``; an existing collection of that name is an error unless ``if_missing``
    and its settings equal ``values`` (two processes may create one collection at once)."""
    from .store.collections import insert_collection, read_creation

    name = values["name"]
    if insert_collection(db, values):
        return
    if not if_missing:
        raise ConfigError(f"collection {name!r} already exists; pick another name or ingest into it.")
    differences = creation_differences(read_creation(db, name, list(values)), values)
    if differences:
        raise ConfigError(
            f"collection {name!r} already exists (made earlier or by a concurrent process) with other "
            f"settings: {differences}. Use the existing collection's settings (see `ranklock "
            "collections`), or pick another name."
        )


def read_collection(db: Database, name: str) -> CollectionInfo:
    """The collection record of ``name``; NotFound lists the collections that exist."""
    from .store.steps import run_steps

    return run_steps(db, read_collection_steps(name))


def read_collection_steps(name: str) -> Steps[CollectionInfo]:
    """:func:`read_collection` as steps (ranklock.store.steps), for the sync and the async engine."""
    from .store.collections import collection_names_steps, collection_row_steps

    row = yield from collection_row_steps(name)
    if row is None:
        names = yield from collection_names_steps()
        raise missing_collection(name, names)
    row.pop("created_at", None)
    return CollectionInfo(**row)


def missing_collection(name: str, names: Sequence[str]) -> NotFound:
    """The error for a collection ``name`` that does not exist, naming the ones that do (``names``)."""
    return NotFound(
        f"no collection named {name!r}; existing: {', '.join(names) or '(none)'}. "
        "Create one with `ranklock ingest NAME PATH`."
    )


def creation_differences(existing: dict[str, Any], wanted: dict[str, Any]) -> str:
    """The creation settings in which ``existing`` (a collections row) differs from ``wanted``, or "".

    Values are compared as canonical JSON (``Jsonb`` parameters by their
    object), so ``{"m": 16}`` read back from jsonb equals the dict inserted.
    """
    import json

    def plain(value: Any) -> str:
        return json.dumps(getattr(value, "obj", value), sort_keys=True, default=str)

    parts = [
        f"{key} {plain(existing.get(key))} there, {plain(value)} here"
        for key, value in wanted.items()
        if plain(existing.get(key)) != plain(value)
    ]
    return "; ".join(parts)
