"""``ranklock ingest COLLECTION FOLDER --watch``: keep a collection mirroring a folder as its files change.

The folder is watched through the operating system's notifications (inotify on Linux, FSEvents
on macOS) by ``watchfiles`` (``pip install 'ranklock[watch]'``, part of ``ranklock[files]``).
Events come in bursts (an editor writes a temporary file and renames it over the note, a `git
checkout` touches hundreds of files), so a change is ingested once the folder has been quiet for
``WATCH_QUIET_MS``, or at the latest ``WATCH_MAX_WAIT_MS`` after the burst began (ranklock.settings).

Each change reads the folder again, but only the files whose size, times or inode changed
(``load_files(previous=...)``), and ingests it as a mirror: a new snapshot whose new segment holds
the documents that changed, the others shared with its parent, the deleted ones masked; a burst
that changed no document (a file of an unknown format, a save without a change) makes none.  Hidden
files and folders (``.obsidian/``, ``.git/``) and the data directory are not watched, as the loader
never reads them.  While watching, a file that cannot be read is named and kept, never a reason to
stop; an ingest that fails (the folder emptied without --allow-empty, the server gone) is printed and
the next change tries again.  Ctrl-C (or SIGTERM) stops it, with one line saying what was done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rich.markup import escape

from .._extras import require
from ..errors import RanklockError
from ..phrasing import plural, shown
from ..settings import WATCH_MAX_WAIT_MS, WATCH_QUIET_MS
from ._common import console, err_console, print_json

__all__ = ["watch_folder"]


@dataclass
class WatchTally:
    """What a watch did, for the line it ends with."""

    started: float = field(default_factory=time.monotonic)
    changes: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    failed: int = 0
    snapshot: int | None = None

    def summary(self, collection: str, root: str, cut: bool) -> str:
        took = time.monotonic() - self.started
        done = (
            f"{plural(self.changes, 'change')} ingested (added {self.added}, changed {self.changed}, "
            f"removed {self.removed})"
        )
        failed = f", {plural(self.failed, 'change')} refused (printed above)" if self.failed else ""
        active = f"snapshot {self.snapshot} active" if self.snapshot is not None else "no snapshot"
        interrupted = (
            "; the change being ingested when stopped was not written (the next ingest reads it)" if cut else ""
        )
        return f"stopped watching {root} after {took:.0f}s: {done}{failed}; {collection!r} has {active}{interrupted}."


@contextlib.contextmanager
def _stop_on_term() -> Iterator[None]:
    """SIGTERM (a service manager's stop) ends the watch as Ctrl-C does."""

    def raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fingerprint(load: Any) -> tuple[Any, ...]:
    """What an ingest of ``load`` depends on: each document's id and content hash, and the unreadable paths."""
    return (
        tuple(sorted((d.doc_id, d.content_hash) for d in load.documents)),
        tuple(u.path for u in load.unreadable),
    )


def watch_folder(
    eng: Any,
    collection: str,
    path: Path,
    first: Any,
    options: dict[str, Any],
    *,
    follow_links: bool,
    as_json: bool,
) -> None:
    """Watch ``path`` and ingest each change into ``collection`` until Ctrl-C; ``first``: the read just ingested."""
    from ..ingest.formats import load_files
    from .ingest_report import print_report

    watchfiles = require("watch", "watchfiles", "ranklock ingest --watch")
    root = os.path.realpath(path)
    data_dir = os.path.realpath(eng.settings.home)
    tally = WatchTally(snapshot=eng.collection(collection).active_snapshot_id)
    last = first
    seen = _fingerprint(first) if first is not None else None

    def wanted(_change: Any, changed: str) -> bool:
        # As the loader reads: nothing hidden, and never the data directory (PostgreSQL writes there).
        rel = os.path.relpath(changed, root)
        if rel == os.curdir:
            return True
        if changed == data_dir or changed.startswith(data_dir + os.sep):
            return False
        return not any(part.startswith(".") for part in rel.split(os.sep))

    say = err_console if as_json else console
    say.print(f"watching {escape(root)} for changes (Ctrl-C stops)", highlight=False, soft_wrap=True)
    cut = False
    with _stop_on_term():
        try:
            for _changes in watchfiles.watch(
                root, watch_filter=wanted, debounce=WATCH_MAX_WAIT_MS, step=WATCH_QUIET_MS, raise_interrupt=True
            ):
                try:
                    load = load_files(
                        root, skip_unreadable=True, follow_links=follow_links, allow_empty=True, previous=last
                    )
                    now = _fingerprint(load)
                    if now == seen:
                        continue  # the burst changed no document
                    cut = True
                    report = eng.ingest(collection, load, **options)
                    cut = False
                except RanklockError as exc:
                    cut = False
                    tally.failed += 1
                    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
                    continue
                last, seen = load, now
                if report.built:
                    tally.changes += 1
                    tally.added += report.added
                    tally.changed += report.changed
                    tally.removed += report.removed
                    tally.snapshot = report.merged or report.snapshot_id
                if as_json:
                    print_json(report.as_dict())
                else:
                    for u in load.unreadable:
                        err_console.print(
                            f"[yellow]could not read[/] {escape(shown(u.path))} ({u.format}): "
                            f"{escape(shown(u.reason, backslash=False))}",
                            highlight=False,
                        )
                    print_report(report, replace=options.get("replace", False))
        except KeyboardInterrupt:
            pass
    line = tally.summary(collection, root, cut)
    if as_json:
        print_json({"stopped": line, "changes": tally.changes, "snapshot_id": tally.snapshot})
    else:
        console.print(escape(line), highlight=False, soft_wrap=True)
