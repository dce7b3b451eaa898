"""``ranklock replica create|list|drop``: local hot standbys and the state of every read node."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import RanklockError
from ._common import DsnOpt, HomeOpt, JsonOpt, ReadDsnOpt, console, engine, fail, print_json

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["replica_create", "replica_drop", "replica_list"]

replica_app = typer.Typer(
    help="Read replicas: local hot standbys (pg_basebackup -R) and routing state.", no_args_is_help=True
)
app.add_typer(replica_app, name="replica")


def _home(home: Path | None) -> Path:
    from ..settings import Settings

    return home if home is not None else Settings().home


@replica_app.command("create")
def replica_create(
    name: Annotated[str, typer.Argument(help="Replica name (lowercase letters, digits, _).")],
    port: Annotated[int | None, typer.Option("--port", help="TCP port on 127.0.0.1 (default: a free one).")] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make a hot standby of the embedded server with pg_basebackup -R, start it, and register it for searches."""
    from ..store.standby import LocalReplica

    try:
        report = LocalReplica(_home(home), name, port).create()
    except RanklockError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(report)
        return
    for change in report["primary_changes"]:
        console.print(f"primary: {change}", highlight=False)
    console.print(
        f"replica {name} streams from the embedded server on {report['node']} ({report['datadir']}, "
        f"{report['seconds']:.1f} s); `ranklock search` now reads from it",
        highlight=False,
    )


@replica_app.command("drop")
def replica_drop(
    name: Annotated[str, typer.Argument(help="Replica name.")],
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stop a local replica, remove its data directory and replication slot, and unregister it."""
    from ..store.standby import LocalReplica

    try:
        report = LocalReplica(_home(home), name).drop()
    except RanklockError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(report)
        return
    console.print(f"replica {name} dropped ({report['removed']} removed)", highlight=False)


@replica_app.command("list")
def replica_list(
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    read_dsn: ReadDsnOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Each node searches may use: state (up, lagging, down), replay position, lag in bytes and seconds."""
    with engine(dsn, home, read_dsn) as eng:
        nodes = eng.replica_status()
    if as_json:
        print_json({"nodes": [n.as_dict() for n in nodes]})
        return
    table = Table("name", "node", "state", "replay lsn", "lag bytes", "lag s", "note")
    for n in nodes:
        note = n.error or ("replay paused" if n.paused else "")
        table.add_row(
            n.name,
            n.node,
            n.state,
            n.replay_lsn or "-",
            "-" if n.lag_bytes is None else f"{n.lag_bytes:,}",
            "-" if n.lag_seconds is None else f"{n.lag_seconds:.3f}",
            note,
        )
    console.print(table)
