"""A document as ranklock stores it: an id, a title, a body, typed metadata and display-only fields.

Its own module so that every loader (``loaders``, ``formats``) can build one without
importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import IngestError
from ..limits import MAX_DOC_ID_CHARS
from .bounds import metadata_problem
from .normalize import content_hash, unstorable

__all__ = ["Document"]


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    body: str
    metadata: dict[str, Any] = field(default_factory=dict)
    display: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The loaders report file and line first; this catches documents built in Python.
        where = f"document {self.doc_id!r}"
        if len(self.doc_id) > MAX_DOC_ID_CHARS:
            raise IngestError(
                f"{where[:60]}…: the document id is {len(self.doc_id):,} characters; the limit is "
                f"{MAX_DOC_ID_CHARS:,} (MAX_DOC_ID_CHARS). Use a shorter id."
            )
        for part, value in (("id", self.doc_id), ("title", self.title), ("text", self.body)):
            problem = unstorable(value, part)
            if problem is not None:
                raise IngestError(f"{where}: {problem}; remove it and ingest again.")
        for part, mapping in (("metadata", self.metadata), ("display", self.display)):
            # Size, depth and cycles first: unstorable walks the whole value.
            problem = metadata_problem(mapping, part) or unstorable(mapping, part)
            if problem is not None:
                raise IngestError(f"{where}: {problem}; fix the document and ingest again.")

    @property
    def content_hash(self) -> str:
        return content_hash(self.title, self.body, self.metadata)
