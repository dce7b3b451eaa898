"""CLI commands for the eval area, merged into :data:`ranklock.cli.app` by ``cli/root.py``.

* ``ranklock eval COLLECTION --golden PATH`` (also ``ranklock eval run ...``)
* ``ranklock eval compare BASE.json NEW.json``: the recall gate, exit 1 on a drop
* ``ranklock stability COLLECTION --queries PATH --runs N``: exit 1 below the threshold
* ``ranklock canary COLLECTION --queries PATH``: exit 1 on drift
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from typer.core import TyperGroup

from ..errors import InputError, RanklockError
from ..phrasing import shown
from ._common import DsnOpt, HomeOpt, JsonOpt, ReadDsnOpt, console, engine, err_console, fail, print_json, progress_bar
from .render import FORMATS, FormatOpt, clip, render_eval, resolve_format, table_box

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["eval_app"]


class _DefaultRunGroup(TyperGroup):
    """``ranklock eval COLLECTION ...`` means ``ranklock eval run COLLECTION ...``.

    Click parses a group's own arguments before the subcommand name, so a group
    cannot take COLLECTION and also have ``compare``; instead anything that is
    not a subcommand name (or a help flag) gets ``run`` put in front of it.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


eval_app = typer.Typer(
    cls=_DefaultRunGroup,
    help="Evaluate retrieval on a golden set (`eval COLLECTION --golden PATH`), or gate two reports "
    "(`eval compare BASE NEW`).",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")

SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Search parameter override KEY=VALUE (e.g. ef_search=40, lexical_ranker=bm25)."),
]


def _parse_sets(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {item!r} is not KEY=VALUE; write e.g. --set ef_search=40.")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out[key.strip()] = value
    return out


@eval_app.command("run")
def eval_run(
    collection: Annotated[str, typer.Argument(help="Collection name.")],
    golden: Annotated[Path, typer.Option("--golden", help="BEIR folder, qrels .tsv, or hand-labelled .jsonl/.yaml.")],
    k: Annotated[str, typer.Option("--k", help="Cutoffs, comma-separated.")] = "10,50,100",
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder for report.json, summary.md, run files, plot.")
    ] = None,
    modes: Annotated[str, typer.Option("--modes", help="Modes, comma-separated.")] = "hybrid,lexical,semantic",
    snapshot: Annotated[int | None, typer.Option(help="Snapshot id (default: the active one).")] = None,
    split: Annotated[str, typer.Option(help="BEIR qrels split (qrels/<split>.tsv).")] = "test",
    sets: SetOpt = None,
    answers: Annotated[
        bool,
        typer.Option(
            "--answers",
            help="Score Ask on a question set (questions.jsonl or its folder): recall@8/10, citations, "
            "correctness, abstention, per class, and the reranker trigger.",
        ),
    ] = False,
    generators: Annotated[
        list[str] | None,
        typer.Option("--generator", help="With --answers: generator(s) to score (default extractive)."),
    ] = None,
    half: Annotated[
        str,
        typer.Option(
            "--half",
            help="With --answers: tune, held-out or all of the questions (the seeded split of ranklock.eval.split).",
        ),
    ] = "all",
    rerank: Annotated[
        int | None,
        typer.Option("--rerank", help="With --answers: rerank the top N fused chunks before Ask takes its 8."),
    ] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    read_dsn: ReadDsnOpt = None,
) -> None:
    """Compute recall@k, nDCG@k and MRR of COLLECTION on a golden set, per mode, trec_eval-compatible."""
    if answers:
        from .eval_answers import eval_answers_command

        eval_answers_command(
            collection,
            golden,
            modes,
            snapshot,
            generators or ["extractive"],
            out,
            dsn,
            home,
            as_json,
            half=half,
            rerank=rerank,
        )
        return
    from ..eval.golden import load_golden
    from ..eval.run import evaluate, parse_ks, parse_modes

    try:
        out_format = resolve_format(fmt, as_json, FORMATS, "eval")
        ks, mode_list, params = parse_ks(k), parse_modes(modes), _parse_sets(sets)
        gs = load_golden(golden, split=split)
        if out_format == "trec" and len(mode_list) != 1:
            # Refused before searching: the run would be thrown away at the end.
            render_eval({"modes": dict.fromkeys(mode_list)}, "trec", trec_runs={}, files=[])
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home, read_dsn) as eng, progress_bar(out_format == "table") as prog:
        run = evaluate(eng, collection, gs, ks=ks, modes=mode_list, snapshot=snapshot, params=params, progress=prog)
    rep = run.report
    written = [str(p) for p in run.write(out)] if out is not None else []
    render_eval(rep, out_format, trec_runs={m: run.trec_run(m) for m in run.rankings}, files=written)
    if written and out_format == "table":
        console.print(f"wrote {len(written)} files to {out}")


