"""Corpus loaders: BEIR ``corpus.jsonl``, plain JSONL, and folders of files (text, Markdown, PDF, DOCX, HTML).

Every loader yields :class:`Document` objects already normalised.  A broken
file is an :class:`IngestError` naming the file, the line and the fix, raised
before anything is written, so a bad corpus never half-applies.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import IngestError
from ..limits import MAX_DOC_ID_CHARS, MAX_METADATA_BYTES
from ..settings import FileLimits
from .document import Document
from .normalize import normalize, unstorable

__all__ = ["Document", "check_text_sizes", "load_corpus", "load_jsonl_stream", "text_bytes", "too_large_error"]


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is too large for a 64-bit float")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; write null or a finite number")


def _parse_line(path: Path, lineno: int, raw: bytes) -> Any:
    """One JSONL line as a Python value, or an IngestError naming the file, the line and the fix."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(
            f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
            "re-encode the file as UTF-8 and ingest again."
        ) from None
    try:
        rec = json.loads(line, parse_float=_finite_float, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise IngestError(
            f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
            "each line must be one JSON object. Fix or remove the line and ingest again."
        ) from None
    except RecursionError:
        raise IngestError(f"{path}:{lineno}: the JSON is nested too deeply to read; flatten the record.") from None
    except ValueError as exc:  # NaN / Infinity, or an integer of thousands of digits
        raise IngestError(f"{path}:{lineno}: {exc}; fix the value and ingest again.") from None
    try:
        problem = unstorable(rec)
    except RecursionError:
        raise IngestError(f"{path}:{lineno}: the JSON is nested too deeply to store; flatten the record.") from None
    if problem is not None:
        raise IngestError(f"{path}:{lineno}: {problem}; remove it from the record and ingest again.")
    return rec


def _jsonl_documents(path: Path) -> Iterator[Document]:
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed by the with below, after the error check
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror}; check the path and permissions.") from exc
    with fh:
        yield from _stream_documents(path, fh)


#: How many bytes of JSON a record may take per byte of its text: a writer that escapes every non-ASCII
#: character (Python's json.dumps by default) writes one UTF-8 byte as up to six (``\u00e9`` for é's two).
_JSON_PER_TEXT_BYTE = 6


def too_large_error(where: str, size: int, limit: int) -> IngestError:
    """The refusal of a document whose text is ``size`` bytes, over RANKLOCK_MAX_DOCUMENT_BYTES (``limit``)."""
    return IngestError(
        f"{where}: the document's text is {size:,} bytes; a document's text may be at most {limit:,} bytes "
        "(RANKLOCK_MAX_DOCUMENT_BYTES). Split it into smaller documents, or raise the limit."
    )


