"""What every command shares: the console, the common options, the engine context and the error exit.

A command builds an engine, calls one method, and prints a readable table or (``--json``) one
stable JSON object; a RanklockError becomes one message on stderr and exit code 2 (:func:`fail`)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

# typer vendors its own click; its parser raises these.
from typer._click.core import Context as ClickContext
from typer._click.exceptions import NoSuchOption

from ..errors import RanklockError
from ..snapshot.shards import SHARDS_PER_WORKER

console = Console()

err_console = Console(stderr=True)


def reset_consoles() -> None:
    """Build :data:`console` and :data:`err_console` again, in place, from the current streams and environment.

    A process builds them once, at import, from its terminal and its environment (colour, width,
    ``NO_COLOR``).  The command service (ranklock.cli.service) runs many commands in one process, so
    it calls this before each: every module that imported them sees that command's terminal.
    """
    Console.__init__(console)
    Console.__init__(err_console, stderr=True)


DsnOpt = Annotated[
    str | None, typer.Option("--dsn", envvar="RANKLOCK_DSN", help="External PostgreSQL DSN (default: embedded).")
]

RerankOpt = Annotated[
    int | None,
    typer.Option(
        "--rerank",
        help="Rerank the top N fused hits with the reranker (--reranker or RANKLOCK_RERANKER) before taking the top k.",
    ),
]
RerankerOpt = Annotated[
    str | None,
    typer.Option(
        "--reranker",
        help="The reranker of --rerank: a saved CrossEncoder directory or a /rerank endpoint URL "
        "(default RANKLOCK_RERANKER).",
    ),
]
#: ``--shards`` of a new collection (ranklock.snapshot.shards).
ShardsOpt = Annotated[
    int | None,
    typer.Option(
        "--shards",
        help=f"Shards of each segment of a new collection on a Citus cluster (default: {SHARDS_PER_WORKER} per "
        "worker there, none on one node; 0: ordinary tables even on a cluster).",
    ),
]

HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home",
        envvar="RANKLOCK_HOME",
        help="Data directory (default: the nearest .ranklock folder here or above, else ~/.local/share/ranklock; "
        "`ranklock db status` prints it).",
    ),
]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]

ReadDsnOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--read-dsn",
        help="DSN of a streaming replica to search on (repeatable; RANKLOCK_READ_DSNS, comma-separated). "
        "Default: the local replicas of `ranklock replica create`.",
    ),
]

T = TypeVar("T")


def fail(exc: RanklockError | str) -> typer.Exit:
    # escape(): a message quotes user input, and "[/]" in a query must print, not parse as markup.
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(2)


class QueryCommand(typer.core.TyperCommand):
    """A command whose positional text may start with '-': say how to pass it when click takes it for an option."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes `args`
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as exc:
            token = next((a for a in given if a.startswith(exc.option_name)), exc.option_name)
            first = given[0] if given and not given[0].startswith("-") else "COLLECTION"
            hint = f" (did you mean {', '.join(sorted(exc.possibilities))}?)" if exc.possibilities else ""
            raise fail(
                f"no such option: {exc.option_name}{hint}; if {token!r} is the query, put -- before a query "
                f"that starts with '-': ranklock {ctx.info_name} {shlex.quote(first)} -- {shlex.quote(token)}"
            ) from None


def parse_settings(pairs: list[str] | None, *, taken: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as typed search parameters, parsed by :class:`SearchParams`; exit 2 on a bad one."""
    from ..settings import SearchParams
    from ..validation import parse_search_params

    raw: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise fail(
                f"--set {pair!r} is not KEY=VALUE; e.g. --set ef_search=200. Keys: "
                f"{', '.join(sorted(SearchParams.model_fields))}."
            )
        if key in raw:
            raise fail(f"--set {key}=... is given twice ({raw[key]!r} and {value!r}); give it once.")
        if (taken or {}).get(key) is not None:
            raise fail(f"{key} is given both as an option and as --set {key}={value}; give it once.")
        raw[key] = value
    try:
        parsed = parse_search_params(raw, strings=True)
    except RanklockError as exc:
        raise fail(exc) from None
    return {key: getattr(parsed, key) for key in raw}


def require_home(dsn: str | None, home: Path | None) -> None:
    """Stop a command that only reads when its home (ranklock.home) holds no database: say so, create nothing."""
    from ..home import find_home, home_exists

    if dsn:
        return  # an external server: the home only holds the local services' sockets
    found = find_home(home)
    if not home_exists(found.path):
        from ..errors import NotFound
        from ..home import missing_home_message

        raise fail(NotFound(missing_home_message(found)))


@contextmanager
def engine(
    dsn: str | None,
    home: Path | None,
    read_dsns: list[str] | None = None,
    *,
    long_lived: bool = False,
    reranker: str | None = None,
    creates: bool = False,
) -> Iterator[Any]:
    """The command's Engine.  A command is a short process: it embeds through the local embedding
    service (RANKLOCK_EMBED_SERVICE) unless it is ``long_lived`` (serve, mcp), which loads the model once.

    Only a command that ``creates`` (a first write: ingest, collection create, demo, token create) may
    make a home that does not exist yet; any other stops with :func:`require_home`'s message."""
    from ..engine import Engine
    from ..settings import Settings

    if not creates:
        require_home(dsn, home)
    try:
        served = not long_lived and Settings().embed_service
        eng = Engine(dsn=dsn, home=home, read_dsns=read_dsns or None, embed_service=served, reranker=reranker)
    except RanklockError as exc:
        raise fail(exc) from None
    try:
        yield eng
    except RanklockError as exc:
        raise fail(exc) from None
    finally:
        eng.close()


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    if not enabled:
        yield lambda _stage, _done, _total: None
        return
    labels = {"chunk": "chunking", "embed": "embedding", "write": "writing (COPY)", "index": "indexing"}
    with Progress(
        TextColumn("{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    ) as prog:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = prog.add_task(labels.get(stage, stage), total=max(total, 1), rate="")
            task = tasks[stage]
            prog.update(task, completed=done, total=max(total, 1))
            speed = prog.tasks[task].speed
            prog.update(task, rate=f"{speed:,.0f}/s" if speed else "")

        yield update


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=False, default=str) + "\n")