@eval_app.command("compare")
def eval_compare(
    base: Annotated[Path, typer.Argument(help="The baseline report.json (or its folder).")],
    new: Annotated[Path, typer.Argument(help="The candidate report.json (or its folder).")],
    k: Annotated[str | None, typer.Option("--k", help="Gated cutoffs (default: all in both reports).")] = None,
    modes: Annotated[str | None, typer.Option("--modes", help="Gated modes (default: all in both).")] = None,
    tolerance: Annotated[float, typer.Option(help="Allowed drop in mean recall (absolute).")] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """The recall gate: exit 1 when recall at any gated k dropped beyond the tolerance, even if nDCG rose."""
    from ..eval.compare import compare_reports, load_report
    from ..eval.run import parse_ks, parse_modes

    try:
        res = compare_reports(
            load_report(base),
            load_report(new),
            ks=parse_ks(k) if k else None,
            modes=parse_modes(modes) if modes else None,
            tolerance=tolerance,
        )
    except RanklockError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(res.to_dict())
    else:
        table = Table("mode", "metric", "base", "new", "delta", box=table_box(console))
        for mode, ms in res.metrics.items():
            for name, v in ms.items():
                style = "red" if name.startswith("recall@") and v["delta"] < -res.tolerance else ""
                table.add_row(
                    mode,
                    name,
                    f"{v['base']:.4f}",
                    f"{v['new']:.4f}",
                    f"[{style}]{v['delta']:+.4f}[/]" if style else f"{v['delta']:+.4f}",
                )
        console.print(table)
        if res.lost:
            console.print(f"[bold]queries that lost relevant documents[/] ({len(res.lost)} query/cutoff pairs):")
            for row in res.lost[:50]:
                console.print(
                    f"  {row['mode']} k={row['k']} query {shown(str(row['qid']))}: lost "
                    f"{', '.join(shown(d) for d in row['lost'])}",
                    highlight=False,
                )
            if len(res.lost) > 50:
                console.print(f"  … {len(res.lost) - 50} more (see --json)")
        if res.manifest_diff or res.params_diff:
            console.print("[bold]what differs between the two runs[/]:")
            for key, v in res.manifest_diff.items():
                console.print(f"  manifest {key}: {_short(v['old'])} -> {_short(v['new'])}", highlight=False)
            for mode, d in res.params_diff.items():
                for key, v in d.items():
                    console.print(f"  {mode} param {key}: {v['old']} -> {v['new']}", highlight=False)
        else:
            console.print("no manifest field or search parameter differs")
        for note in res.notes:
            err_console.print(f"[yellow]note:[/] {note}")
        for f_ in res.failures:
            err_console.print(f"[bold red]FAIL:[/] {f_}", highlight=False)
        if res.passed:
            console.print(f"[green]PASS[/]: no recall drop beyond {res.tolerance:g} at k={res.gated_ks}")
    if not res.passed:
        raise typer.Exit(1)


def _short(v: Any) -> str:
    return clip(json.dumps(v, default=str), 40)


@app.command()
def stability(
    collection: Annotated[str, typer.Argument(help="Collection name.")],
    queries: Annotated[Path, typer.Option("--queries", help="Queries: .txt, .jsonl, .yaml or a BEIR folder.")],
    runs: Annotated[int, typer.Option("--runs", help="Times each query is searched.")] = 10,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Searches in flight at once.")] = 1,
    k: Annotated[int, typer.Option("--k", help="Top-k compared.")] = 10,
    threshold: Annotated[float, typer.Option(help="Exit 1 when the RSI is below this.")] = 0.9,
    mode: Annotated[str, typer.Option(help="hybrid, lexical or semantic.")] = "hybrid",
    snapshot: Annotated[int | None, typer.Option(help="Snapshot id (default: the active one).")] = None,
    sets: SetOpt = None,
    compare_snapshot: Annotated[
        int | None, typer.Option("--compare-snapshot", help="Compare against this snapshot instead of repeating.")
    ] = None,
    compare_sets: Annotated[
        list[str] | None,
        typer.Option("--compare-set", help="Compare against these parameter overrides (e.g. ef_search=400)."),
    ] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    read_dsn: ReadDsnOpt = None,
) -> None:
    """Retrieval Stability Index: mean top-k Jaccard over repeated runs (or between two configurations)."""
    from ..eval.golden import load_queries
    from ..eval.stability import compare_configurations, measure_stability

    try:
        qs = load_queries(queries)
        params = _parse_sets(sets)
        other = _parse_sets(compare_sets)
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home, read_dsn) as eng:
        if compare_snapshot is not None or other:
            rep = compare_configurations(
                eng,
                collection,
                qs,
                a={"snapshot": snapshot, **params},
                b={"snapshot": compare_snapshot if compare_snapshot is not None else snapshot, **params, **other},
                k=k,
                mode=mode,
                concurrency=concurrency,
                threshold=threshold,
            )
        else:
            rep = measure_stability(
                eng,
                collection,
                qs,
                runs=runs,
                concurrency=concurrency,
                k=k,
                mode=mode,
                snapshot=snapshot,
                params=params,
                threshold=threshold,
            )
    if as_json:
        print_json(rep.to_dict())
    else:
        what = "between the two configurations" if rep.kind == "configurations" else f"over {rep.runs} runs"
        console.print(
            f"RSI {rep.rsi:.4f} (mean top-{rep.k} Jaccard {what}), RBO {rep.rbo:.4f}, byte-identical "
            f"{rep.identical_share:.1%} of {rep.queries} queries; concurrency {rep.concurrency}, "
            f"{rep.seconds:.1f}s on snapshot {rep.snapshot['id']}",
            highlight=False,
        )
        for row in rep.unstable[:10]:
            console.print(f"  query {row['qid']}: Jaccard {row['jaccard']:.3f}, RBO {row['rbo']:.3f}", highlight=False)
        if not rep.passed:
            err_console.print(f"[bold red]FAIL:[/] RSI {rep.rsi:.4f} is below the threshold {rep.threshold:g}")
    if not rep.passed:
        raise typer.Exit(1)


