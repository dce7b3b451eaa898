"""``ranklock db``: the embedded PostgreSQL server (stop, status) and a local Citus cluster (``db cluster``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
import typer.core

# typer vendors its own click; its parser raises these.
from ..phrasing import plural
from ..settings import human_duration
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
    """Stop the embedded PostgreSQL server, its local replicas, the command service and the embedding service.

    While a writer (ingest, merge, purge) runs, it waits up to --wait seconds, then refuses (--force
    stops anyway: the writers fail and keep nothing). No client starts a server or replica stopped
    this way again behind you; the next command you run does. A replica that cannot be stopped is
    named, and the command exits 2.
    """
    import time

    from ..embed import service
    from ..settings import Settings
    from ..store.server import EmbeddedServer
    from ..store.standby import stop_replicas
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
    # After the primary: a fast shutdown streams its last checkpoint to the standbys before it ends.
    replicas, not_stopped = stop_replicas(h)
    console.print("stopped" if stopped else "not running")
    if replicas:
        console.print(f"{plural(len(replicas), 'local replica')} stopped: {', '.join(replicas)}", highlight=False)
    if embedder:
        console.print("embedding service stopped")
    if commands:
        console.print("command service stopped" if commands == 1 else f"{commands} command services stopped")
    if (h / "cluster.json").is_file():
        from ..store.cluster import LocalCluster

        running = [n.name for n in LocalCluster(h).nodes() if n.server(h).running()]
        if running:
            console.print(
                f"the local Citus cluster keeps running ({', '.join(running)}); `ranklock db cluster stop` stops it",
                highlight=False,
            )
    if not_stopped:
        raise fail(
            f"not stopped: {'; '.join(not_stopped)}. Stop it with `ranklock db stop` again once the cause is fixed, "
            "or `ranklock replica drop NAME`."
        )


@db_app.command("status")
def db_status(dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Say whether the embedded server runs, report both logs (size, oldest entry, retention) and the local services."""
    from ..embed import service
    from ..home import find_home, home_exists, missing_home_message
    from ..store.server import EmbeddedServer
    from . import client

    found = find_home(home)
    h = found.path
    exists = home_exists(h)
    server = "external" if dsn else ("running" if EmbeddedServer(h).running() else "not running")
    if not dsn and (h / "cluster.json").is_file():
        from ..store.cluster import LocalCluster

        cluster = LocalCluster(h).status()
        server = "local Citus cluster" if cluster["healthy"] else "local Citus cluster, not healthy"
    embedder = _with_memory(service.status(h))
    commands = [c for c in (_with_memory(c) for c in client.status(h)) if c is not None]
    status: dict[str, Any] = {
        "home": str(h),
        "home_from": found.how,
        "home_exists": exists,
        "server": server,
        "embedding_service": embedder,
        "command_services": commands,
        "query_log": None,
        "answer_log": None,
    }
    logs = {}
    retention: list[Any] = []
    if server == "local Citus cluster, not healthy":
        status["problem"] = cluster["remedy"]
    elif server == "not running":
        # Never start a stopped server just to report on it; say why it stopped when its log knows.
        status["problem"] = EmbeddedServer(h).diagnose() if exists else missing_home_message(found)
        when = EmbeddedServer(h).stopped_on_purpose()
        if when is not None and status["problem"] is None:
            status["problem"] = (
                f"stopped on purpose by `ranklock db stop` at {when}; no client starts it again, the next command "
                "you run does."
            )
    else:
        with engine(dsn, home) as eng:
            logs = eng.logs_status()
            retention = [eng.prune_snapshots(c.name, dry_run=True) for c in eng.collections()]
        status.update({name: s.as_dict() for name, s in logs.items()})
    status["snapshot_retention"] = [r.as_dict() for r in retention]
    if as_json:
        print_json(status)
        return
    console.print(f"home: {h} ({found.how})", highlight=False, soft_wrap=True)
    console.print(f"server: {server}")
    if status.get("problem"):
        console.print(status["problem"], highlight=False, soft_wrap=True)
    for name, q in logs.items():
        console.print(
            f"{name.replace('_', ' ')}: {plural(q.rows, 'entry')}, {q.bytes:,} bytes ({q.table_bytes:,} on disk), "
            f"oldest {q.oldest or '-'}; retention keeps {q.policy['describe']}; "
            + (
                f"ids up to {q.pruned_through} pruned ({plural(q.pruned_rows, 'entry')}, last {q.last_pruned_at})"
                if q.pruned_rows
                else "nothing pruned yet"
            ),
            highlight=False,
        )
    for r in retention:
        console.print(_retention_line(r), highlight=False, soft_wrap=True)
    if commands:
        console.print(
            "command service: "
            + ", ".join(f"pid {c['pid']} ({plural(c['served'], 'command')} served, {_usage(c)})" for c in commands)
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
            f"{plural(embedder['requests'], 'request')} served, {_usage(embedder)}",
            highlight=False,
        )


def _with_memory(reply: dict[str, Any] | None) -> dict[str, Any] | None:
    """A local service's status with its resident memory (``rss_bytes``, from its pid)."""
    if reply is None:
        return None
    import psutil

    try:
        rss = int(psutil.Process(int(reply["pid"])).memory_info().rss)
    except (psutil.Error, KeyError, ValueError):
        rss = None
    return {**reply, "rss_bytes": rss}


def _usage(reply: dict[str, Any]) -> str:
    """``71 MB, idle 4m (exits after 10m idle)`` for a service's status; a held one says who holds it."""
    rss = f"{reply['rss_bytes'] / 1e6:,.0f} MB" if reply.get("rss_bytes") else "memory unknown"
    idle = float(reply.get("idle_for_s") or 0)
    limit = float(reply.get("idle_s") or 0)
    ends = f"exits after {human_duration(limit)} idle" if limit > 0 else "never exits by itself"
    holders = reply.get("held_by") or []
    if holders:
        # A server holds it (Engine.warm): the idle clock starts when the last holder lets go.
        pids = ", ".join(str(p) for p in holders)
        return f"{rss}, held by pid {pids} (a server; then {ends})"
    return f"{rss}, idle {human_duration(round(idle))} ({ends})"


def _retention_line(plan: Any) -> str:
    """One collection's snapshot retention: the policy, what it keeps and why, what the next write drops."""
    kept = len(plan.kept)
    special = [
        f"{sid}: {why}" for sid, why in plan.kept.items() if not why.startswith(("one of the newest", "younger"))
    ]
    drops = f"; the next write drops {plural(len(plan.dropped), 'snapshot')}" if plan.dropped else ""
    return (
        f"snapshots of {plan.collection}: {plural(kept, 'snapshot')} kept (policy: {plan.policy.describe()}; "
        f"{', '.join(special)}){drops}"
    )
