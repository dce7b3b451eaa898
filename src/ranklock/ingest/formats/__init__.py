"""File loaders picked by extension: text, Markdown notes, PDF, DOCX and HTML.

:func:`load_files` reads a folder (or one file) and returns every document it
could read, what it read from each file, and every file it could not read with
the reason.  By default one unreadable file fails the whole load, naming all of
them, before anything is written; ``skip_unreadable=True`` leaves them out and
still names them.  Either way nothing is half-ingested.

A folder is a *source*: :attr:`FileLoad.root` is its real path and :attr:`FileLoad.read_at`
when the read began, so an ingest can mirror it (ranklock.snapshot.sources); a file or folder
that is there but cannot be read is named in ``unreadable`` (a folder's path ends in ``/``), never
taken for one that is gone.  Given the previous read (``previous=``), a file whose size, times
and inode are unchanged is not read again, so watching a folder costs what changes in it.

Files that are no document at all are skipped and named, never an error and never
silent: a file of a format no loader reads (``.csv``, ``.png``), and an empty one
(no text once front matter and a title line that only repeats the title are set
aside: a document of a title alone would turn up in unrelated searches).  Hidden
files and folders (``.obsidian/``, ``.DS_Store``) are application state, not notes,
and are passed over as git and ripgrep pass them.

A file is opened once, without blocking, and its type checked on the opened descriptor; its reader
reads that descriptor (:class:`OpenedFile`).  What one file may cost is bounded (ranklock.settings.FileLimits):
a document's text (RANKLOCK_MAX_DOCUMENT_BYTES, a text file refused by its size before it is read), a PDF's
pages and seconds.  A value a parser reads but Python refuses (a date that does not exist in front matter)
makes that file unreadable, named with the reason, never the folder.

Register another format with :func:`register` (one reader per suffix; it takes an :class:`OpenedFile`)::

    register(".rst", read_rst, "rst")
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import IngestError, RanklockError
from ...phrasing import plural, shown
from ...settings import FileLimits
from ..document import Document
from ..normalize import normalize
from .base import Extracted, OpenedFile, Unreadable, file_kind, opened, read_utf8, too_large, without_title_line
from .docx import read_docx
from .html import read_html
from .markdown import read_markdown
from .pdf import read_pdf

__all__ = [
    "FileLoad",
    "FileRead",
    "SkippedFile",
    "Extracted",
    "OpenedFile",
    "SUFFIXES",
    "Unreadable",
    "UnreadableFile",
    "extract",
    "load_files",
    "handles",
    "no_files_error",
    "register",
    "unreadable_error",
]

#: A reader reads the file it is handed, opened and checked (:class:`OpenedFile`): never its path again.
Reader = Callable[[OpenedFile], Extracted]


def read_text(src: OpenedFile) -> Extracted:
    """A plain text file: its name is the title."""
    return Extracted(title=src.path.stem, body=read_utf8(src))


#: suffix -> (reader, format name).  The format name is what reports show.
SUFFIXES: dict[str, tuple[Reader, str]] = {}


def register(suffix: str, reader: Reader, name: str) -> None:
    """Read files ending in ``suffix`` (e.g. ``".rst"``) with ``reader``; reports call the format ``name``."""
    SUFFIXES[suffix.lower()] = (reader, name)


register(".txt", read_text, "text")
register(".md", read_markdown, "markdown")
register(".markdown", read_markdown, "markdown")
register(".pdf", read_pdf, "pdf")
register(".docx", read_docx, "docx")
register(".html", read_html, "html")
register(".htm", read_html, "html")


@dataclass(frozen=True)
class FileRead:
    """What was read from one file."""

    path: str
    format: str
    doc_id: str
    characters: int
    metadata_keys: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "doc_id": self.doc_id,
            "characters": self.characters,
            "metadata": self.metadata_keys,
        }


@dataclass(frozen=True)
class UnreadableFile:
    """A file that could not become a document, and why."""

    path: str
    format: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "format": self.format, "reason": self.reason}


@dataclass(frozen=True)
class SkippedFile:
    """A file that is no document (an unsupported format, or empty), and why; never an error."""

    path: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


#: What says a file changed without reading it: size, modification and change times, inode.
Signature = tuple[int, int, int, int]


@dataclass
class FileLoad:
    """The documents read from a folder, per-file what was read, and every file that could not be or was skipped."""

    documents: list[Any] = field(default_factory=list)
    read: list[FileRead] = field(default_factory=list)
    unreadable: list[UnreadableFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    #: The folder's real path (symbolic links resolved): the source of its documents; None for one file.
    root: str | None = None
    #: When the read began (seconds since the epoch): of two reads of one folder, the later one holds.
    read_at: float = 0.0
    #: Each document's file signature, by doc_id: what a read given this one as ``previous`` reuses.
    signatures: dict[str, Signature] = field(default_factory=dict, repr=False)

    def by_format(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.read:
            out[r.format] = out.get(r.format, 0) + 1
        return dict(sorted(out.items()))

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": [r.as_dict() for r in self.read],
            "unreadable": [u.as_dict() for u in self.unreadable],
            "skipped": [s.as_dict() for s in self.skipped],
            "by_format": self.by_format(),
        }


def extract(path: Path, limits: FileLimits | None = None) -> Extracted:
    """Read one file with the reader for its suffix, under ``limits`` (default: the environment's);
    :class:`Unreadable` says why not."""
    entry = SUFFIXES.get(path.suffix.lower())
    if entry is None:
        raise Unreadable(
            f"no loader for {path.suffix or 'files without a suffix'!r}; known: {', '.join(sorted(SUFFIXES))}"
        )
    limits = limits or FileLimits.from_env()
    try:
        with opened(path, limits) as src:
            got = entry[0](src)
    except (Unreadable, RanklockError):
        raise  # a reason for this file, or a missing package (ConfigError), said as it is
    except OSError as exc:
        raise Unreadable(f"cannot read the file ({exc.strerror})") from None
    except RecursionError:
        raise Unreadable("its structure is nested too deeply to read; re-export it from its source") from None
    except Exception as exc:
        # A parser took a value that Python then refused (a ValueError deep in a library): that is this
        # file's problem, to be named with it, never a traceback that stops the folder.
        raise Unreadable(
            f"cannot be read ({type(exc).__name__}: {str(exc)[:200]}); re-export it from its source, and report "
            "it as a ranklock bug if the file opens elsewhere"
        ) from None
    size = len(got.body.encode("utf-8", "replace"))
    if size > limits.max_document_bytes:
        raise too_large(size, limits.max_document_bytes, "its text")
    return got


def unreadable_error(root: Path, bad: list[UnreadableFile], *, skip_hint: bool = True) -> IngestError:
    """One error naming every unreadable file and its reason, ending with the way(s) forward.

    Each name and reason is :func:`~ranklock.phrasing.shown`: a file name holds any character but ``/``,
    and a newline in one would forge a line of this message, an escape sequence rewrite the terminal.
    """
    lines = "\n".join(f"  {shown(u.path)}: {shown(u.reason, backslash=False)}" for u in bad)
    hint = ", or pass --skip-unreadable to ingest the rest and leave these out" if skip_hint else ""
    return IngestError(
        f"{plural(len(bad), 'file')} under {shown(str(root))} could not be read; nothing was ingested:\n{lines}\n"
        f"Fix or remove them{hint}."
    )


def no_files_error(path: str | Path) -> IngestError:
    """The refusal of a folder that holds no file a loader reads."""
    return IngestError(f"{path} holds no {', '.join(sorted(SUFFIXES))} files; nothing to ingest.")


def _entries(root: Path, follow_links: bool) -> tuple[list[Path], list[UnreadableFile]]:
    """Every non-hidden entry under ``root`` that is not a folder walked into, sorted by path; and the
    folders under it that could not be listed (their path ends in ``/``).

    A link to a folder is walked into only with ``follow_links`` (once per real folder, so a link
    loop ends); otherwise it is an entry of its own, to be named.
    """
    out: list[Path] = []
    unlisted: list[UnreadableFile] = []
    seen = {root.resolve()}
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            listed = list(folder.iterdir())
        except FileNotFoundError:
            continue  # removed while it was walked: gone, with what it held
        except OSError as exc:
            if folder == root:
                raise IngestError(
                    f"cannot list the folder {root} ({exc.strerror}); nothing was changed. Check its permissions."
                ) from None
            rel = "/".join(folder.relative_to(root).parts) + "/"
            unlisted.append(UnreadableFile(rel, "folder", f"cannot list the folder ({exc.strerror})"))
            continue
        for entry in listed:
            if entry.name.startswith("."):
                continue
            if entry.is_dir() and (follow_links or not entry.is_symlink()):
                real = entry.resolve()
                if real not in seen:
                    seen.add(real)
                    todo.append(entry)
                continue
            out.append(entry)
    return sorted(out, key=lambda e: e.relative_to(root).parts), unlisted


def _not_a_file(entry: Path, root: Path, follow_links: bool) -> str | None:
    """Why ``entry`` is not read as a file of the folder (a link out of it, a dangling link, a pipe); None: read it."""
    if entry.is_symlink():
        target = os.readlink(entry)
        if not entry.exists():
            return f"a symbolic link to {target}, which does not exist"
        if entry.is_dir():
            return f"a symbolic link to the folder {target}; not followed (--follow-links follows it)"
        real = entry.resolve()
        if not follow_links and not real.is_relative_to(root.resolve()):
            return (
                f"a symbolic link to {real}, outside {root}: only files inside the folder are read, since a link "
                "in a folder from elsewhere could hand over any file you can read; pass --follow-links to read it"
            )
    mode = entry.stat().st_mode
    if not stat.S_ISREG(mode):
        return f"{file_kind(mode)}, not a file; it is left out (reading it could wait forever)"
    return None


def load_files(
    path: str | Path,
    *,
    skip_unreadable: bool = False,
    follow_links: bool = False,
    allow_empty: bool = False,
    previous: FileLoad | None = None,
    limits: FileLimits | None = None,
) -> FileLoad:
    """Read every file with a known suffix under ``path`` (a folder, or one file), sorted by path.

    Document ids are paths relative to the folder, with their suffix.  Raises
    :class:`~ranklock.errors.IngestError` naming every unreadable file unless
    ``skip_unreadable``; then they are left out and listed in ``unreadable``.  A symbolic
    link that leads out of the folder, a dangling one, a pipe or a device with a known suffix
    is unreadable (named, never read); ``follow_links`` reads links wherever they lead.
    A folder with no such file is refused unless ``allow_empty`` (an ingest decides what an
    empty source means).  ``previous``, an earlier read of the same folder: files whose
    signature did not change are taken from it, not read again.  ``limits``: what one file may
    cost (default: the environment's, ranklock.settings.FileLimits).
    """
    p = Path(path)
    limits = limits or FileLimits.from_env()
    out = FileLoad(read_at=time.time())
    known = ", ".join(sorted(SUFFIXES))
    if p.is_dir():
        root = p
        out.root = os.path.realpath(p)
        files = []
        entries, out.unreadable = _entries(p, follow_links)
        for f in entries:
            rel = "/".join(f.relative_to(root).parts)
            try:
                why = _not_a_file(f, root, follow_links)
            except FileNotFoundError:
                continue  # removed since the folder was listed: gone
            if f.suffix.lower() in SUFFIXES:
                if why is None:
                    files.append(f)
                else:
                    out.unreadable.append(UnreadableFile(rel, SUFFIXES[f.suffix.lower()][1], why))
            elif why is not None:
                out.skipped.append(SkippedFile(rel, why))
            else:
                what = repr(f.suffix) if f.suffix else "files without a suffix"
                out.skipped.append(SkippedFile(rel, f"no loader for {what} (known: {known})"))
        if not files and not out.unreadable and not allow_empty:
            raise no_files_error(p)
    else:
        root, files = p.parent, [p]
        why = _not_a_file(p, root, True) if p.exists() else None  # a file named by the caller: links followed
        if why is not None:
            raise unreadable_error(p, [UnreadableFile(p.name, p.suffix.lower().lstrip(".") or "unknown", why)])
    reusable = _reusable(previous, out.root)
    for f in files:
        rel = f.relative_to(root).as_posix()
        fmt = SUFFIXES.get(f.suffix.lower(), (None, f.suffix.lower().lstrip(".") or "unknown"))[1]
        sig = _signature(f)
        if sig is None:
            continue  # removed since the folder was listed: gone
        misnamed = _name_problem(rel)
        if misnamed is not None:
            out.unreadable.append(UnreadableFile(rel, fmt, misnamed))
            continue
        if rel in reusable and reusable[rel][0] == sig:
            _, doc, read = reusable[rel]
            out.documents.append(doc)
            out.read.append(read)
            out.signatures[rel] = sig
            continue
        try:
            got = extract(f, limits)
        except Unreadable as exc:
            if _signature(f) is not None:  # still there: unreadable, not gone
                out.unreadable.append(UnreadableFile(rel, fmt, exc.reason))
            continue
        title = normalize(got.title)
        body = without_title_line(title, normalize(got.body))
        if not body.strip():
            out.skipped.append(
                SkippedFile(rel, "empty: no text to search (a title or front matter alone is no document)")
            )
            continue
        try:
            doc = _document(rel, title, body, got.metadata)
        except IngestError as exc:
            # What the document itself refuses (a name that is not UTF-8, a NaN in its metadata) is this file's
            # reason, as an unreadable file's is: named, and the rest read, with --skip-unreadable.
            out.unreadable.append(UnreadableFile(rel, fmt, _without_document(rel, str(exc))))
            continue
        out.documents.append(doc)
        out.read.append(FileRead(rel, fmt, rel, len(body), sorted(got.metadata)))
        out.signatures[rel] = sig
    out.skipped.sort(key=lambda s: s.path)
    out.unreadable.sort(key=lambda u: u.path)
    if out.unreadable and not skip_unreadable:
        raise unreadable_error(p, out.unreadable)
    if not out.documents and (out.unreadable or not allow_empty):
        counts = [f"{len(out.unreadable)} unreadable"] + ([f"{len(out.skipped)} skipped"] if out.skipped else [])
        raise IngestError(f"no file under {p} could be read ({', '.join(counts)}); nothing to ingest.")
    return out


def _signature(path: Path) -> Signature | None:
    """What says ``path`` changed (size, times, inode), or None when it is gone."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _reusable(previous: FileLoad | None, root: str | None) -> dict[str, tuple[Signature, Any, FileRead]]:
    """The documents of ``previous`` (a read of the same folder) by path, with their signatures."""
    if previous is None or previous.root is None or previous.root != root:
        return {}
    reads = {r.path: r for r in previous.read}
    return {
        d.doc_id: (previous.signatures[d.doc_id], d, reads[d.doc_id])
        for d in previous.documents
        if d.doc_id in previous.signatures and d.doc_id in reads
    }


def _name_problem(rel: str) -> str | None:
    """Why the path ``rel`` cannot be a document id (its bytes are not UTF-8), or None."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = os.fsencode(rel[exc.start])[0]
        return (
            f"its name is not UTF-8 (byte 0x{byte:02x} at character {exc.start + 1}), and a document id is text; "
            "rename the file (e.g. convmv -f latin1 -t utf8)"
        )
    return None


def _without_document(doc_id: str, message: str) -> str:
    """A Document's refusal without its leading ``document '<id>': `` (the file is named beside it)."""
    return message.removeprefix(f"document {doc_id!r}: ").rstrip(".")


def _document(doc_id: str, title: str, body: str, metadata: dict[str, Any]) -> Any:

    return Document(doc_id, title, body, metadata)


def handles(path: str | Path) -> bool:
    """True when ``path`` is read by these loaders: a folder without ``corpus.jsonl``, or a file with a known suffix."""
    p = Path(path)
    if p.is_dir():
        return not (p / "corpus.jsonl").exists()
    return p.suffix.lower() in SUFFIXES
