"""What every file loader shares: the file opened for its reader, the result of reading it, and why a file
could not be read.

A file is opened once, without blocking (``O_NONBLOCK``: opening a named pipe for reading would wait for a
writer for ever), and its type is checked on the opened descriptor (``fstat``), so a file swapped for a pipe
or a device between the folder's listing and the read is refused, never waited on.  Its reader reads that
descriptor (:class:`OpenedFile`), never the path again.
"""

from __future__ import annotations

import importlib
import os
import stat
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from ...errors import ConfigError
from ...limits import MAX_ZIP_PART_BYTES, MAX_ZIP_RATIO, MAX_ZIP_TOTAL_BYTES
from ...settings import FileLimits

__all__ = [
    "MARKUP_FACTOR",
    "Extracted",
    "OpenedFile",
    "Unreadable",
    "check_zip",
    "file_kind",
    "opened",
    "read_utf8",
    "require",
    "too_large",
    "without_title_line",
]

#: An HTML file may be this many times RANKLOCK_MAX_DOCUMENT_BYTES before it is read: its text is what the
#: limit bounds, and markup (tags, scripts, styles) is commonly three to ten times the text of a page.
MARKUP_FACTOR = 4


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for a message: a named pipe, a socket, a device, a folder."""
    for test, name in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


@dataclass(frozen=True)
class OpenedFile:
    """One file opened for its reader: its path (for the title and dated names), its size, and its bytes,
    read from the descriptor whose type was checked."""

    path: Path
    file: IO[bytes]
    #: Bytes, from ``fstat`` of the opened descriptor.
    size: int
    limits: FileLimits

    def stream(self) -> IO[bytes]:
        """The file from its first byte (a reader that takes a file object: zipfile, python-docx)."""
        self.file.seek(0)
        return self.file

    def read_bytes(self, most: int) -> bytes:
        """At most ``most`` bytes and one more, from the first: a file that grows while it is read stays bounded."""
        return self.stream().read(most + 1)


def too_large(size: int, limit: int, what: str) -> Unreadable:
    """The refusal of a document whose text (``what``: "the file", "its text") is ``size`` bytes."""
    return Unreadable(
        f"{what} is {size:,} bytes; a document's text may be at most {limit:,} bytes "
        "(RANKLOCK_MAX_DOCUMENT_BYTES): split it into smaller files, or raise the limit"
    )


@contextmanager
def opened(path: Path, limits: FileLimits) -> Iterator[OpenedFile]:
    """``path`` opened for reading without blocking, refused (:class:`Unreadable`) unless it is a regular file."""
    # O_NONBLOCK: a pipe opens at once (and is refused below) instead of waiting for a writer; O_NOCTTY: a
    # terminal device never becomes this process's controlling terminal.  Regular files ignore both.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise Unreadable(f"cannot open the file ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(f"{file_kind(st.st_mode)}, not a file; it is left out (reading it could wait forever)")
        os.set_blocking(fd, True)
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with file:
        yield OpenedFile(path, file, st.st_size, limits)


@dataclass(frozen=True)
class Extracted:
    """The text a loader read from one file, with what the file itself says about it."""

    title: str
    body: str
    metadata: dict[str, Any] = field(default_factory=dict)


class Unreadable(Exception):
    """This file cannot become a document; ``reason`` says why in words a person can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency, or say which ``ranklock[extra]`` installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # A package that is installed but fails to import (a missing dependency of its own) must not be
        # reported as absent: say what the import said.
        top = module.split(".")[0]
        absent = isinstance(exc, ModuleNotFoundError) and exc.name == top
        why = "which is not installed" if absent else f"which is installed but cannot be imported ({exc})"
        raise ConfigError(
            f"reading these files needs the optional package {top!r}, {why}; "
            f"install it with: pip install 'ranklock[{extra}]'"
        ) from None


#: Parts smaller than this once inflated are not held to MAX_ZIP_RATIO (ranklock.limits).
_RATIO_FROM_BYTES = 1 << 20


