"""``ranklock delete`` and ``ranklock purge``: take documents out of a collection, or erase them everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

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
    missing = f"; not found: {', '.join(out.missing)}" if out.missing else ""
    console.print(
        f"[bold]{collection}[/]: snapshot {out.snapshot_id} (from {out.parent_id}) without "
        f"{len(out.deleted)} document(s){missing}; it is the active snapshot."
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
            f"[bold]{collection}[/]: purge {out.purge_id} erased {out.documents} document(s) from "
            f"{len(out.segments)} segment(s) and {len(out.snapshots)} snapshot(s); {out.versions} stored "
            f"version(s), {out.cache_vectors} cached vector(s), {out.log_entries_removed} query-log and "
            f"{out.answers_removed} answer-log entries that quoted them removed."
        )
    canary = f"; their ids taken out of {len(out.canary_records)} canary record(s)" if out.canary_records else ""
    console.print(
        f"{len(out.rewritten)} table(s) rewritten so no byte of them is left there, {out.wal_removed} WAL "
        f"segment(s) removed{canary}."
    )
    console.print("Not reached (say so to whoever asked for the erasure):")
    for line in out.unreached:
        console.print(f"  - {line}", highlight=False)
