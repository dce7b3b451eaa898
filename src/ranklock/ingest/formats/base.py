"""What every file loader shares: the result of reading one file, and why a file could not be read."""

from __future__ import annotations

import importlib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ...errors import ConfigError
from ...limits import MAX_ZIP_PART_BYTES, MAX_ZIP_RATIO, MAX_ZIP_TOTAL_BYTES

__all__ = ["Extracted", "Unreadable", "check_zip", "read_utf8", "require", "without_title_line"]


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


def check_zip(path: Path, what: str) -> None:
    """Refuse a zip-based file (``what``: ".docx") whose parts would inflate past the limits: a zip bomb.

    Read from the archive's directory, before anything is inflated.  The sizes it declares are what
    Python's zipfile inflates to at most (a part that lies fails its CRC check there), so refusing
    by them bounds the memory and time any reader of the file can spend.
    """
    try:
        with zipfile.ZipFile(path) as z:
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


def read_utf8(path: Path) -> str:
    """The file as UTF-8 text, or :class:`Unreadable` (not UTF-8, or NUL bytes, which PostgreSQL text refuses)."""
    data = path.read_bytes()
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