def check_zip(src: OpenedFile, what: str) -> None:
    """Refuse a zip-based file (``what``: ".docx") whose parts would inflate past the limits: a zip bomb.

    Read from the archive's directory, before anything is inflated.  The sizes it declares are what
    Python's zipfile inflates to at most (a part that lies fails its CRC check there), so refusing
    by them bounds the memory and time any reader of the file can spend.
    """
    try:
        with zipfile.ZipFile(src.stream()) as z:
            parts = z.infolist()
    except (zipfile.BadZipFile, ValueError) as exc:
        raise Unreadable(f"not a valid {what} package (a broken zip archive: {exc}); open and re-save it") from None
    for part in parts:
        if part.file_size > MAX_ZIP_PART_BYTES:
            raise Unreadable(
                f"its part {part.filename!r} inflates to {part.file_size:,} bytes; the limit is "
                f"{MAX_ZIP_PART_BYTES:,} (MAX_ZIP_PART_BYTES): a zip bomb, or a document far larger than any "
                f"{what} needs; split it or save it again"
            )
        ratio = part.file_size / max(part.compress_size, 1)
        if part.file_size >= _RATIO_FROM_BYTES and ratio > MAX_ZIP_RATIO:
            raise Unreadable(
                f"its part {part.filename!r} inflates {ratio:,.0f} times ({part.compress_size:,} to "
                f"{part.file_size:,} bytes); the limit is {MAX_ZIP_RATIO} (MAX_ZIP_RATIO): a zip bomb; save the "
                "document again from its application"
            )
    total = sum(p.file_size for p in parts)
    if total > MAX_ZIP_TOTAL_BYTES:
        raise Unreadable(
            f"its {len(parts):,} parts inflate to {total:,} bytes in all; the limit is {MAX_ZIP_TOTAL_BYTES:,} "
            f"(MAX_ZIP_TOTAL_BYTES): a zip bomb, or a {what} far larger than a document needs"
        )


def read_utf8(src: OpenedFile, *, markup: bool = False) -> str:
    """The file as UTF-8 text, or :class:`Unreadable`: larger than a document may be (refused by its size,
    before it is read; ``markup``: at :data:`MARKUP_FACTOR` times the limit), not UTF-8, or with NUL bytes,
    which PostgreSQL text refuses."""
    limit = src.limits.max_document_bytes * (MARKUP_FACTOR if markup else 1)
    size = src.size
    data = b""
    if size <= limit:
        data = src.read_bytes(limit)
        size = len(data)  # more than the limit: it grew since it was opened
    if size > limit and markup:
        raise Unreadable(
            f"the file is {size:,} bytes; an HTML file may be at most {MARKUP_FACTOR} times a document's text, "
            f"{limit:,} bytes (RANKLOCK_MAX_DOCUMENT_BYTES): split it, or raise the limit"
        )
    if size > limit:
        raise too_large(size, limit, "the file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 text (byte {exc.start}); re-encode it as UTF-8") from None
    if "\x00" in text:
        raise Unreadable(
            f"contains a NUL byte at character {text.index(chr(0))}; remove it (PostgreSQL text cannot hold NUL)"
        )
    return text


def _comparable(line: str) -> str:
    return " ".join(line.split()).strip(" #:.-").casefold()


def without_title_line(title: str, body: str) -> str:
    """``body`` without its first line when that line only repeats ``title``.

    PDF, DOCX and HTML texts usually begin with the heading their title comes from, and the
    stored text is title + body: the title would be read, embedded and shown twice.
    Compared without case, extra spaces or a Markdown ``#``.

    >>> without_title_line("Kiln firing", "KILN FIRING\n\nBisque first.")
    'Bisque first.'
    """
    first, _, rest = body.strip().partition("\n")
    if title.strip() and _comparable(first) == _comparable(title):
        return rest.strip()
    return body
