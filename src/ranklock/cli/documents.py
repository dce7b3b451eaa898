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
from ._common import DsnOpt, HomeOpt, JsonOpt, console, engine, err_console, print_json

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
    """Erase documents from every snapshot, segment, cache and log (a right to be forgotten); recorded, not undone.

    Exits 2 when the check after the rewrite still finds bytes of them (an older transaction or a replica
    held the rows): it says where and what held them, and the same command run again finishes the purge.
    """
    with engine(dsn, home) as eng:
        out = eng.purge(collection, ids)
    if as_json:
        print_json({**out.__dict__, "finished": out.finished})
        if not out.finished:
            raise typer.Exit(2)
        return
    if out.resumed:
        console.print(
            f"[bold]{collection}[/]: purge {out.purge_id} had erased these documents but was not finished "
            "(interrupted, or bytes of them were left); its rewrite ran again."
        )
    else:
        console.print(
            f"[bold]{collection}[/]: purge {out.purge_id} erased {plural(out.documents, 'document')} from "
            f"{plural(len(out.segments), 'segment')} and {plural(len(out.snapshots), 'snapshot')}; "
            f"{plural(out.versions, 'stored version')}, {plural(out.cache_vectors, 'cached vector')}, "
            f"{plural(out.log_entries_removed, 'query-log entry')} and "
            f"{plural(out.answers_removed, 'answer-log entry')} that named them removed."
        )
    canary = (
        f"; their ids taken out of {plural(len(out.canary_records), 'canary record')}" if out.canary_records else ""
    )
    waited = out.seconds.get("wait", 0.0)
    held = (
        f" (after waiting {waited:.1f} s for older transactions and replicas to let go of them)" if waited >= 1 else ""
    )
    if out.finished:
        # Said only when the files were read; a role that may not read them is told so below.
        checked = (
            ", and their files checked: no byte of them is left there"
            if out.checked
            else "; their files could not be checked (see below)"
        )
        console.print(
            f"{plural(len(out.rewritten), 'table')} rewritten{held}{checked}, "
            f"{plural(out.wal_removed, 'WAL segment')} removed{canary}.",
            highlight=False,
        )
    else:
        console.print(
            f"{plural(len(out.rewritten), 'table')} rewritten{held}, {plural(out.wal_removed, 'WAL segment')} "
            f"removed{canary}; but the purge is NOT finished, bytes of them are still in:",
            highlight=False,
        )
        for line in out.remaining:
            console.print(f"  - {escape(shown(line, backslash=False))}", highlight=False)
    console.print("Not reached (say so to whoever asked for the erasure):")
    # A line may quote a session's application name or a field name: shown escaped, as every name is.
    for line in out.unreached:
        console.print(f"  - {escape(shown(line, backslash=False))}", highlight=False)
    if not out.finished:
        err_console.print(
            f"[bold red]error:[/] purge {out.purge_id} is not finished (see above); once what held the rows has "
            f"ended, run {escape(f'`ranklock purge {shown(collection)} ID...`')} again with the same ids to finish it.",
            highlight=False,
        )
        raise typer.Exit(2)


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
        # The operator of the home sees which purge erased an id (a reader over MCP is told "no document").
        doc = eng.document(collection, doc_id, snapshot=snapshot, show_purge=True)
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
