"""``ranklock demo``: ingest the bundled corpus and search it."""

from __future__ import annotations

from importlib import resources
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["DEMO_QUERIES", "demo_corpus_path", "run_demo"]

DEMO_QUERIES = [
    "how does the immune system remember a pathogen",
    "approximate nearest neighbour index",
    "v2.14.1",
    "combine rankings from two retrievers",
]


def demo_corpus_path() -> str:
    return str(resources.files("ranklock") / "data" / "demo.jsonl")


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
    console.print(
        f"snapshot {report.snapshot_id}: {report.documents} documents, {report.chunks} chunks, "
        f"embedded {report.embedded}, reused {report.reused}; manifest {report.manifest_hash[:16]}…"
    )
    for q in DEMO_QUERIES:
        res = eng.search("demo", q, k=3)
        table = Table("#", "doc", "fused", "lex rank", "sem rank", "text", title=f"hybrid: {q!r}")
        for h in res.hits:
            table.add_row(
                str(h.rank),
                h.doc_id,
                f"{h.score:.5f}",
                "-" if h.lexical_rank is None else str(h.lexical_rank),
                "-" if h.semantic_rank is None else str(h.semantic_rank),
                h.text.replace("\n", " ")[:70],
            )
        console.print(table)
    console.print('Try: ranklock search demo "your question" --json')
