"""CLI commands for the snapshot area, merged into :data:`ranklock.cli.app` by ``cli/root.py``.

``ranklock snapshot list | show | activate | rollback | diff | drop | manifest``
and ``ranklock replay QUERY_ID``.  Each is a thin shell over one Engine method.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import RanklockError
from ..phrasing import plural, shown
from ..snapshot.info import GatedActivation
from ._common import DsnOpt, HomeOpt, JsonOpt, RerankerOpt, console, engine, err_console, fail, print_json
from .render import FormatOpt, clip, render_snapshots, resolve_format

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["snapshot_app"]

snapshot_app = typer.Typer(
    help="Immutable corpus snapshots: list, inspect, activate, roll back, diff, drop.", no_args_is_help=True
)
app.add_typer(snapshot_app, name="snapshot")

CollArg = Annotated[str, typer.Argument(help="Collection name.")]


def _short(h: Any) -> str:
    return "-" if not h else str(h)[:12] + "…"


@snapshot_app.command("list")
def snapshot_list(
    collection: CollArg, dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False, fmt: FormatOpt = None
) -> None:
    """List the snapshots of COLLECTION, oldest first; the active one is marked."""
    try:
        out_format = resolve_format(fmt, as_json, ("table", "json", "jsonl"), "snapshot list")
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home) as eng:
        rows = [s.as_dict() for s in eng.list_snapshots(collection)]
    render_snapshots(collection, rows, out_format)


@snapshot_app.command("show")
def snapshot_show(
    collection: CollArg,
    snapshot_id: Annotated[int | None, typer.Argument(help="Snapshot id (default: the active one).")] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one snapshot with its manifest."""
    with engine(dsn, home) as eng:
        info = eng.snapshot_info(collection, snapshot_id).as_dict()
    if as_json:
        print_json(info)
        return
    mark = " (active)" if info["active"] else (" (previous)" if info["previous"] else "")
    console.print(
        f"[bold]{collection}[/] snapshot {info['id']}{mark}: {info['status']}, "
        f"{info['documents'] or 0} documents, {info['chunks'] or 0} chunks; "
        f"embedded {info['embedded']}, reused {info['reused']}"
    )
    console.print(f"corpus digest {info['corpus_digest']}\nmanifest {info['manifest_hash']}")
    for p in info["purges"]:
        console.print(
            f"[bold yellow]rewritten by purge {p['purge_id']}[/] at {p['at']}: it erased "
            f"{plural(p['documents'], 'document')} from every snapshot that held them, so this snapshot's manifest "
            "hash, corpus digest and scores changed then (a replay of an older query reports it).",
            highlight=False,
            soft_wrap=True,
        )
    if info["manifest"] is not None:
        from ..snapshot.manifest import manifest_json

        console.print(manifest_json(info["manifest"]), highlight=False, markup=False)


