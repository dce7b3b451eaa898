"""Collections and their declared typed fields."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from .errors import ConfigError
from .settings import ChunkerParams

__all__ = [
    "CollectionInfo",
    "FieldSpec",
    "FIELD_TYPES",
    "RESERVED_COLUMNS",
    "creation_differences",
    "parse_field_spec",
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

#: Columns of every chunk table; a typed field may not take one of these names.
RESERVED_COLUMNS = frozenset(
    {
        "row_id",
        "doc_id",
        "chunk",
        "char_start",
        "char_end",
        "content_hash",
        "title",
        "text",
        "text_sha256",
        "tsv",
        "embedding",
        "embedder_id",
        "vec_digest",
        "effective_from",
        "effective_to",
        "doc_len",
    }
)

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


def validate_name(kind: str, name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"invalid {kind} name {name!r}: use 1-63 characters, lowercase letters, digits and "
            "underscores, starting with a letter (e.g. 'scifact', 'resumes_2026')."
        )
    return name


class FieldSpec(BaseModel):
    name: str
    type: FieldType
    required: bool = False

    def sql_type(self) -> str:
        return SQL_TYPES[self.type]


def parse_field_spec(text: str) -> FieldSpec:
    """Parse ``name:type`` or ``name:type!`` (required), e.g. ``years_exp:int!``, ``skills:keyword[]``."""
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([a-z\[\]]+)\s*(!?)\s*", text)
    if not m:
        raise ConfigError(
            f"bad field declaration {text!r}: write name:type (append ! for required), "
            f"type one of {', '.join(FIELD_TYPES)}; e.g. years_exp:int!"
        )
    name, ftype, req = m.group(1), m.group(2), m.group(3)
    validate_name("field", name)
    if name in RESERVED_COLUMNS:
        raise ConfigError(
            f"field name {name!r} is reserved; reserved names are {', '.join(sorted(RESERVED_COLUMNS))}. "
            "Rename the field."
        )
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
    active_snapshot_id: int | None = None
    previous_snapshot_id: int | None = None

    def field(self, name: str) -> FieldSpec | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


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
