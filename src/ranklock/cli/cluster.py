"""``ranklock db cluster create|start|status|stop|drop``: a local Citus cluster for tests, demos and benchmarks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import RanklockError
from ._common import HomeOpt, JsonOpt, console, fail, print_json

__all__ = ["cluster_app"]

cluster_app = typer.Typer(
    help="A local Citus cluster (a coordinator and N workers from the embedded wheel); once created, it is "
    "the database of every command with this home.",
    no_args_is_help=True,
)


def _cluster(home: Path | None) -> Any:
    from ..settings import Settings
    from ..store.cluster import LocalCluster

    return LocalCluster(home if home is not None else Settings().home)


def _show(report: dict[str, Any]) -> None:
    table = Table("name", "role", "node", "state", "citus", "note")
    for n in report["nodes"]:
        table.add_row(n["name"], n["role"], n["node"], n["state"], n["citus"] or "-", n["error"] or "")
    console.print(table)
    # soft_wrap: a DSN cut across two lines at the terminal's width cannot be copied.
    if report["healthy"]:
        console.print(f"healthy; coordinator {report['dsn']}", highlight=False, soft_wrap=True)
    else:
        down = ", ".join(f"{n['name']} ({n['node']})" for n in report["nodes"] if n["state"] != "up")
        console.print(f"not healthy: {down}; {report['remedy']}", highlight=False, soft_wrap=True)


def _run(
    call: Callable[[Any], dict[str, Any]], home: Path | None, as_json: bool, show: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Call one method of the home's cluster; its report as JSON or through ``show``; an error exits 2."""
    try:
        report = call(_cluster(home))
    except RanklockError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(report)
    else:
        show(report)
    return report


def _created(report: dict[str, Any]) -> None:
    _show(report)
    console.print(
        f"created in {report['seconds']:.1f} s; every command with this home now uses the cluster (a program "
        f"elsewhere: RANKLOCK_DSN={report['dsn']})",
        highlight=False,
        soft_wrap=True,
    )


@cluster_app.command("create")
def cluster_create(
    workers: Annotated[int, typer.Option("--workers", help="Number of worker nodes.")] = 2,
    port: Annotated[
        int | None, typer.Option("--port", help="The coordinator's TCP port on 127.0.0.1 (default: a free one).")
    ] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a coordinator and N workers (Citus, pgvector) and register them; needs `make citus` once."""
    _run(lambda c: c.create(workers, port=port), home, as_json, _created)


@cluster_app.command("start")
def cluster_start(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Start the nodes of the local cluster that are not running (after a stop or a crash)."""
    _run(lambda c: c.start(), home, as_json, _show)


@cluster_app.command("status")
def cluster_status(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Each node: running, accepting connections, active in the coordinator's metadata; exit 1 if one is not."""
    if not _run(lambda c: c.status(), home, as_json, _show)["healthy"]:
        raise typer.Exit(1)


@cluster_app.command("stop")
def cluster_stop(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Stop every node of the local cluster (its data stays; `start` brings it back)."""
    _run(
        lambda c: c.stop(),
        home,
        as_json,
        lambda r: console.print(f"stopped: {', '.join(r['stopped']) or 'nothing was running'}", highlight=False),
    )


@cluster_app.command("drop")
def cluster_drop(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Stop the local cluster and delete its data directories (every collection stored on it)."""
    _run(
        lambda c: c.drop(),
        home,
        as_json,
        lambda r: console.print(f"dropped {', '.join(r['dropped'])} ({r['removed']} removed)", highlight=False),
    )
