"""``ranklock demo``: ingest the bundled corpus and search it."""

from __future__ import annotations

from importlib import resources
from typing import Annotated, Any

import typer
import typer.core
from rich.console import Console
from rich.table import Table

# typer vendors its own click; its parser raises these.
from ._common import DsnOpt, HomeOpt, console, engine, progress_bar
from .render import branch_ranks, clip

__all__ = ["DEMO_QUERIES", "JOURNAL_QUERIES", "demo_corpus_path", "run_demo", "run_journal_demo"]

DEMO_QUERIES = [
    "how does the immune system remember a pathogen",
    "approximate nearest neighbour index",
    "v2.14.1",
    "combine rankings from two retrievers",
]

JOURNAL_QUERIES = ["XJ-900", "Which instrument is Zebulon Okonkwo learning?", "Where was my two-wheeler pinched?"]


def demo_corpus_path() -> str:
    return str(resources.files("ranklock") / "data" / "demo.jsonl")


def run_journal_demo(eng: Any, console: Console, progress_bar: Any) -> None:
    """``ranklock demo journal``: generate the journal (ranklock.domains.journal), ingest it, search it."""
    from ..domains.journal import JOURNAL_COLLECTION, JOURNAL_CREATE, generate_journal
    from ..domains.journal.questions import shipped_questions_path

    journal = generate_journal()
    console.print(
        f"[bold]ranklock demo journal[/]: {len(journal.notes)} generated notes (seed {journal.seed}) "
        f"into collection {JOURNAL_COLLECTION!r}"
    )
    with progress_bar(True) as prog:
        report = eng.ingest(
            JOURNAL_COLLECTION, journal.documents(), replace=True, progress=prog, create=dict(JOURNAL_CREATE)
        )
    _print_report(console, report)
    _print_searches(eng, console, JOURNAL_COLLECTION, JOURNAL_QUERIES)
    console.print(
        f'Try: ranklock search journal "who heads project Halyard" --json\n'
        f"     ranklock eval journal --golden {shipped_questions_path()} --answers"
    )


def _print_report(console: Console, report: Any) -> None:
    console.print(
        f"snapshot {report.snapshot_id}: {report.documents} documents, {report.chunks} chunks, "
        f"embedded {report.embedded}, reused {report.reused}; manifest {report.manifest_hash[:16]}…"
    )


def run_demo(eng: Any, console: Console, progress_bar: Any) -> None:
    console.print(f"[bold]ranklock demo[/]: ingesting {demo_corpus_path()} into collection 'demo'")
    with progress_bar(True) as prog:
        report = eng.ingest(
            "demo",
            demo_corpus_path(),
            replace=True,
            progress=prog,
            create={"fields": ["year:int", "tags:keyword[]"]},
        )
    _print_report(console, report)
    _print_searches(eng, console, "demo", DEMO_QUERIES)
    console.print('Try: ranklock search demo "your question" --json')


def _print_searches(eng: Any, console: Console, collection: str, queries: list[str]) -> None:
    from ..search.branches import short_names as branch_short_names

    for q in queries:
        res = eng.search(collection, q, k=3)
        ranks = [f"{name} rank" for name in branch_short_names()]
        table = Table("#", "doc", "fused", *ranks, "text", title=f"hybrid: {q!r}")
        for h in res.hits:
            table.add_row(str(h.rank), h.doc_id, f"{h.score:.5f}", *branch_ranks(h), clip(h.text, 70))
        console.print(table)


#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()


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

    if which not in ("docs", "resumes", "journal"):
        raise typer.BadParameter(f"unknown demo {which!r}; use docs, resumes or journal.")
    with engine(dsn, home, creates=True) as eng:
        if which == "journal":
            run_journal_demo(eng, console, progress_bar)
            return
        if which == "resumes":
            from .plan import run_resume_demo

            run_resume_demo(eng, count)
            return
        run_demo(eng, console, progress_bar)
