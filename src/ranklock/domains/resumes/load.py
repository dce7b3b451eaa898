"""Loading resumes from disk: folders of files, JSONL, and the Kaggle CSV (Category, Resume).

Every path ends in :func:`ranklock.domains.resumes.parse.parse_resume`, so identity
is scrubbed from the ranked text whatever the source format.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

from ...errors import IngestError
from ...ingest.loaders import Document
from .parse import parse_resume
from .schema import RESUME_FIELDS

__all__ = ["CSV_FIELDS", "EXTRACTED_SUFFIXES", "RESUME_SUFFIXES", "load_resumes", "resume_fields_for"]

RESUME_SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".json": "json",
    # Read to text by the file loaders (ranklock.ingest.formats), then parsed like a .txt resume.
    ".pdf": "text",
    ".docx": "text",
}
#: Suffixes whose text comes from a file loader rather than from reading the file as UTF-8.
EXTRACTED_SUFFIXES = (".pdf", ".docx")
#: The Kaggle CSV carries a category label per resume; it becomes one more keyword field.
CSV_FIELDS: tuple[str, ...] = (*RESUME_FIELDS, "category:keyword")


def resume_fields_for(path: str | Path) -> tuple[str, ...]:
    """The schema a new collection for the resumes at ``path`` is created with."""
    return CSV_FIELDS if Path(path).suffix.lower() == ".csv" else RESUME_FIELDS


def _csv(path: Path) -> list[Document]:
    # Resume cells run to tens of kilobytes; the csv module's default cap is 128 KiB per field.
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    docs = []
    try:
        fh = open(path, encoding="utf-8", newline="")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror}; check the path.") from exc
    with fh:
        reader = csv.DictReader(fh)
        cols = {c.lower(): c for c in reader.fieldnames or []}
        if "resume" not in cols:
            raise IngestError(
                f"{path}: no 'Resume' column (columns: {', '.join(reader.fieldnames or []) or 'none'}); "
                "the CSV needs a Resume column with the resume text and may have a Category column."
            )
        for n, row in enumerate(reader, 1):
            text = row[cols["resume"]] or ""
            if not text.strip():
                continue
            doc = parse_resume(f"{path.stem}-{n:04d}", text, "text")
            category = (row.get(cols.get("category", ""), "") or "").strip().lower()
            meta = dict(doc.metadata)
            if category:
                meta["category"] = category
            docs.append(Document(doc.doc_id, doc.title or category, doc.body, dict(sorted(meta.items())), doc.display))
    return docs


def _jsonl(path: Path) -> list[Document]:
    docs = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise IngestError(f"{path}:{lineno}: not valid JSON ({exc.msg}); one resume object per line.") from exc
            if not isinstance(obj, dict) or not str(obj.get("id", obj.get("_id", ""))).strip():
                raise IngestError(f"{path}:{lineno}: each line must be a JSON object with an 'id'; add one.")
            docs.append(parse_resume(str(obj.get("id", obj.get("_id"))), obj, "json"))
    return docs


def _file(path: Path, doc_id: str) -> Document:
    fmt = RESUME_SUFFIXES[path.suffix.lower()]
    if path.suffix.lower() in EXTRACTED_SUFFIXES:
        from ...ingest.formats import extract

        got = extract(path)  # Unreadable names the reason; load_resumes collects every one
        return parse_resume(doc_id, got.body, fmt)
    from ...ingest.formats.base import opened, read_utf8
    from ...settings import FileLimits

    # Opened as the folder loaders open a file: never a blocking open of a pipe, the text bounded in size.
    with opened(path, FileLimits.from_env()) as src:
        content = read_utf8(src)  # Unreadable (not UTF-8, too large) is collected like a PDF's
    return parse_resume(doc_id, content, fmt)


def _files(root: Path, files: list[Path]) -> list[Document]:
    """One resume per file; every unreadable PDF or DOCX is named in one error before anything is written."""
    from ...ingest.formats import Unreadable, UnreadableFile, unreadable_error

    docs, bad = [], []
    for f in files:
        rel = f.relative_to(root).as_posix()
        try:
            docs.append(_file(f, re.sub(r"\.[^.]+$", "", rel)))
        except Unreadable as exc:
            bad.append(UnreadableFile(rel, f.suffix.lower().lstrip("."), exc.reason))
    if bad:
        raise unreadable_error(root, bad, skip_hint=False)
    return docs


def load_resumes(path: str | Path) -> list[Document]:
    """Parse every resume at ``path``: a folder of .md/.txt/.json files, a .jsonl file, a .csv, or one file.

    Document ids are file paths relative to the folder without the suffix (a
    JSON object's ``id`` in JSONL, ``<stem>-<row>`` in a CSV); never a name.
    """
    p = Path(path)
    if not p.exists():
        raise IngestError(
            f"{p} does not exist; pass a folder of .md/.txt/.json/.pdf/.docx resumes, a .jsonl or a .csv file."
        )
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in RESUME_SUFFIXES)
        if not files:
            raise IngestError(f"{p} holds no .md, .txt, .json, .pdf or .docx resumes; nothing to ingest.")
        docs = _files(p, files)
    elif p.suffix.lower() == ".csv":
        docs = _csv(p)
    elif p.suffix.lower() in (".jsonl", ".ndjson"):
        docs = _jsonl(p)
    elif p.suffix.lower() in RESUME_SUFFIXES:
        docs = _files(p.parent, [p])
    else:
        raise IngestError(
            f"{p}: unknown resume format {p.suffix!r}; use .md, .txt, .json, .pdf, .docx, .jsonl or .csv."
        )
    seen: set[str] = set()
    for d in docs:
        if d.doc_id in seen:
            raise IngestError(f"{p}: resume id {d.doc_id!r} appears twice; ids must be unique.")
        seen.add(d.doc_id)
    return docs
