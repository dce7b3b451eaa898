"""CLI commands for structured search, merged into :data:`ranklock.cli.app` by ``cli/root.py``.

``ranklock plan COLLECTION "request"`` shows the plan; ``ranklock search
COLLECTION --request "..."`` runs it (see :func:`search_request_command`);
``ranklock resumes ingest|generate`` and ``ranklock demo resumes`` build
resume collections.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..phrasing import shown
from ._common import DsnOpt, HomeOpt, JsonOpt, console, engine, err_console, print_json, progress_bar
from .render import branch_ranks, clip

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["render_parts", "render_plan", "run_resume_demo", "search_request_cli", "search_request_command"]

resumes_app = typer.Typer(
    help="Resume collections: ingest real resumes, generate synthetic ones.", no_args_is_help=True
)
app.add_typer(resumes_app, name="resumes")

LlmOpt = Annotated[
    bool,
    typer.Option(
        "--llm",
        help="Let the OpenAI-compatible endpoint in RANKLOCK_PLAN_LLM_URL propose the plan (validated like any other).",
    ),
]


def _extractor(llm: bool) -> Any:
    if not llm:
        return None
    from ..plan.llm import LLMExtractor

    return LLMExtractor()


def render_parts(plan: Any) -> None:
    """Print where each phrase of the request went (constraint, preference, ranking text, question, ignored)."""
    if not plan.parts:
        return
    table = Table("phrase", "went to", "detail", title="the request, phrase by phrase")
    for p in plan.parts:
        question = "the question below" if p.question and p.question == plan.question else p.question
        detail = p.predicate or question or p.note or (f"on {p.field}" if p.field else "")
        table.add_row(repr(p.phrase), p.role.replace("_", " "), detail)
    console.print(table)


def render_plan(plan: Any) -> None:
    """Print a plan for people: the constraints and preferences, the question, or the refusal."""
    if plan.kind == "refusal":
        console.print(f"[bold red]refused[/]: {plan.phrase!r} selects or ranks on {plan.attribute}.", highlight=False)
        console.print(plan.reason, highlight=False, soft_wrap=True)
        return
    if plan.kind == "clarification_request":
        render_parts(plan)
        console.print(f"[bold yellow]clarification needed[/] about {plan.phrase!r}:", highlight=False)
        console.print(plan.question, highlight=False, soft_wrap=True)
        return
    render_parts(plan)
    table = Table("hard constraint (SQL filter)", "from the words", title="answer")
    for c in plan.constraints:
        value = "" if c.op in ("is_null", "is_not_null") else f" {c.value!r}"
        table.add_row(f"{'NOT ' if c.negate else ''}{c.field} {c.op}{value}", repr(c.phrase))
    if plan.constraints:
        console.print(table)
    else:
        console.print("no hard constraints: every candidate is eligible")
    console.print(
        f"ranking text: {plan.ranking_text!r}" if plan.ranking_text else "ranking text: (none)", highlight=False
    )
    for p in plan.preferences:
        console.print(f"soft preference ({p.kind}): {p.value!r}{' on ' + p.field if p.field else ''}", highlight=False)
    console.print(f"query the ranker sees: {plan.query_text()!r}", highlight=False)


@app.command("plan")
def plan_command(
    collection: Annotated[str, typer.Argument(help="Collection name.")],
    request: Annotated[str, typer.Argument(help="The request, e.g. 'python, 3+ years, no agency recruiters'.")],
    llm: LlmOpt = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Turn REQUEST into a plan: an answer (filters + ranking), a clarifying question, or a refusal."""
    with engine(dsn, home) as eng:
        plan = eng.plan(collection, request, extractor=_extractor(llm))
    if as_json:
        print_json({**plan.model_dump(mode="json"), "filter": plan.filter, "query_text": plan.query_text()})
        return
    render_plan(plan)


def search_request_command(
    eng: Any, collection: str, request: str, *, k: int, explain: bool, as_json: bool, llm: bool, **params: Any
) -> None:
    """``ranklock search COLLECTION --request ...``: run an answer plan, or print its question or refusal."""
    out = eng.search_request(collection, request, k=k, explain=explain, extractor=_extractor(llm), **params)
    if as_json:
        sys.stdout.write(out.to_json() + "\n")
        return
    render_plan(out.plan)
    if out.result is None:
        return
    res = out.result
    expl = {e.doc_id: e for e in out.explanations or []}
    from ..search.branches import short_names

    cols = ["#", "doc", "name (display only)", "score", *short_names()]
    if explain:
        cols += ["constraints met", "preferences", "moved"]
    else:
        cols += ["text"]
    table = Table(*cols)
    for h in res.hits:
        rank = f"={h.tie_group}" if h.tie_group is not None else str(h.rank)
        e = expl.get(h.doc_id)
        name = str((e.display.get("name") if e else "") or "")
        row = [
            rank,
            shown(h.doc_id),
            shown(name, backslash=False),
            f"{h.score:.5f}",
            *branch_ranks(h),
        ]
        if explain and e is not None:
            ok = sum(c.satisfied for c in e.constraints)
            row += [
                f"{ok}/{len(e.constraints)}",
                ", ".join(e.preferences_matched) or "-",
                "-" if e.moved_by_preferences is None else f"{e.moved_by_preferences:+d}",
            ]
        if not explain:
            row.append(clip(h.text, 60))
        table.add_row(*row)
    console.print(table)
    console.print(
        f"{len(res.hits)} of k={k}; {res.matching_count} candidates satisfy every hard constraint; "
        f"complete={res.complete}" + (f" (truncated: {res.truncation})" if res.truncation else ""),
        highlight=False,
    )
    if any(h.tie_group is not None for h in res.hits):
        console.print(
            "'=N': tied with the hit ranked N (identical ranking signals); order within a tie group carries no meaning."
        )
    for w in res.warnings:
        err_console.print(f"[yellow]note:[/] {w}", highlight=False)


