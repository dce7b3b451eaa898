"""The ``ranklock`` command line: a thin shell over :class:`ranklock.Engine`.

Each command builds an engine, calls one method, and prints a readable table
or (``--json``) one stable JSON object.  Domain errors become a one-paragraph
message on stderr and exit code 2; nothing here knows SQL.
"""

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
from rich.table import Table

# typer vendors its own click; its parser raises these.
from typer._click.core import Context as ClickContext
from typer._click.exceptions import NoSuchOption

from .cli_render import FormatOpt
from .errors import RanklockError
from .settings import DEFAULT_EMBEDDER, ChunkerParams, search_param_help

app = typer.Typer(
    name="ranklock",
    help="Deterministic hybrid retrieval on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="The embedded PostgreSQL server.", no_args_is_help=True)
app.add_typer(db_app, name="db")

console = Console()
err_console = Console(stderr=True)


def env_default(name: str) -> str:
    """The declared default of environment variable ``name`` (settings.ENV), for help texts."""
    from .settings import ENV

    return next(v.default or "" for v in ENV if v.name == name)


DsnOpt = Annotated[
    str | None, typer.Option("--dsn", envvar="RANKLOCK_DSN", help="External PostgreSQL DSN (default: embedded).")
]
HomeOpt = Annotated[
    Path | None,
    typer.Option("--home", envvar="RANKLOCK_HOME", help=f"Data directory (default ./{env_default('RANKLOCK_HOME')})."),
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
    from .settings import SearchParams
    from .validation import parse_search_params

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


@contextmanager
def engine(dsn: str | None, home: Path | None, read_dsns: list[str] | None = None) -> Iterator[Any]:
    from .engine import Engine

    try:
        eng = Engine(dsn=dsn, home=home, read_dsns=read_dsns or None)
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
        yield lambda stage, done, total: None
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


@app.command()
def collections(dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """List collections with their active snapshot."""
    with engine(dsn, home) as eng:
        rows = eng.collections()
    if as_json:
        print_json({"collections": rows})
        return
    table = Table("name", "language", "embedder", "dim", "index", "snapshot", "documents", "chunks")
    for r in rows:
        table.add_row(
            r["name"],
            r["language"],
            r["embedder_id"],
            str(r["dim"]),
            r["index_kind"],
            str(r["active_snapshot_id"] or "-"),
            str(r["documents"] or 0),
            str(r["chunks"] or 0),
        )
    console.print(table)


@app.command()
def ingest(
    collection: Annotated[str, typer.Argument(help="Collection name (created if missing).")],
    path: Annotated[Path, typer.Argument(help="corpus.jsonl, a BEIR folder, or a folder of .txt/.md files.")],
    replace: Annotated[bool, typer.Option("--replace", help="The new snapshot holds exactly these documents.")] = False,
    no_activate: Annotated[
        bool, typer.Option("--no-activate", help="Build the snapshot but keep the old one active.")
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option("--allow-empty", help="Allow a snapshot with no documents (e.g. --replace with an empty file)."),
    ] = False,
    language: Annotated[str, typer.Option(help="Text-search language for a new collection.")] = "english",
    accent: Annotated[
        str, typer.Option(help="Accent policy for a new collection: sensitive or insensitive.")
    ] = "sensitive",
    field: Annotated[
        list[str] | None, typer.Option("--field", help="Typed field for a new collection, name:type[!].")
    ] = None,
    index: Annotated[str, typer.Option(help="Vector index for a new collection: hnsw, ivfflat or exact.")] = "hnsw",
    window: Annotated[
        int, typer.Option(help="Chunk window in embedder tokens (new collection).")
    ] = ChunkerParams.model_fields["window"].default,
    overlap: Annotated[
        int, typer.Option(help="Chunk overlap in tokens (new collection).")
    ] = ChunkerParams.model_fields["overlap"].default,
    embedder: Annotated[
        str | None, typer.Option(help=f"Embedder for a new collection (default {DEFAULT_EMBEDDER}).")
    ] = None,
    skip_unreadable: Annotated[
        bool,
        typer.Option(
            "--skip-unreadable", help="Leave out (and name) files that cannot be read instead of failing the ingest."
        ),
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest a corpus into a new snapshot of COLLECTION and activate it.

    PATH may be a folder of .txt, .md (front matter, wiki links, #tags), .pdf, .docx and .html files:
    each is read by the loader for its extension. Notes' date, tags, people and links become typed
    fields of a new collection unless --field is given.
    """
    from .cli_files import load_for_cli, print_files_report

    with engine(dsn, home) as eng:
        loaded = load_for_cli(path, skip_unreadable)
        create = {
            "language": language,
            "accent": accent,
            "fields": field or (loaded.suggested_fields() if loaded else []),
            "index": index,
            "chunker": ChunkerParams(window=window, overlap=overlap),
            "embedder": embedder,
        }
        with progress_bar(not as_json) as prog:
            report = eng.ingest(
                collection,
                loaded.documents if loaded else path,
                replace=replace,
                activate=not no_activate,
                allow_empty=allow_empty,
                progress=prog,
                create=create,
            )
    d = report.as_dict()
    if loaded:
        d["files"] = loaded.as_dict()
    if as_json:
        print_json(d)
        return
    if loaded:
        print_files_report(loaded)
    s = report.seconds
    console.print(
        f"[bold]{collection}[/]: snapshot {report.snapshot_id} "
        f"({'active' if report.activated else 'not activated'}), {report.documents} documents, "
        f"{report.chunks} chunks; added {report.added}, changed {report.changed}, removed {report.removed}, "
        f"unchanged {report.unchanged}; embedded {report.embedded}, reused {report.reused} cached vectors; "
        f"{s.get('total', 0):.1f}s (embedding {s.get('embed', 0):.1f}s, database "
        f"{s.get('write', 0) + s.get('index', 0):.1f}s)"
    )
    console.print(f"corpus digest {report.corpus_digest[:16]}…  manifest {report.manifest_hash[:16]}…")
    if report.skipped:
        shown = ", ".join(report.skipped[:10]) + (
            f" and {len(report.skipped) - 10} more" if len(report.skipped) > 10 else ""
        )
        err_console.print(
            f"[bold yellow]skipped {len(report.skipped)} document(s) with empty text[/] "
            f"(not in the snapshot): {escape(shown)}",
            highlight=False,
            soft_wrap=True,
        )


def _set_help() -> str:
    from .settings import SearchParams

    return "Search parameter KEY=VALUE, repeatable; keys: " + ", ".join(sorted(SearchParams.model_fields)) + "."


@app.command(cls=QueryCommand)
def search(
    collection: Annotated[str, typer.Argument(help="Collection name.")],
    query: Annotated[str | None, typer.Argument(help="The query text (or plan it from --request).")] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Number of documents to return.")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid, lexical or semantic.")] = "hybrid",
    filter: Annotated[str | None, typer.Option("--filter", help="Hard constraints, e.g. 'year >= 2020'.")] = None,
    snapshot: Annotated[int | None, typer.Option(help="Snapshot id (default: the active one).")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help="ISO timestamp: documents in force then.")] = None,
    depth: Annotated[int | None, typer.Option(help=search_param_help("depth"))] = None,
    ef_search: Annotated[int | None, typer.Option(help=search_param_help("ef_search"))] = None,
    ranker: Annotated[str | None, typer.Option(help=search_param_help("lexical_ranker"))] = None,
    syntax: Annotated[str | None, typer.Option(help=search_param_help("query_syntax"))] = None,
    k1: Annotated[float | None, typer.Option("--k1", help=search_param_help("k1"))] = None,
    b: Annotated[float | None, typer.Option("--b", help=search_param_help("b"))] = None,
    rrf_k: Annotated[int | None, typer.Option(help=search_param_help("rrf_k"))] = None,
    iterative_scan: Annotated[str | None, typer.Option(help=search_param_help("iterative_scan"))] = None,
    max_scan_tuples: Annotated[int | None, typer.Option(help=search_param_help("max_scan_tuples"))] = None,
    probes: Annotated[int | None, typer.Option(help=search_param_help("probes"))] = None,
    exact_threshold: Annotated[int | None, typer.Option(help=search_param_help("exact_threshold"))] = None,
    exact_fallback: Annotated[
        bool | None, typer.Option("--exact-fallback/--no-exact-fallback", help=search_param_help("exact_fallback"))
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help=_set_help())] = None,
    timings: Annotated[
        bool, typer.Option(help="Include timings and the query-log id (for `ranklock replay`) in the JSON output.")
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    read_dsn: ReadDsnOpt = None,
    request: Annotated[
        str | None, typer.Option("--request", help="A structured request: planned, then run, asked or refused.")
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="With --request: say why each hit is where it is.")
    ] = False,
    fmt: FormatOpt = None,
    qid: Annotated[str, typer.Option("--qid", help="With --format trec: the query id column.")] = "1",
) -> None:
    """Search COLLECTION: keyword and vector branches fused by RRF.

    A query that starts with '-' goes after --: ranklock search docs -- '-word foo'.
    """
    options: dict[str, Any] = {
        "depth": depth,
        "ef_search": ef_search,
        "lexical_ranker": ranker,
        "query_syntax": syntax,
        "k1": k1,
        "b": b,
    }
    # The other parameters join only when given, so the query log's request stays as it was without them.
    more = {
        "rrf_k": rrf_k,
        "iterative_scan": iterative_scan,
        "max_scan_tuples": max_scan_tuples,
        "probes": probes,
        "exact_threshold": exact_threshold,
        "exact_fallback": exact_fallback,
    }
    options.update({key: value for key, value in more.items() if value is not None})
    settings = parse_settings(set_, taken=options)
    if request is not None or query is None:
        from .cli_plan import search_request_cli

        if settings:
            raise fail("--set applies to a QUERY search; a --request search takes its parameters from the plan.")

        search_request_cli(collection, query, request, k=k, explain=explain, as_json=as_json, dsn=dsn, home=home)
        return
    from . import cli_render

    try:
        out_format = cli_render.resolve_format(fmt, as_json, cli_render.FORMATS, "search")
    except RanklockError as exc:
        raise fail(exc) from None
    # A CLI process starts without the model: a query whose embedding is not cached yet imports and
    # loads it first, which is most of a cold search's seconds; say so while it happens.
    wait = (
        "searching (a new query loads the embedding model first: a few seconds)…" if mode != "lexical" else "searching…"
    )
    with engine(dsn, home, read_dsn) as eng, cli_render.waiting(wait):
        res = eng.search(
            collection,
            query,
            k=k,
            mode=mode,
            filter=filter,
            snapshot=snapshot,
            as_of=as_of,
            **{**options, **settings},
        )
    cli_render.render_search(res, out_format, timings=timings, qid=qid)
    # JSON carries the warnings itself; the other formats have no place for them but stderr.
    for w in res.warnings if out_format != "json" else []:
        err_console.print(f"[yellow]note:[/] {escape(w)}")


@app.command()
def demo(
    which: Annotated[
        str,
        typer.Argument(help="docs (a small text corpus), resumes (synthetic resumes) or journal (a personal journal)."),
    ] = "docs",
    count: Annotated[int, typer.Option(help="resumes: how many synthetic resumes to generate.")] = 400,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
) -> None:
    """Ingest a ready demo collection (docs, resumes or journal) and run a few searches on it."""
    from .demo import run_demo, run_journal_demo

    if which not in ("docs", "resumes", "journal"):
        raise typer.BadParameter(f"unknown demo {which!r}; use docs, resumes or journal.")
    with engine(dsn, home) as eng:
        if which == "journal":
            run_journal_demo(eng, console, progress_bar)
            return
        if which == "resumes":
            from .cli_plan import run_resume_demo

            run_resume_demo(eng, count)
            return
        run_demo(eng, console, progress_bar)


@db_app.command("stop")
def db_stop(home: HomeOpt = None) -> None:
    """Stop the embedded PostgreSQL server."""
    from .settings import Settings
    from .store.server import EmbeddedServer

    h = home or Settings().home
    stopped = EmbeddedServer(h).stop()
    console.print("stopped" if stopped else "not running")


@db_app.command("status")
def db_status(dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Say whether the embedded server runs, and report the query log (size, oldest entry, retention)."""
    from .settings import Settings
    from .store.server import EmbeddedServer

    h = home or Settings().home
    server = "external" if dsn else ("running" if EmbeddedServer(h).running() else "not running")
    status: dict[str, Any] = {"server": server, "query_log": None}
    if server != "not running":  # never start a stopped server just to report on it
        with engine(dsn, home) as eng:
            status["query_log"] = eng.log_status()
    if as_json:
        print_json(status)
        return
    console.print(server)
    q = status["query_log"]
    if q is not None:
        console.print(
            f"query log: {q['rows']} entries, {q['bytes']:,} bytes ({q['table_bytes']:,} on disk), oldest "
            f"{q['oldest'] or '-'}; retention keeps {q['policy']['describe']}; ids up to {q['pruned_through']} "
            f"pruned ({q['pruned_rows']} entries, last {q['last_pruned_at'] or 'never'})",
            highlight=False,
        )


def main() -> None:
    app()


# Command groups live in their own modules; importing them registers them on `app`.
from . import cli_ask, cli_eval, cli_filters, cli_http, cli_log, cli_mcp, cli_plan, cli_replica, cli_snapshot  # noqa: E402

__all__ = [
    "app",
    "cli_ask",
    "cli_eval",
    "cli_filters",
    "cli_http",
    "cli_log",
    "cli_mcp",
    "cli_plan",
    "cli_replica",
    "cli_snapshot",
    "main",
]
