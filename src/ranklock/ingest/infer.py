"""Typed fields inferred from the metadata of a new collection's first ingest.

A collection made by a plain ``ranklock ingest docs corpus.jsonl`` gets a typed field for every
metadata key whose values agree on a type, as sqlite-utils' ``insert`` gives a new table a
column per key typed from the JSON values (and Datasette then filters on them): a user who
ingests ``{"year": 2021}`` expects ``--filter 'year >= 2020'`` to work.  docs/filters.md says
why each rule is what it is.

The type of a key is the JSON type of its non-null values:

    every value            type
    true / false           bool
    an integer (64-bit)    int
    a number               float    (integers and fractions mixed: numbers)
    "YYYY-MM-DD"           date     (ISO dates, and nothing else)
    ISO timestamp + zone   timestamp
    any other string       keyword  (strings mixed with dates too: strings)
    a list of strings      keyword[]

A key whose values disagree (a number in one document, a string in another), a nested
object, a list of anything but strings, a string too long to be an index key, or a name that
cannot be a column is left untyped: it stays in the metadata, searchable in no filter, and is
named in :attr:`FieldInference.untyped` with the reason.  Inferred fields are never required.

    >>> from ranklock import Document
    >>> inf = infer_fields([Document("a", "", "x", {"year": 2021}), Document("b", "", "y", {"year": "n/a"})])
    >>> inf.fields, inf.untyped
    ([], {'year': 'mixed types: a string in 1 document, an integer in 1 document'})
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..collection import RESERVED_COLUMNS, FieldSpec, reserved_kind
from ..limits import BIGINT_MAX, BIGINT_MIN, MAX_INFERRED_FIELDS, MAX_KEYWORD_CHARS
from .document import Document
from .timestamps import TimestampError, parse_date, parse_timestamp

__all__ = ["FieldInference", "infer_fields"]

_FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: How a message names the JSON value behind each field type.
_JSON_KIND = {
    "bool": "true/false",
    "int": "an integer",
    "float": "a number",
    "keyword": "a string",
    "date": "a string",
    "timestamp": "a string",
    "keyword[]": "a list of strings",
}
#: The as_of window: columns of their own, never typed fields, and nothing to report.
_TIME_WINDOW = frozenset({"effective_from", "effective_to"})


@dataclass(frozen=True)
class FieldInference:
    """What the first ingest's metadata said: the typed fields, and each key left untyped with why."""

    documents: int
    fields: list[FieldSpec]
    untyped: dict[str, str]

    def record(self) -> dict[str, Any]:
        """The JSON kept with the collection and written into every manifest of it."""
        return {
            "documents": self.documents,
            "fields": [f"{f.name}:{f.type}" for f in self.fields],
            "untyped": dict(sorted(self.untyped.items())),
        }


def _kind(value: Any) -> str:
    """The field type one JSON value asks for, or the reason it asks for none (starting with '!')."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if BIGINT_MIN <= value <= BIGINT_MAX else "!an integer beyond 64 bits"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        if len(value) > MAX_KEYWORD_CHARS:
            return f"!a string over {MAX_KEYWORD_CHARS} characters (text, not a label)"
        if _ISO_DATE.match(value):
            try:
                parse_date(value)
                return "date"
            except TimestampError:
                return "keyword"
        if "T" in value or " " in value:
            try:
                parse_timestamp(value)
                return "timestamp"
            except TimestampError:
                pass
        return "keyword"
    if isinstance(value, list):
        if all(isinstance(v, str) and len(v) <= MAX_KEYWORD_CHARS for v in value):
            return "keyword[]"
        return "!a list of other things than short strings"
    return "!a nested object"


def _merge(kinds: Counter[str]) -> str:
    """One type for a key's values, or the reason there is none (starting with '!')."""
    reasons = sorted(k for k in kinds if k.startswith("!"))
    if reasons:
        return reasons[0]
    found = set(kinds)
    if len(found) == 1:
        return found.pop()
    if found == {"int", "float"}:
        return "float"
    if found <= {"keyword", "date", "timestamp"}:
        return "keyword"
    json_kinds: Counter[str] = Counter()
    for k, n in kinds.items():
        json_kinds[_JSON_KIND[k]] += n
    counts = ", ".join(f"{k} in {n} document{'s' if n != 1 else ''}" for k, n in sorted(json_kinds.items()))
    return f"!mixed types: {counts}"


def infer_fields(docs: Sequence[Document]) -> FieldInference:
    """The typed fields ``docs``' metadata agrees on (at most MAX_INFERRED_FIELDS, the most common keys first)."""
    kinds: dict[str, Counter[str]] = {}
    present: Counter[str] = Counter()
    for d in docs:
        for key, value in d.metadata.items():
            present[key] += 1
            if value is not None:
                kinds.setdefault(key, Counter())[_kind(value)] += 1
    fields: list[FieldSpec] = []
    untyped: dict[str, str] = {}
    for key in sorted(present, key=lambda k: (-present[k], k)):
        if key in _TIME_WINDOW:
            continue
        if not _FIELD_NAME.match(key):
            untyped[key] = "not a field name (lowercase letters, digits and _, starting with a letter)"
            continue
        if key in RESERVED_COLUMNS:
            # Left in the metadata, untyped, rather than refused: one note's front matter must not fail the
            # ingest of a whole folder, and a field renamed behind the user's back (``seg_``) would answer a
            # filter on a name nobody wrote.  The report says why, and what to do.
            untyped[key] = f"a name ranklock reserves, {reserved_kind(key)}; rename the key to filter on it"
            continue
        if key not in kinds:
            untyped[key] = "null in every document"
            continue
        kind = _merge(kinds[key])
        if kind.startswith("!"):
            untyped[key] = kind[1:]
        elif len(fields) >= MAX_INFERRED_FIELDS:
            untyped[key] = f"more than {MAX_INFERRED_FIELDS} keys (MAX_INFERRED_FIELDS); declare it with --field"
        else:
            fields.append(FieldSpec(name=key, type=kind))
    return FieldInference(len(docs), sorted(fields, key=lambda f: f.name), dict(sorted(untyped.items())))
