"""``ranklock ingest`` and ``ranklock collections``: build snapshots, list collections."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.markup import escape
from rich.table import Table

# typer vendors its own click; its parser raises these.
from ..phrasing import named, plural
from ..settings import DEFAULT_EMBEDDER, ChunkerParams
from ._common import (
    DsnOpt,
    HomeOpt,
    JsonOpt,
    ShardsOpt,
    console,
    engine,
    err_console,
    fail,
    print_json,
    progress_bar,
)

__all__ = ["print_field_inference"]

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()


@app.command()
def collections(dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """List collections with their active snapshot."""
    with engine(dsn, home) as eng:
        rows = [c.as_dict() for c in eng.collections()]
    if as_json:
        print_json({"collections": rows})
        return
    table = Table("name", "language", "embedder", "dim", "index", "snapshot", "documents", "chunks")
    for r in rows:
        table.add_row(
            r["name"],
            r["language"],
            r["embedder_id"],
            str(r["dim"]),
            r["index_kind"],
            str(r["active_snapshot_id"] or "-"),
            str(r["documents"] or 0),
            str(r["chunks"] or 0),
        )
    console.print(table)


@app.command()
def ingest(
    collection: Annotated[str, typer.Argument(help="Collection name (created if missing).")],
    path: Annotated[
        Path,
        typer.Argument(
            help="corpus.jsonl, a BEIR folder, a folder of .txt/.md/.pdf/.docx/.html files, or - (JSONL on standard "
            "input)."
        ),
    ],
    replace: Annotated[bool, typer.Option("--replace", help="The new snapshot holds exactly these documents.")] = False,
    no_activate: Annotated[
        bool, typer.Option("--no-activate", help="Build the snapshot but keep the old one active.")
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option("--allow-empty", help="Allow a snapshot with no documents (e.g. --replace with an empty file)."),
    ] = False,
    language: Annotated[
        str | None, typer.Option(help="Text-search language for a new collection (default english).")
    ] = None,
    accent: Annotated[
        str | None,
        typer.Option(help="Accent policy for a new collection: sensitive (default) or insensitive."),
    ] = None,
    field: Annotated[
        list[str] | None, typer.Option("--field", help="Typed field for a new collection, name:type[!].")
    ] = None,
    index: Annotated[
        str | None, typer.Option(help="Vector index for a new collection: hnsw (default), ivfflat or exact.")
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            help=f"Chunk window in embedder tokens (new collection; default {ChunkerParams.model_fields['window'].default})."
        ),
    ] = None,
    overlap: Annotated[
        int | None,
        typer.Option(
            help=f"Chunk overlap in tokens (new collection; default {ChunkerParams.model_fields['overlap'].default})."
        ),
    ] = None,
    embedder: Annotated[
        str | None, typer.Option(help=f"Embedder for a new collection (default {DEFAULT_EMBEDDER}).")
    ] = None,
    skip_unreadable: Annotated[
        bool,
        typer.Option(
            "--skip-unreadable", help="Leave out (and name) files that cannot be read instead of failing the ingest."
        ),
    ] = False,
    allow_purged: Annotated[
        bool,
        typer.Option(
            "--allow-purged",
            help="Ingest again documents that `ranklock purge` erased (by default they are left out, and named).",
        ),
    ] = False,
    follow_links: Annotated[
        bool,
        typer.Option(
            "--follow-links",
            help="Read symbolic links that lead out of the folder (by default they are refused and named).",
        ),
    ] = False,
    shards: ShardsOpt = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest a corpus into a new snapshot of COLLECTION and activate it.

    PATH may be a folder of .txt, .md (front matter, wiki links, #tags), .pdf, .docx and .html files:
    each is read by the loader for its extension. A new collection's typed fields are inferred from
    the metadata (every key whose values agree on a type; the others are named) unless --field is given.
    """
    from .files import load_for_cli, print_files_report

    stdin = str(path) == "-"
    if stdin and sys.stdin.isatty():
        raise fail(
            f"`ranklock ingest {collection} -` reads JSONL documents from standard input, which is a terminal here; "
            f"pipe them in, e.g. `cat docs.jsonl | ranklock ingest {collection} -`."
        )
    with engine(dsn, home, creates=True) as eng:
        loaded = None if stdin else load_for_cli(path, skip_unreadable, follow_links)
        create = {
            "language": language,
            "accent": accent,
            # No --field: the engine infers the typed fields of a new collection from the metadata.
            "fields": field or None,
            "index": index,
            # Only what was given: an existing collection refuses a setting it was not made with.
            "chunker": None
            if window is None and overlap is None
            else ChunkerParams(**{k: v for k, v in (("window", window), ("overlap", overlap)) if v is not None}),
            "embedder": embedder,
            "shards": shards,
        }
        if stdin:
            from ..ingest.loaders import load_jsonl_stream

            source: Any = load_jsonl_stream(sys.stdin.buffer)
        else:
            source = loaded.documents if loaded else path
        with progress_bar(not as_json) as prog:
            report = eng.ingest(
                collection,
                source,
                replace=replace,
                activate=not no_activate,
                allow_empty=allow_empty,
                progress=prog,
                create=create,
                allow_purged=allow_purged,
            )
    d = report.as_dict()
    if loaded:
        d["files"] = loaded.as_dict()
    if as_json:
        print_json(d)
        return
    if loaded:
        print_files_report(loaded)
    print_readded(report)
    s = report.seconds
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
        shown = ", ".join(report.skipped[:10]) + (
            f" and {len(report.skipped) - 10} more" if len(report.skipped) > 10 else ""
        )
        err_console.print(
            f"[bold yellow]skipped {plural(len(report.skipped), 'document')} with empty text[/] "
            f"(not in the snapshot): {escape(shown)}",
            highlight=False,
            soft_wrap=True,
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
    fields = ", ".join(inference["fields"]) or "none"
    console.print(
        f"typed fields inferred from the metadata of {inference['documents']} documents: {escape(fields)}",
        highlight=False,
        soft_wrap=True,
    )
    for key, why in inference["untyped"].items():
        console.print(
            f"  left untyped (no filter on it): {escape(key)}: {escape(why)}", highlight=False, soft_wrap=True
        )
