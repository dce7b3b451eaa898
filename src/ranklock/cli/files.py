"""What ``ranklock ingest`` says about the files it read (and those it could not) from a folder.

Every name is :func:`~ranklock.phrasing.shown`: a file name may hold any character but ``/``, and an escape
sequence or a newline in one must print as text, never act on the terminal or forge a line.
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from ..ingest.formats import FileLoad, handles, load_files
from ..phrasing import shown
from ._common import console, err_console

__all__ = ["load_for_cli", "print_files_report"]

#: Up to this many files, the report lists each one; above it, a count per format.
LIST_FILES_UP_TO = 20


def load_for_cli(
    path: Path, skip_unreadable: bool, follow_links: bool = False, previous: FileLoad | None = None
) -> FileLoad | None:
    """The files at ``path`` read by their loaders, or ``None`` for JSONL/BEIR input (the engine reads those).

    An empty folder is read as such: the engine says what it means for the collection (a mirror of a
    folder that held documents refuses to remove them all without --allow-empty).
    """
    if not path.exists() or not handles(path):
        return None
    return load_files(
        path, skip_unreadable=skip_unreadable, follow_links=follow_links, allow_empty=True, previous=previous
    )


def print_files_report(loaded: FileLoad) -> None:
    """Per file what was read (or a count per format for many files), then every file left out and why."""
    if len(loaded.read) <= LIST_FILES_UP_TO:
        for r in loaded.read:
            keys = f"; metadata {', '.join(shown(k) for k in r.metadata_keys)}" if r.metadata_keys else ""
            console.print(
                f"read {escape(shown(r.path))} ({r.format}): {r.characters:,} characters{escape(keys)}", highlight=False
            )
    else:
        counts = ", ".join(f"{n:,} {fmt}" for fmt, n in loaded.by_format().items())
        console.print(f"read {len(loaded.read):,} files: {counts}", highlight=False)
    for u in loaded.unreadable:
        err_console.print(
            f"[yellow]skipped[/] {escape(shown(u.path))} ({u.format}): {escape(shown(u.reason, backslash=False))}",
            highlight=False,
        )
    for s in loaded.skipped:
        err_console.print(
            f"[yellow]skipped[/] {escape(shown(s.path))}: {escape(shown(s.reason, backslash=False))}", highlight=False
        )