@app.command()
def canary(
    collection: Annotated[str, typer.Argument(help="Collection name.")],
    queries: Annotated[Path, typer.Option("--queries", help="Saved queries: .txt, .jsonl, .yaml or a BEIR folder.")],
    record: Annotated[
        Path | None, typer.Option("--record", help="Record of the last run (default <home>/canary/<coll>-<mode>.json).")
    ] = None,
    k: Annotated[int, typer.Option("--k", help="Top-k compared.")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid, lexical or semantic.")] = "hybrid",
    threshold: Annotated[float, typer.Option(help="After a snapshot change: exit 1 when the RSI is below this.")] = 0.9,
    accept: Annotated[bool, typer.Option("--accept", help="Record this run as the baseline even if it fails.")] = False,
    sets: SetOpt = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay saved queries on the active snapshot and compare with the last recorded run (for cron)."""
    from ..eval.canary import run_canary
    from ..eval.golden import load_queries

    try:
        qs = load_queries(queries)
        params = _parse_sets(sets)
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home) as eng:
        rep = run_canary(
            eng, collection, qs, record=record, k=k, mode=mode, params=params, threshold=threshold, accept=accept
        )
    if as_json:
        print_json(rep.to_dict())
    else:
        rsi = "" if rep.rsi is None else f"; RSI {rep.rsi:.4f}, byte-identical {rep.identical_share:.1%}"
        console.print(f"canary {collection}: {rep.verdict} on snapshot {rep.snapshot['id']}{rsi}", highlight=False)
        for key, v in rep.manifest_diff.items():
            console.print(f"  manifest {key}: {_short(v['old'])} -> {_short(v['new'])}", highlight=False)
        for note in rep.notes:
            err_console.print(f"[yellow]note:[/] {note}")
    if not rep.passed:
        raise typer.Exit(1)
