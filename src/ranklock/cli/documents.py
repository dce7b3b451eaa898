"""``ranklock delete``, ``ranklock purge`` and ``ranklock document get``: documents by id.

Take documents out of a collection, erase them everywhere, or print one as a snapshot holds it.
"""

from __future__ import annotations

import json
import re
from typing import Annotated

import typer
from rich.markup import escape

from ..phrasing import plural, shown
from ._common import DsnOpt, HomeOpt, JsonOpt, console, engine, print_json

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

CollArg = Annotated[str, typer.Argument(help="Collection name.")]
IdsArg = Annotated[list[str], typer.Argument(help="Document ids (a search hit's doc_id).")]


@app.command()
def delete(
    collection: CollArg,
    ids: IdsArg,
    missing_ok: Annotated[
        bool, typer.Option("--missing-ok", help="Delete the ids that exist; name the others instead of failing.")
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A new active snapshot without these documents (older snapshots keep them; `purge` erases them)."""
    with engine(dsn, home) as eng:
        out = eng.delete(collection, ids, missing_ok=missing_ok)
    if as_json:
        print_json(out.as_dict())
        return
    missing = f"; not found: {', '.join(shown(m) for m in out.missing)}" if out.missing else ""
    console.print(
        f"[bold]{collection}[/]: snapshot {out.snapshot_id} (from {out.parent_id}) without "
        f"{plural(len(out.deleted), 'document')}{missing}; it is the active snapshot."
    )


@app.command()
def purge(
    collection: CollArg,
    ids: IdsArg,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Erase documents from every snapshot, segment, cache and log (a right to be forgotten); recorded, not undone."""
    with engine(dsn, home) as eng:
        out = eng.purge(collection, ids)
    if as_json:
        print_json(out.__dict__)
        return
    if out.resumed:
        console.print(
            f"[bold]{collection}[/]: purge {out.purge_id} had erased these documents but was interrupted before "
            "it rewrote what still held their bytes; that is done now."
        )
    else:
        console.print(
            f"[bold]{collection}[/]: purge {out.purge_id} erased {plural(out.documents, 'document')} from "
            f"{plural(len(out.segments), 'segment')} and {plural(len(out.snapshots), 'snapshot')}; "
            f"{plural(out.versions, 'stored version')}, {plural(out.cache_vectors, 'cached vector')}, "
            f"{plural(out.log_entries_removed, 'query-log entry')} and "
            f"{plural(out.answers_removed, 'answer-log entry')} that quoted them removed."
        )
    canary = (
        f"; their ids taken out of {plural(len(out.canary_records), 'canary record')}" if out.canary_records else ""
    )
    console.print(
        f"{plural(len(out.rewritten), 'table')} rewritten so no byte of them is left there, "
        f"{plural(out.wal_removed, 'WAL segment')} removed{canary}."
    )
    console.print("Not reached (say so to whoever asked for the erasure):")
    for line in out.unreached:
        console.print(f"  - {line}", highlight=False)


document_app = typer.Typer(help="Stored documents, by id.", no_args_is_help=True)
app.add_typer(document_app, name="document")


@document_app.command("get")
def document_get(
    collection: CollArg,
    doc_id: Annotated[str, typer.Argument(help="Document id (a search hit's doc_id).")],
    snapshot: Annotated[int | None, typer.Option(help="Snapshot id (default: the active one).")] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a stored document by id: its title, metadata and text as the snapshot holds them."""
    with engine(dsn, home) as eng:
        doc = eng.document(collection, doc_id, snapshot=snapshot)
    if as_json:
        print_json(doc.as_dict())
        return
    console.print(
        f"[bold]{escape(shown(doc.doc_id))}[/] ({collection}, snapshot {doc.snapshot_id}, "
        f"content {doc.content_hash[:12]}…)",
        highlight=False,
    )
    if doc.title:
        console.print(f"title: {escape(shown(doc.title, backslash=False))}", highlight=False)
    for key, value in sorted(doc.metadata.items()):
        said = shown(json.dumps(value, ensure_ascii=False), backslash=False)
        console.print(f"{escape(shown(key))}: {escape(said)}", highlight=False)
    console.print()
    console.file.write(as_stored(doc.body, terminal=console.is_terminal) + "\n")


#: Control characters a terminal acts on (an escape sequence can recolour, move or retitle it); tabs
#: and newlines are the text's own.
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def as_stored(body: str, *, terminal: bool) -> str:
    """The text as stored, line for line: never re-wrapped to the terminal's width, no markup read.

    On a terminal, control characters are shown as U+FFFD, so a document cannot drive the terminal.
    """
    return _TERMINAL_CONTROLS.sub("\ufffd", body) if terminal else body
