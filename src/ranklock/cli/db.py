"""``ranklock db``: the embedded PostgreSQL server (stop, status) and a local Citus cluster (``db cluster``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
import typer.core

# typer vendors its own click; its parser raises these.
from ._common import DsnOpt, HomeOpt, JsonOpt, console, engine, fail, print_json
from .cluster import cluster_app

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()


db_app = typer.Typer(help="The embedded PostgreSQL server.", no_args_is_help=True)


app.add_typer(db_app, name="db")
db_app.add_typer(cluster_app, name="cluster")


@db_app.command("stop")
def db_stop(
    home: HomeOpt = None,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for running writers (ingest, merge, purge) to finish.")
    ] = 0.0,
    force: Annotated[bool, typer.Option("--force", help="Stop even while writers run: they fail.")] = False,
) -> None:
    """Stop the embedded PostgreSQL server, the command service and the embedding service of the data directory.

    While a writer (ingest, merge, purge) runs, it waits up to --wait seconds, then refuses (--force
    stops anyway: the writers fail and keep nothing). No client starts a server stopped this way
    again behind you; the next command you run does.
    """
    import time

    from ..embed import service
    from ..settings import Settings
    from ..store.server import EmbeddedServer
    from . import client

    h = home or Settings().home
    server = EmbeddedServer(h)
    deadline = time.monotonic() + max(0.0, wait)
    writers = server.writers()
    while writers and not force and time.monotonic() < deadline:
        time.sleep(0.5)
        writers = server.writers()
    if writers and not force:
        raise fail(
            f"not stopped: {len(writers)} writer(s) are running: {'; '.join(writers)}. Stopping now would make "
            "them fail. Wait for them (--wait SECONDS waits up to that long), or pass --force to stop anyway."
        )
    # The command services first: a search running in one finishes, and none starts the server again.
    commands = client.stop(h)
    embedder = service.stop(h)
    stopped = server.stop()
    console.print("stopped" if stopped else "not running")
    if embedder:
        console.print("embedding service stopped")
    if commands:
        console.print("command service stopped" if commands == 1 else f"{commands} command services stopped")


@db_app.command("status")
def db_status(dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Say whether the embedded server runs, report both logs (size, oldest entry, retention) and the local services."""
    from ..embed import service
    from ..settings import Settings
    from ..store.server import EmbeddedServer
    from . import client

    h = home or Settings().home
    server = "external" if dsn else ("running" if EmbeddedServer(h).running() else "not running")
    embedder = service.status(h)
    commands = client.status(h)
    status: dict[str, Any] = {
        "server": server,
        "embedding_service": embedder,
        "command_services": commands,
        "query_log": None,
        "answer_log": None,
    }
    logs = {}
    if server == "not running":
        # Never start a stopped server just to report on it; say why it stopped when its log knows.
        status["problem"] = EmbeddedServer(h).diagnose()
        when = EmbeddedServer(h).stopped_on_purpose()
        if when is not None and status["problem"] is None:
            status["problem"] = (
                f"stopped on purpose by `ranklock db stop` at {when}; no client starts it again, the next command "
                "you run does."
            )
    else:
        with engine(dsn, home) as eng:
            logs = eng.logs_status()
        status.update({name: s.as_dict() for name, s in logs.items()})
    if as_json:
        print_json(status)
        return
    console.print(server)
    if status.get("problem"):
        console.print(status["problem"], highlight=False, soft_wrap=True)
    for name, q in logs.items():
        console.print(
            f"{name.replace('_', ' ')}: {q.rows} entries, {q.bytes:,} bytes ({q.table_bytes:,} on disk), "
            f"oldest {q.oldest or '-'}; retention keeps {q.policy['describe']}; ids up to "
            f"{q.pruned_through} pruned ({q.pruned_rows} entries, last {q.last_pruned_at or 'never'})",
            highlight=False,
        )
    if commands:
        console.print(
            "command service: "
            + ", ".join(f"pid {c['pid']} ({c['served']} commands served)" for c in commands)
            + (" (one per environment)" if len(commands) > 1 else ""),
            highlight=False,
        )
    else:
        console.print("command service: not running (the next search starts it)")
    if embedder is None:
        console.print("embedding service: not running (the next command that needs the model starts it)")
    elif "unresponsive" in embedder:
        console.print(
            f"embedding service: pid {embedder['pid']}, running but not answering: {embedder['unresponsive']}",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(
            f"embedding service: pid {embedder['pid']}, {embedder['id']} ({embedder['sha256'][:12]}…), "
            f"{embedder['requests']} requests served",
            highlight=False,
        )