@resumes_app.command("ingest")
def resumes_ingest(
    collection: Annotated[str, typer.Argument(help="Collection name (created with the resume schema if missing).")],
    path: Annotated[
        Path, typer.Argument(help="A folder of .md/.txt/.json/.pdf/.docx resumes, a .jsonl, or the Kaggle .csv.")
    ],
    replace: Annotated[bool, typer.Option("--replace", help="The new snapshot holds exactly these resumes.")] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Parse resumes into typed fields, scrubbed free text and display-only identity, then ingest them."""
    from ..domains.resumes.load import load_resumes, resume_fields_for

    with engine(dsn, home, creates=True) as eng:
        docs = load_resumes(path)  # inside the engine block: an IngestError becomes a clear message
        with progress_bar(not as_json) as prog:
            report = eng.ingest(
                collection, docs, replace=replace, progress=prog, create={"fields": list(resume_fields_for(path))}
            )
    if as_json:
        print_json(report.as_dict())
        return
    console.print(
        f"[bold]{collection}[/]: {report.documents} resumes in snapshot {report.snapshot_id}; "
        f"embedded {report.embedded}, reused {report.reused}"
    )


@resumes_app.command("generate")
def resumes_generate(
    out: Annotated[Path, typer.Argument(help="Folder to write the raw resumes to (.md, .txt, .json files).")],
    count: Annotated[int, typer.Option(help="How many resumes.")] = 400,
    seed: Annotated[int, typer.Option(help="Random seed: the same seed writes the same files.")] = 7,
) -> None:
    """Write COUNT synthetic resumes (names, contacts, skills, years, summaries) to OUT."""
    from ..domains.resumes.generate import generate_resumes

    out.mkdir(parents=True, exist_ok=True)
    for r in generate_resumes(count, seed):
        (out / f"{r.doc_id}{r.suffix}").write_text(r.content, encoding="utf-8")
    console.print(f"wrote {count} resumes to {out} (seed {seed}); ingest with `ranklock resumes ingest NAME {out}`")


DEMO_REQUESTS = (
    "backend engineer with python and kubernetes, 3+ years of experience, no agency recruiters",
    "data scientist in berlin or london with a master's degree or higher, pytorch a plus",
    "frontend developer, good culture fit, near the office",
    "young python developers, native English speakers",
)


def run_resume_demo(eng: Any, count: int, seed: int = 7) -> None:
    """``ranklock demo resumes``: generate, parse and ingest resumes into ``resumes``, then plan a few requests."""
    from ..domains.resumes.generate import generate_resumes
    from ..domains.resumes.parse import parse_resume
    from ..domains.resumes.schema import RESUME_FIELDS

    docs = [parse_resume(r.doc_id, r.content, r.format) for r in generate_resumes(count, seed)]
    console.print(f"[bold]ranklock demo resumes[/]: {count} synthetic resumes (seed {seed}) into collection 'resumes'")
    with progress_bar(True) as prog:
        report = eng.ingest("resumes", docs, replace=True, progress=prog, create={"fields": list(RESUME_FIELDS)})
    console.print(f"snapshot {report.snapshot_id}: {report.documents} resumes, {report.chunks} chunks")
    for request in DEMO_REQUESTS:
        console.rule(request)
        search_request_command(eng, "resumes", request, k=5, explain=True, as_json=False, llm=False)
    console.print('Try: ranklock plan resumes "go developers in amsterdam, 5+ years" --json')


def search_request_cli(
    collection: str,
    query: str | None,
    request: str | None,
    *,
    k: int,
    explain: bool,
    as_json: bool,
    dsn: str | None,
    home: Path | None,
) -> None:
    """The ``--request`` path of ``ranklock search``."""
    if request is None:
        raise typer.BadParameter("give a QUERY, or a structured request with --request.")
    if query is not None:
        raise typer.BadParameter("give either a QUERY or --request, not both: the plan makes the query.")
    with engine(dsn, home) as eng:
        search_request_command(eng, collection, request, k=k, explain=explain, as_json=as_json, llm=False)
