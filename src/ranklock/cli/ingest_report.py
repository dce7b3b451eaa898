"""What ``ranklock ingest`` prints after an ingest, and ``--watch`` after each change it ingests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.markup import escape

from ..phrasing import named, plural, shown
from ._common import console, err_console

__all__ = ["print_field_inference", "print_report"]


def listed(ids: Sequence[str], limit: int = 10) -> str:
    """``a.md, b.md and 3 more``: ids as a person reads them in a line (each :func:`~ranklock.phrasing.shown`)."""
    said = ", ".join(shown(i) for i in ids[:limit])
    return f"{said} and {len(ids) - limit} more" if len(ids) > limit else said


def print_report(report: Any, *, replace: bool) -> None:
    """What an ingest did, as ``ranklock ingest`` prints it (and ``--watch`` after each change)."""
    collection = report.collection
    print_readded(report)
    s = report.seconds
    if report.superseded:
        console.print(
            f"[bold]{collection}[/]: unchanged: a later read of {escape(shown(report.source or ''))} was ingested first, "
            f"so this one (older) wrote nothing; snapshot {report.snapshot_id} stays active.",
            highlight=False,
        )
        return
    print_sources(report)
    if not report.built:
        held = (
            f"the active snapshot {report.snapshot_id} already holds these {plural(report.unchanged, 'document')}"
            if report.unchanged
            else f"the input holds no document to add; the active snapshot {report.snapshot_id} stays"
        )
        console.print(f"[bold]{collection}[/]: unchanged: {held}; nothing was built ({s.get('total', 0):.1f}s).")
        return
    console.print(
        f"[bold]{collection}[/]: snapshot {report.snapshot_id} "
        f"({'active' if report.activated else 'not activated'}), {report.documents} documents, "
        f"{report.chunks} chunks; added {report.added}, changed {report.changed}, removed {report.removed}, "
        f"unchanged {report.unchanged}; embedded {report.embedded}, reused {report.reused} cached vectors; "
        f"{s.get('total', 0):.1f}s (embedding {s.get('embed', 0):.1f}s, database "
        f"{s.get('write', 0) + s.get('index', 0):.1f}s)"
    )
    if report.removed_ids:
        why = "not in the input, --replace" if replace else f"gone from {shown(report.source or '')}"
        console.print(
            f"removed {report.removed} ({escape(why)}): {escape(listed(report.removed_ids))}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"corpus digest {report.corpus_digest[:16]}…  manifest {report.manifest_hash[:16]}…")
    if report.snapshots_dropped:
        console.print(
            f"snapshot retention dropped {plural(len(report.snapshots_dropped), 'snapshot')} "
            f"({', '.join(map(str, report.snapshots_dropped))}); `ranklock snapshot retention {collection}` shows "
            "what it keeps",
            highlight=False,
        )
    if report.field_inference is not None:
        print_field_inference(report.field_inference)
    if report.skipped:
        note(
            f"skipped {plural(len(report.skipped), 'document')} with empty text",
            f" (not in the snapshot): {listed(report.skipped)}",
        )


def note(said: str, rest: str) -> None:
    """One note on stderr: what happened in bold, then the ids or the remedy (no markup read in either)."""
    err_console.print(f"[bold yellow]{escape(said)}[/]{escape(rest)}", highlight=False, soft_wrap=True)


def print_sources(report: Any) -> None:
    """What the mirror kept although not read, and the documents another folder gave before."""
    if report.kept_unreadable:
        note(
            f"kept {plural(len(report.kept_unreadable), 'document')} whose file could not be read",
            f" (still in the folder, so not deleted; the version ingested before stays): "
            f"{listed(report.kept_unreadable)}",
        )
    if report.moved:
        note(
            f"{plural(len(report.moved), 'document')} came from another folder before",
            f" ({', '.join(shown(m) for m in sorted(set(report.moved.values())))}); this one gives them now (same id): "
            f"{listed(sorted(report.moved))}",
        )


def print_readded(report: Any) -> None:
    """Name what an ingest brought back: documents deleted earlier, purged ones (left out, or with --allow-purged)."""
    if report.deleted_readded:
        err_console.print(
            f"[bold yellow]added back {plural(len(report.deleted_readded), 'document')} an earlier snapshot held[/] "
            f"(deleted or replaced since): {escape(named(report.deleted_readded))}",
            highlight=False,
            soft_wrap=True,
        )
    for ids, what in ((report.purged_skipped, "left out"), (report.purged_readded, "ingested again")):
        if not ids:
            continue
        purges = ", ".join(str(p) for p in sorted(set(ids.values())))
        hint = "; --allow-purged ingests them again" if what == "left out" else ""
        err_console.print(
            f"[bold yellow]{what} {plural(len(ids), 'document')} erased by purge {purges}[/]: "
            f"{escape(named(sorted(ids)))}{hint}",
            highlight=False,
            soft_wrap=True,
        )


def print_field_inference(inference: dict[str, Any]) -> None:
    """What a first ingest inferred: the typed fields (filterable), then each key left untyped and why."""
    fields = ", ".join(shown(f) for f in inference["fields"]) or "none"
    console.print(
        f"typed fields inferred from the metadata of {inference['documents']} documents: {escape(fields)}",
        highlight=False,
        soft_wrap=True,
    )
    for key, why in inference["untyped"].items():
        console.print(
            f"  left untyped (no filter on it): {escape(shown(key))}: {escape(shown(why, backslash=False))}",
            highlight=False,
            soft_wrap=True,
        )
