"""What every command shares: the console, the common options, the engine context and the error exit.

A command builds an engine, calls one method, and prints a readable table or (``--json``) one
stable JSON object; a RanklockError becomes one message on stderr and exit code 2 (:func:`fail`),
or, when the command was asked for JSON (``--json``, ``--format json|jsonl``), one JSON object on
stdout, ``{"error": {"type", "message"}}`` as the HTTP API answers, with the same exit code."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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

from ..errors import RanklockError, public_name
from ..phrasing import shown_lines
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


#: Whether the running command's errors are JSON: set by the root group (cli/root.py) from the command's
#: arguments (ranklock.cli.client.wants_json) before they are parsed, so a usage error of a ``--json`` command is JSON too.  A context
#: variable: the command service runs each command in a thread of its own.
json_errors: ContextVar[bool] = ContextVar("json_errors", default=False)


def fail(exc: RanklockError | str, *, etype: str = "InputError") -> typer.Exit:
    """Say ``exc`` and return the exit (status 2) to raise: one line on stderr, or the JSON error object on
    stdout when the command was asked for JSON (:data:`json_errors`).  ``etype`` is the type a plain
    message reports (a RanklockError reports its class)."""
    if json_errors.get():
        name = public_name(exc) if isinstance(exc, RanklockError) else etype
        print_json({"error": {"type": name, "message": str(exc)}})
        return typer.Exit(2)
    # escape(): a message quotes user input, and "[/]" in a query must print, not parse as markup; shown_lines():
    # a file name it quotes may hold an escape sequence, which must print as text, not act on the terminal.
    err_console.print(
        f"[bold red]error:[/] {escape(shown_lines(str(exc)))}", highlight=False, markup=True, soft_wrap=True
    )
    return typer.Exit(2)


def stdin_is_terminal() -> bool:
    """Whether someone can answer a question on standard input (a terminal, not a pipe or a file)."""
    return sys.stdin.isatty()


def ask_first(yes: bool, *, deletes: str, to: str, question: str, answer: str, shown: str, nothing: str) -> None:
    """Ask before a deletion nothing undoes (``collection drop``, ``log prune --older-than 0``), unless ``--yes``.

    ``deletes`` says what the command deletes, ``to`` what --yes does ("drop it"); the prompt is
    ``question``, then the typed ``answer`` confirms (``shown``: how the prompt names it).  Without a
    terminal on standard input nobody can answer: the command refuses and says to pass --yes.
    """
    if yes:
        return
    if not stdin_is_terminal():
        raise fail(f"{deletes} for good; it asks first, and standard input is not a terminal. Pass --yes to {to}.")
    got = typer.prompt(f"{question} This cannot be undone. Type {shown} to confirm", default="", show_default=False)
    if got != answer:
        raise fail(f"{got!r} is not {answer!r}; nothing was {nothing}.")


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
                f"that starts with '-': ranklock {ctx.info_name} {shlex.quote(first)} -- {shlex.quote(token)}",
                etype="UsageError",
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
    reranker: str | None = None,
    creates: bool = False,
) -> Iterator[Any]:
    """The command's Engine.  It embeds through the home's embedding service (RANKLOCK_EMBED_SERVICE), as
    every process of the home does; a long-lived command (serve, mcp) holds it with :meth:`Engine.warm`.

    Only a command that ``creates`` (a first write: ingest, collection create, demo, token create) may
    make a home that does not exist yet; any other stops with :func:`require_home`'s message."""
    from ..engine import Engine

    if not creates:
        require_home(dsn, home)
    try:
        eng = Engine(dsn=dsn, home=home, read_dsns=read_dsns or None, reranker=reranker)
    except RanklockError as exc:
        raise fail(exc) from None
    try:
        yield eng
    except RanklockError as exc:
        raise fail(exc) from None
    finally:
        eng.close()


def warm_in_background(eng: Any, logger: str) -> None:
    """A long-lived command's :meth:`Engine.warm` in a thread: it answers at once, the model loads (and is held)
    meanwhile, and each line of what was loaded goes to the log ``logger`` (stderr)."""
    import logging
    import threading

    def warm() -> None:
        for line in eng.warm():
            logging.getLogger(logger).warning("%s", line)

    threading.Thread(target=warm, name="ranklock-warm", daemon=True).start()


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
            # Before its first batch the embedder may be starting (the embedding service loads the
            # model, seconds): said, so a bar at 0 does not look stuck.
            waiting = stage == "embed" and done == 0
            prog.update(task, rate=f"{speed:,.0f}/s" if speed else "waiting for the model" if waiting else "")

        yield update


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=False, default=str) + "\n")
