"""``ranklock log``: the retention of the query log and the answer log."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import RanklockError
from ..phrasing import plural
from ._common import DsnOpt, HomeOpt, JsonOpt, ask_first, console, engine, fail, print_json

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["log_app", "log_prune"]

log_app = typer.Typer(
    help="The query log (every search) and the answer log (every ask), for replay, and their retention.",
    no_args_is_help=True,
)
app.add_typer(log_app, name="log")


@log_app.command("prune")
def log_prune(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Delete entries older than this (30d, 12h, 90m; 0s: every entry; default RANKLOCK_LOG_RETENTION).",
        ),
    ] = None,
    max_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-bytes",
            help="Keep at most this much of the newest entries (500MB, 1GB; default RANKLOCK_LOG_MAX_BYTES).",
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help="With --older-than 0: prune without asking (needed without a terminal)."),
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete entries of both logs beyond the retention policy, oldest first; pruned ids can no longer be replayed.

    --older-than 0 deletes every entry but the pinned ones: it asks first, as `collection drop` does, unless --yes.
    """
    from ..settings import parse_duration, parse_size

    try:
        age = None if older_than is None else parse_duration(older_than, what="--older-than")
        size = None if max_bytes is None else parse_size(max_bytes, what="--max-bytes")
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home) as eng:
        if age == 0:
            held = eng.logs_status()
            counts = " and ".join(f"the {n.replace('_', ' ')} ({plural(q.rows, 'entry')})" for n, q in held.items())
            ask_first(
                yes,
                deletes="`ranklock log prune --older-than 0` deletes every entry of the query log and the answer log "
                "but the pinned ones",
                to="prune them",
                question=f"Delete every entry of {counts}, but the pinned ones?",
                answer="prune",
                shown="prune",
                nothing="pruned",
            )
        report = eng.prune_log(older_than=age, max_bytes=size)
    if as_json:
        print_json(report.as_dict())
        return
    for name, part in report.logs.items():
        note = " (another process was pruning; run again)" if part.skipped else ""
        st = part.status
        pruned = (
            f"pruned {plural(part.deleted, 'entry')} ({part.deleted_bytes:,} bytes)"
            if part.deleted
            else "nothing to prune"
        )
        # What retention has taken so far; "up to id 0" would name entries that never were (issue 45).
        since = (
            f"every entry up to id {st.pruned_through} is gone, but the pinned ones"
            if st.pruned_through
            else "nothing was ever pruned"
        )
        console.print(
            f"{name.replace('_', ' ')}: {pruned}{note}; it holds {plural(st.rows, 'entry')}, {st.bytes:,} bytes; "
            f"{since} (policy: {st.policy['describe']})",
            highlight=False,
        )


@log_app.command("pin")
def log_pin(
    query_id: Annotated[int | None, typer.Argument(help="Id of a logged query (SearchResult.query_id).")] = None,
    answer: Annotated[
        str | None, typer.Option("--answer", help="A logged answer instead (answer_id of `ranklock ask`).")
    ] = None,
    unpin: Annotated[
        bool, typer.Option("--unpin", help="Let retention prune the entry, and its snapshot, again.")
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Keep a logged query (or --answer) and the snapshot it ran against, so it stays replayable (--unpin: no more)."""
    with engine(dsn, home) as eng:
        snapshot = eng.pin(query_id=query_id, answer_id=answer, pinned=not unpin)
    what = f"answer {answer}" if answer is not None else f"query {query_id}"
    if as_json:
        print_json({"entry": what, "pinned": not unpin, "snapshot_id": snapshot})
    elif unpin:
        console.print(f"{what} is unpinned: retention treats it, and its snapshot {snapshot}, as any other.")
    else:
        console.print(
            f"{what} is pinned: log retention keeps it, and snapshot retention its snapshot {snapshot}; "
            "`ranklock log pin --unpin` lets them go.",
            highlight=False,
        )
