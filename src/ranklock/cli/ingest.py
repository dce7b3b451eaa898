"""``ranklock ingest`` and ``ranklock collections``: build snapshots, list collections."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.markup import escape
from rich.table import Table

# typer vendors its own click; its parser raises these.
from ..phrasing import plural
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

__all__: list[str] = []

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
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="The new snapshot holds exactly these documents: every other one goes, whatever its source "
            "(a folder is mirrored without it: only its own files that are gone go).",
        ),
    ] = False,
    no_delete: Annotated[
        bool,
        typer.Option(
            "--no-delete",
            help="Keep the documents whose files are gone from the folder (by default a folder is mirrored: they "
            "are deleted from the new snapshot, and named).",
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Then keep watching the folder: each change becomes a new snapshot of what changed, until Ctrl-C.",
        ),
    ] = False,
    no_activate: Annotated[
        bool, typer.Option("--no-activate", help="Build the snapshot but keep the old one active.")
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="Allow an input with no documents: a folder emptied on purpose removes what it held, and a "
            "snapshot may hold none (e.g. --replace with an empty file).",
        ),
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
    A folder is a source: ingesting it again mirrors it (its files that are gone are deleted, and named;
    other documents are untouched). --watch keeps mirroring it as its files change.
    """
    from .files import load_for_cli, print_files_report

    stdin = str(path) == "-"
    if stdin and sys.stdin.isatty():
        raise fail(
            f"`ranklock ingest {collection} -` reads JSONL documents from standard input, which is a terminal here; "
            f"pipe them in, e.g. `cat docs.jsonl | ranklock ingest {collection} -`."
        )
    if watch and (stdin or not path.is_dir() or (path / "corpus.jsonl").exists()):
        raise fail(
            f"--watch watches a folder of files, and {str(path)!r} is not one; give a folder of "
            ".txt/.md/.pdf/.docx/.html files (a JSONL file is ingested again with `ranklock ingest`)."
        )
    with engine(dsn, home, creates=True) as eng:
        before = {c.name: c.active_snapshot_id for c in eng.collections()}
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
            source = loaded if loaded else path
        options = {
            "replace": replace,
            "activate": not no_activate,
            "allow_empty": allow_empty,
            "allow_purged": allow_purged,
            "mirror": not no_delete,
        }
        stage = ProgressSeen()
        try:
            with progress_bar(not as_json) as prog:
                report = eng.ingest(collection, source, progress=stage.seeing(prog), create=create, **options)
        except KeyboardInterrupt:
            raise interrupted(eng, collection, before, stage) from None
        if collection not in before and not as_json:
            # Said once it is so: an ingest refused (an unreadable file, a bad line) creates nothing.
            note_new_collection(collection, list(before))
        if as_json:
            d = report.as_dict()
            if loaded:
                d["files"] = loaded.as_dict()
            print_json(d)
        else:
            from .ingest_report import print_report

            if loaded:
                print_files_report(loaded)
            print_report(report, replace=replace)
        if watch:
            from .watch import watch_folder

            watch_folder(eng, collection, path, loaded, options, follow_links=follow_links, as_json=as_json)


class ProgressSeen:
    """The stage an ingest's progress last reported, so an interruption can say where it was."""

    def __init__(self) -> None:
        self.stage = ""
        self.done = 0
        self.total = 0
        self.embedded = 0

    def seeing(self, inner: Callable[[str, int, int], None]) -> Callable[[str, int, int], None]:
        def update(stage: str, done: int, total: int) -> None:
            self.stage, self.done, self.total = stage, done, total
            if stage == "embed":
                self.embedded = done  # reported after each batch is committed to the embedding cache
            inner(stage, done, total)

        return update


#: What each stage of the progress bar is doing, for the line an interruption prints.
_DOING = {"chunk": "chunking", "embed": "embedding", "write": "writing", "index": "indexing"}


def interrupted(eng: Any, collection: str, before: dict[str, int | None], seen: ProgressSeen) -> typer.Exit:
    """Say, on one line, what an ingest stopped by Ctrl-C kept and what not; exit 130 (128 + SIGINT)."""
    where = f" while {_DOING.get(seen.stage, seen.stage)} ({seen.done:,}/{seen.total:,})" if seen.stage else ""
    cached = (
        f"; the {plural(seen.embedded, 'vector')} computed are kept in the embedding cache, so the next ingest "
        "starts from there"
        if seen.embedded
        else ""
    )
    try:
        now = {c.name: c.active_snapshot_id for c in eng.collections()}
    except Exception as exc:  # the server may be what was interrupted: say so rather than guess
        state = f"could not check what {collection!r} holds now ({type(exc).__name__})"
    else:
        if collection not in before:
            state = (
                f"the new collection {collection!r} was not created"
                if collection not in now
                else f"the new collection {collection!r} has snapshot {now[collection]} active"
            )
        elif now.get(collection) == before[collection]:
            active = f"snapshot {before[collection]} active" if before[collection] is not None else "no snapshot"
            state = f"nothing of it was written: {collection!r} is as it was ({active})"
        else:
            state = f"its snapshot {now.get(collection)} of {collection!r} was already active"
    err_console.print(f"[bold yellow]interrupted[/]{where}: {escape(state)}{cached}.", highlight=False, soft_wrap=True)
    return typer.Exit(130)


def note_new_collection(name: str, existing: list[str]) -> None:
    """Say that an ingest created ``name``, with the existing names close to it (a mistyped name, as git says)."""
    close = difflib.get_close_matches(name, existing, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    err_console.print(
        f"{name!r} is a new collection: this ingest created it{escape(hint)} (`ranklock collections` lists them)",
        highlight=False,
        soft_wrap=True,
    )
