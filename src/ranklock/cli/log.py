"""``ranklock log``: the retention of the query log and the answer log."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import RanklockError
from ._common import DsnOpt, HomeOpt, JsonOpt, console, engine, fail, print_json

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
            "--older-than", help="Delete entries older than this (30d, 12h, 90m; default RANKLOCK_LOG_RETENTION)."
        ),
    ] = None,
    max_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-bytes",
            help="Keep at most this much of the newest entries (500MB, 1GB; default RANKLOCK_LOG_MAX_BYTES).",
        ),
    ] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete entries of both logs beyond the retention policy, oldest first; pruned ids can no longer be replayed."""
    from ..settings import parse_duration, parse_size

    try:
        age = None if older_than is None else parse_duration(older_than, what="--older-than")
        size = None if max_bytes is None else parse_size(max_bytes, what="--max-bytes")
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home) as eng:
        report = eng.prune_log(older_than=age, max_bytes=size)
    if as_json:
        print_json(report.as_dict())
        return
    for name, part in report.logs.items():
        note = " (another process was pruning; run again)" if part.skipped else ""
        st = part.status
        console.print(
            f"{name.replace('_', ' ')}: pruned {part.deleted} entries ({part.deleted_bytes:,} bytes){note}; it "
            f"holds {st.rows} entries, {st.bytes:,} bytes; entries up to id {st.pruned_through} are "
            f"gone (policy: {st.policy['describe']})",
            highlight=False,
        )
