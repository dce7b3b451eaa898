"""``ranklock ask`` and ``ranklock replay --answer``: thin shells over Engine.ask / Engine.replay_answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..phrasing import shown, shown_lines
from ..settings import REQUEST
from ._common import DsnOpt, HomeOpt, JsonOpt, ReadDsnOpt, RerankerOpt, RerankOpt, console, engine, print_json

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["ask", "replay_answer_cli"]


@app.command()
def ask(
    collection: Annotated[str, typer.Argument(help="Collection name.")],
    question: Annotated[str, typer.Argument(help="The question to answer from the collection.")],
    filter: Annotated[str | None, typer.Option("--filter", help="Hard constraints, e.g. 'lang = \"pt\"'.")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help="ISO timestamp: documents in force then.")] = None,
    snapshot: Annotated[int | None, typer.Option(help="Snapshot id (default: the active one).")] = None,
    chunks: Annotated[
        int, typer.Option(help="Chunks handed to the generator, numbered [1]..[N] (1-40).")
    ] = REQUEST.chunks,
    generator: Annotated[
        str,
        typer.Option(
            help="extractive (default: a span of the answer's type inside one list item, cell or paragraph, by "
            "meaning and words, no model of its own; gathers a list question's answers; abstains saying what it "
            "looked for and which passages came closest), extractive-v5, extractive-v4, extractive-v3 or "
            "extractive-v2 (the older rules), openai (RANKLOCK_LLM_URL) or local (small model)."
        ),
    ] = "extractive",
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    read_dsn: ReadDsnOpt = None,
    rerank: RerankOpt = None,
    reranker: RerankerOpt = None,
) -> None:
    """Answer QUESTION from COLLECTION with numbered citations (search, then a generator); logged for replay."""
    with engine(dsn, home, read_dsn, reranker=reranker) as eng:
        ans = eng.ask(
            collection,
            question,
            filter=filter,
            as_of=as_of,
            snapshot=snapshot,
            chunks=chunks,
            generator=generator,
            rerank=rerank,
        )
    if as_json:
        sys.stdout.write(ans.to_json() + "\n")
        return
    # The answer and its quotes are document text, and the ids file names: shown, so none acts on the terminal.
    console.print(shown_lines(ans.answer), highlight=False, markup=False)
    for c in ans.citations:
        quote = shown(c.quote, backslash=False)
        console.print(f"  [{c.n}] {shown(c.doc_id)} (chunk {c.chunk}): {quote}", highlight=False, markup=False)
    if ans.closest:
        console.print("Closest passages:", highlight=False, markup=False)
    for c in ans.closest:  # an abstention cites nothing: these say where it looked, never "[n]"
        quote = shown(" ".join(c.quote.split()), backslash=False)
        console.print(f"  passage {c.n}, {shown(c.doc_id)} (chunk {c.chunk}): {quote}", highlight=False, markup=False)
    g = ans.generator
    console.print(
        f"{len(ans.chunks)} chunks from snapshot {ans.snapshot_id}; generator {g.name} ({g.model}); "
        f"answer {ans.answer_id}: `ranklock replay --answer {ans.answer_id}` re-runs it",
        highlight=False,
        markup=False,
    )


def replay_answer_cli(
    answer_id: str,
    *,
    dsn: str | None,
    home: Path | None,
    as_json: bool,
    reranker: str | None = None,
    question: str | None = None,
) -> None:
    """``ranklock replay --answer ID``: per-layer report, exit 1 unless every layer is identical."""
    with engine(dsn, home, reranker=reranker) as eng:
        report = eng.replay_answer(answer_id, question=question)
    if as_json:
        print_json(report.to_dict())
    else:
        table = Table("layer", "identical", "logged", "replayed")
        for name, layer in report.layers.items():
            table.add_row(
                name,
                "yes" if layer["identical"] else "[bold red]NO[/]",
                "" if layer["identical"] else json.dumps(layer["logged"], default=str, ensure_ascii=False)[:120],
                "" if layer["identical"] else json.dumps(layer["replayed"], default=str, ensure_ascii=False)[:120],
            )
        verdict = "identical" if report.identical else "[bold red]NOT identical[/]"
        console.print(f"answer {answer_id}: {verdict} (snapshot {report.snapshot_id})")
        console.print(table)
    if not report.identical:
        raise typer.Exit(1)