@snapshot_app.command("activate")
def snapshot_activate(
    collection: CollArg,
    snapshot_id: Annotated[int, typer.Argument(help="Snapshot id to make active.")],
    gate: Annotated[
        Path | None, typer.Option("--gate", help="Golden set: activate only if the promotion gate passes on it.")
    ] = None,
    rsi_threshold: Annotated[float, typer.Option(help="Minimum Retrieval Stability Index for --gate.")] = 0.9,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make SNAPSHOT_ID the active snapshot of COLLECTION, atomically (optionally behind a gate)."""
    with engine(dsn, home) as eng:
        if gate is not None:
            out = eng.activate_gated(collection, snapshot_id, gate, rsi_threshold=rsi_threshold)
        else:
            # "previous" is read under the writer lock, in the same transaction as the switch.
            before = eng.activate(collection, snapshot_id).before
            out = GatedActivation(collection, snapshot_id, True, None, before)
    before = out.previous
    if as_json:
        print_json(out.as_dict())
    elif out.activated:
        console.print(f"[bold]{collection}[/]: snapshot {snapshot_id} is active (was {before}).")
    else:
        err_console.print(
            f"[bold red]refused:[/] the promotion gate did not pass for snapshot {snapshot_id}; "
            f"snapshot {before} stays active."
        )
        err_console.print(json.dumps(out.gate, indent=2, default=str), highlight=False, markup=False)
    if not out.activated:
        raise typer.Exit(1)


@snapshot_app.command("rollback")
def snapshot_rollback(collection: CollArg, dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Re-activate the previous snapshot of COLLECTION, atomically."""
    with engine(dsn, home) as eng:
        out = eng.rollback(collection).as_dict()
    if as_json:
        print_json(out)
        return
    console.print(f"[bold]{collection}[/]: rolled back from snapshot {out['from']} to {out['to']}.")


@snapshot_app.command("diff")
def snapshot_diff(
    collection: CollArg,
    old: Annotated[int, typer.Argument(help="The older snapshot id.")],
    new: Annotated[int, typer.Argument(help="The newer snapshot id.")],
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Documents added, removed and changed, and manifest fields changed, from OLD to NEW."""
    with engine(dsn, home) as eng:
        d = eng.diff_snapshots(collection, old, new).as_dict()
    if as_json:
        print_json(d)
        return
    docs = d["documents"]
    console.print(
        f"[bold]{collection}[/] {old} -> {new}: {len(docs['added'])} added, {len(docs['removed'])} removed, "
        f"{len(docs['changed'])} changed"
    )
    for doc_id in docs["added"]:
        console.print(f"  + {shown(doc_id)}", highlight=False, markup=False)
    for doc_id in docs["removed"]:
        console.print(f"  - {shown(doc_id)}", highlight=False, markup=False)
    for c in docs["changed"]:
        console.print(f"  ~ {shown(c['doc_id'])}  {c['old'][:12]} -> {c['new'][:12]}", highlight=False, markup=False)
    if d["manifest"]:
        table = Table("manifest field", "old", "new")
        for k, v in d["manifest"].items():
            table.add_row(k, clip(json.dumps(v["old"], default=str), 60), clip(json.dumps(v["new"], default=str), 60))
        console.print(table)


@snapshot_app.command("drop")
def snapshot_drop(
    collection: CollArg,
    snapshot_id: Annotated[int, typer.Argument(help="Snapshot id to drop (never the active one).")],
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Drop a non-active snapshot and collect document versions no snapshot references."""
    with engine(dsn, home) as eng:
        out = eng.drop_snapshot(collection, snapshot_id).as_dict()
    if as_json:
        print_json(out)
        return
    console.print(
        f"[bold]{collection}[/]: dropped snapshot {snapshot_id} ({', '.join(out['tables'])}); "
        f"document versions collected: {out['versions_deleted']} ({out['versions_gc']})."
    )


@snapshot_app.command("retention")
def snapshot_retention(
    collection: CollArg,
    keep: Annotated[int | None, typer.Option("--keep", help="Keep the newest N snapshots.")] = None,
    keep_for: Annotated[
        str | None, typer.Option("--keep-for", help="Keep the snapshots younger than this (7d, 12h, 90m).")
    ] = None,
    off: Annotated[bool, typer.Option("--off", help="Keep every snapshot (no retention).")] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show or set which snapshots COLLECTION keeps (default: the newest 10); the active, previous, pinned and
    replica-held ones always stay. It applies after every write, or now with `ranklock snapshot prune`."""
    from ..settings import parse_duration

    if off and (keep is not None or keep_for is not None):
        raise fail("--off keeps every snapshot; give it alone, or --keep N and/or --keep-for DURATION.")
    try:
        seconds = None if keep_for is None else parse_duration(keep_for, what="--keep-for")
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home) as eng:
        if off or keep is not None or keep_for is not None:
            eng.set_snapshot_retention(collection, keep=keep, keep_for=seconds)
        plan = eng.prune_snapshots(collection, dry_run=True)
    _print_plan(plan, as_json, "the next write drops")


@snapshot_app.command("prune")
def snapshot_prune(
    collection: CollArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be dropped, drop nothing.")] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Drop the snapshots COLLECTION's retention no longer keeps, now (every write does it too)."""
    with engine(dsn, home) as eng:
        plan = eng.prune_snapshots(collection, dry_run=dry_run)
    _print_plan(plan, as_json, "would drop" if dry_run else "dropped")


def _print_plan(plan: Any, as_json: bool, verb: str) -> None:
    if as_json:
        print_json(plan.as_dict())
        return
    console.print(f"[bold]{plan.collection}[/]: keeps {plan.policy.describe()}.", highlight=False)
    for sid, why in plan.kept.items():
        console.print(f"  snapshot {sid}: kept ({why})", highlight=False)
    if plan.dropped:
        console.print(
            f"{verb} {plural(len(plan.dropped), 'snapshot')}: {', '.join(map(str, plan.dropped))}", highlight=False
        )
    else:
        console.print("nothing to drop.")


@snapshot_app.command("merge")
def snapshot_merge(
    collection: CollArg,
    everything: Annotated[
        bool, typer.Option("--all", help="Merge every segment into one (of each window or partition key).")
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fold the active snapshot's small segments into one, as a new active snapshot with the same documents.

    Ingests merge by a size-tiered policy on their own; exact-mode results never change with a merge."""
    with engine(dsn, home) as eng:
        out = eng.merge(collection, everything=everything)
    if as_json:
        print_json(out.as_dict())
        return
    if out.snapshot_id is None:
        console.print(f"[bold]{collection}[/]: nothing to merge.")
        return
    console.print(
        f"[bold]{collection}[/]: snapshot {out.snapshot_id} merges segments "
        f"{', '.join(str(g) for g in out.segments)} into one ({out.seconds:.1f}s); it is the active snapshot."
    )


@snapshot_app.command("lexical-stats")
def snapshot_lexical_stats(
    collection: CollArg,
    snapshot_id: Annotated[int | None, typer.Argument(help="Snapshot id (default: the active one).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the statistics are current.")] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build or complete a snapshot's BM25 statistics (needed after an upgrade that changed their layout).

    Also adds the dense blocks of the most frequent terms to a snapshot built
    without them (faster exact BM25 for queries of common words), and the filter
    table (each chunk's typed fields alone: faster filtered lexical search and counts)."""
    with engine(dsn, home) as eng:
        out = eng.lexical_stats(collection, snapshot_id, force=force)
    if as_json:
        print_json(out.as_dict())
        return
    b = out.bm25
    dense = f", {b['dense']['terms']:,} dense terms" if b.get("dense") else ""
    console.print(
        f"[bold]{collection}[/]: snapshot {out.snapshot_id} BM25 statistics layout {b['version']} "
        f"({b['terms']:,} terms, {b['postings']:,} postings{dense}, k1 {b['k1']}, b {b['b']}) in {out.seconds:.1f}s"
    )


@snapshot_app.command("manifest")
def snapshot_manifest(
    collection: CollArg,
    snapshot_id: Annotated[int | None, typer.Argument(help="Snapshot id (default: the active one).")] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", help="Write the manifest to this file (stable JSON, sorted keys, meant for git)."
        ),
    ] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print or write the manifest of a snapshot: everything that shapes its retrieval."""
    from ..snapshot.manifest import manifest_json, write_manifest

    with engine(dsn, home) as eng:
        m = eng.manifest(collection, snapshot_id)
        if output is not None:
            write_manifest(m, output)
    if output is None:
        sys.stdout.write(manifest_json(m))
    elif as_json:
        print_json({"collection": collection, "manifest_hash": m["manifest_hash"], "path": str(output)})
    else:
        console.print(f"wrote manifest {m['manifest_hash'][:12]}… to {output}")


@app.command()
def replay(
    query_id: Annotated[int | None, typer.Argument(help="Id of a logged query (SearchResult.query_id).")] = None,
    answer: Annotated[
        str | None, typer.Option("--answer", help="Replay a logged answer instead (answer_id of `ranklock ask`).")
    ] = None,
    text: Annotated[
        str | None,
        typer.Option(
            "--query",
            "--question",
            help="The query (or, with --answer, the question) of an entry logged with hashes only "
            "(RANKLOCK_LOG_TEXT=hash); its sha256 must match the log's.",
        ),
    ] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    reranker: RerankerOpt = None,
) -> None:
    """Re-run a logged query (or --answer) against its snapshot; exit 1 unless the result is identical.

    A reranked search or answer is replayed with --reranker (default RANKLOCK_RERANKER); the report
    shows the rerank layer apart.
    """
    if answer is not None or query_id is None:
        from .ask import replay_answer_cli

        if answer is None or query_id is not None:
            raise typer.BadParameter("give a query id or --answer ANSWER_ID, not both and not neither.")
        replay_answer_cli(answer, dsn=dsn, home=home, as_json=as_json, reranker=reranker, question=text)
        return
    with engine(dsn, home, reranker=reranker) as eng:
        report = eng.replay(query_id, query=text)
    d = report.to_dict()
    if as_json:
        print_json(d)
    elif report.identical:
        console.print(
            f"query {query_id}: identical (snapshot {report.snapshot_id}, digest {report.replayed_digest[:12]}…)"
        )
    else:
        console.print(
            f"[bold red]query {query_id}: NOT identical[/] (snapshot {report.snapshot_id}): "
            f"{plural(len(report.differences), 'difference')}"
        )
        table = Table("where", "position", "logged", "replayed")
        for x in report.differences[:50]:
            table.add_row(
                x["where"],
                str(x["position"] or "-"),
                json.dumps(x["logged"], default=str),
                json.dumps(x["replayed"], default=str),
            )
        console.print(table)
        for x in report.differences:
            if x["where"] == "purge":
                console.print(
                    f"snapshot {report.snapshot_id} was rewritten by purge {', '.join(map(str, x['replayed']))} "
                    "after this query ran: a purge erases documents from every snapshot that held them, so its "
                    "manifest hash and scores changed (`ranklock snapshot show "
                    f"{report.collection} {report.snapshot_id}` says when).",
                    highlight=False,
                    soft_wrap=True,
                )
    if not report.identical:
        raise typer.Exit(1)