def text_bytes(text: str) -> int:
    """The UTF-8 size of ``text``, counted without encoding a text that cannot be near a limit."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _stream_documents(path: Path, fh: BinaryIO) -> Iterator[Document]:
    """The documents of a JSONL stream; ``path`` names it in messages."""
    limit = FileLimits.from_env().max_document_bytes
    # A record holds its text, escaped, and its metadata; a longer line is refused before it is held whole.
    most = limit * _JSON_PER_TEXT_BYTE + 8 * MAX_METADATA_BYTES
    # Bytes, decoded line by line, so a bad byte is reported with its line number.
    lineno = 0
    while raw := fh.readline(most + 1):
        lineno += 1
        if len(raw) > most:
            raise IngestError(
                f"{path}:{lineno}: the line is over {most:,} bytes, longer than any record whose text a document may "
                f"hold ({limit:,} bytes, RANKLOCK_MAX_DOCUMENT_BYTES); split the document, or raise the limit."
            )
        if not raw.strip():
            continue
        rec = _parse_line(path, lineno, raw)
        if not isinstance(rec, dict):
            raise IngestError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}.")
        raw_id = rec.get("_id", rec.get("id"))
        if raw_id is None or str(raw_id).strip() == "":
            raise IngestError(f"{path}:{lineno}: the record has no `_id` (BEIR) or `id` field; add one.")
        if isinstance(raw_id, (dict, list)):
            raise IngestError(
                f"{path}:{lineno}: the record's id is a JSON {type(raw_id).__name__}; use a string or a number."
            )
        if len(str(raw_id)) > MAX_DOC_ID_CHARS:
            raise IngestError(
                f"{path}:{lineno}: the document id is {len(str(raw_id)):,} characters; the limit is "
                f"{MAX_DOC_ID_CHARS:,} (MAX_DOC_ID_CHARS). Use a shorter id."
            )
        text = rec.get("text", rec.get("body"))
        if not isinstance(text, str):
            raise IngestError(
                f"{path}:{lineno}: document {raw_id!r} has no string `text` field; add the document text."
            )
        title = rec.get("title") or ""
        if not isinstance(title, str):
            raise IngestError(f"{path}:{lineno}: document {raw_id!r} has a non-string `title`.")
        metadata = rec.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise IngestError(f"{path}:{lineno}: document {raw_id!r}: `metadata` must be a JSON object.")
        display = rec.get("display") or {}
        if not isinstance(display, dict):
            raise IngestError(f"{path}:{lineno}: document {raw_id!r}: `display` must be a JSON object.")
        if text_bytes(text) > limit:
            raise too_large_error(f"{path}:{lineno}: document {raw_id!r}", text_bytes(text), limit)
        yield Document(normalize(str(raw_id)), normalize(title), normalize(text), metadata, display)


def load_corpus(path: str | Path) -> list[Document]:
    """Load every document at ``path`` (a BEIR folder, a ``.jsonl`` file, a folder of files or one file)."""
    # Here, not at the top: modules that only need Document (a search, via snapshot) must not load the readers.
    from . import formats

    p = Path(path)
    if not p.exists():
        raise IngestError(f"{p} does not exist; pass a corpus.jsonl, a BEIR folder, or a folder of .txt/.md files.")
    if p.is_dir() and (p / "corpus.jsonl").exists():
        docs = list(_jsonl_documents(p / "corpus.jsonl"))
    elif p.suffix.lower() in (".jsonl", ".ndjson"):
        docs = list(_jsonl_documents(p))
    elif p.is_dir() or p.suffix.lower() in formats.SUFFIXES:
        # Folders and single files go through the loader registered for each suffix (ranklock.ingest.formats).
        docs = formats.load_files(p).documents
    else:
        raise IngestError(
            f"{p}: unknown corpus format {p.suffix!r}; use a .jsonl file, a BEIR folder with corpus.jsonl, "
            f"or a folder of {', '.join(sorted(formats.SUFFIXES))} files."
        )
    return _unique(p, docs)


def load_jsonl_stream(fh: BinaryIO, name: str = "<stdin>") -> list[Document]:
    """The documents of JSONL read from ``fh`` (``ranklock ingest NAME -`` reads standard input); ``name`` in messages."""
    return _unique(Path(name), list(_stream_documents(Path(name), fh)))


def check_text_sizes(docs: Sequence[Document], limit: int | None = None) -> None:
    """Refuse (IngestError) the first document whose text is over RANKLOCK_MAX_DOCUMENT_BYTES (or ``limit``).

    The loaders refuse a file or a record before it is held; this is for documents built in Python.
    """
    most = limit if limit is not None else FileLimits.from_env().max_document_bytes
    for d in docs:
        # len() counts characters, each one to four bytes: only a text that may be over is encoded.
        if len(d.body) * 4 > most and text_bytes(d.body) > most:
            raise too_large_error(f"document {d.doc_id!r}", text_bytes(d.body), most)


def _unique(p: Path, docs: list[Document]) -> list[Document]:
    """``docs``, refused when an id appears twice."""
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):
        if d.doc_id in seen:
            raise IngestError(
                f"{p}: document id {d.doc_id!r} appears twice (records {seen[d.doc_id] + 1} and {i + 1}); "
                "ids must be unique within one ingest."
            )
        seen[d.doc_id] = i
    return docs
