"""``ranklock search``: one query (or a structured --request) against a collection."""

from __future__ import annotations

from typing import Annotated, Any

import typer
import typer.core
from rich.markup import escape

# typer vendors its own click; its parser raises these.
from ..errors import RanklockError
from ..settings import REQUEST, search_param_help
from ._common import (
    DsnOpt,
    HomeOpt,
    JsonOpt,
    QueryCommand,
    ReadDsnOpt,
    RerankerOpt,
    RerankOpt,
    engine,
    err_console,
    fail,
    parse_settings,
)
from .render import FormatOpt

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()


def _set_help() -> str:
    from ..settings import SearchParams

    return "Search parameter KEY=VALUE, repeatable; keys: " + ", ".join(sorted(SearchParams.model_fields)) + "."


@app.command(cls=QueryCommand)
def search(
    collection: Annotated[str, typer.Argument(help="Collection name.")],
    query: Annotated[str | None, typer.Argument(help="The query text (or plan it from --request).")] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Number of documents to return.")] = REQUEST.k,
    offset: Annotated[
        int,
        typer.Option(
            "--offset", help="Skip this many results first: the next page (ranks stay those of the whole list)."
        ),
    ] = 0,
    mode: Annotated[str, typer.Option(help="hybrid, lexical or semantic.")] = REQUEST.mode,
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
    rerank: RerankOpt = None,
    reranker: RerankerOpt = None,
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
        from .plan import search_request_cli

        if settings:
            raise fail("--set applies to a QUERY search; a --request search takes its parameters from the plan.")
        if rerank is not None:
            raise fail("--rerank applies to a QUERY search; a --request search is ranked by its plan.")
        if offset:
            raise fail("--offset applies to a QUERY search; a --request search returns its plan's top k.")

        search_request_cli(collection, query, request, k=k, explain=explain, as_json=as_json, dsn=dsn, home=home)
        return
    from . import render

    try:
        out_format = render.resolve_format(fmt, as_json, render.FORMATS, "search")
    except RanklockError as exc:
        raise fail(exc) from None
    # A CLI process never loads the model: a new query's vector comes from the local embedding service
    # (ranklock.embed.service), which only the first such command after `db stop` (or an idle exit)
    # has to start, loading the model for seconds; say so while it may happen.
    wait = (
        "searching (the first search starts the embedding service: a few seconds)…"
        if mode != "lexical"
        else "searching…"
    )
    # --rerank and --offset join the call only when given: a search without them runs exactly as before.
    reranking: dict[str, Any] = {} if rerank is None else {"rerank": rerank}
    if offset:
        reranking["offset"] = offset
    with engine(dsn, home, read_dsn, reranker=reranker) as eng, render.waiting(wait):
        res = eng.search(
            collection,
            query,
            k=k,
            mode=mode,
            filter=filter,
            snapshot=snapshot,
            as_of=as_of,
            **{**options, **settings},
            **reranking,
        )
    render.render_search(res, out_format, timings=timings, qid=qid)
    # JSON carries the warnings itself; the other formats have no place for them but stderr.
    for w in res.warnings if out_format != "json" else []:
        err_console.print(f"[yellow]note:[/] {escape(w)}")
