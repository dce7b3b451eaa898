"""What every file loader shares: the result of reading one file, and why a file could not be read."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ...errors import ConfigError

__all__ = ["Extracted", "Unreadable", "read_utf8", "require", "without_title_line"]


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
