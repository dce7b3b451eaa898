"""``ranklock eval COLLECTION --golden QUESTIONS --answers``: the answer evaluation's CLI shell.

It loads the question set, runs :func:`ranklock.eval.answers.evaluate_answers`
and prints one table per (mode, generator) with a row per question class,
then the reranker trigger per class.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from ..errors import RanklockError
from ._common import console, engine, fail, print_json, progress_bar

__all__ = ["eval_answers_command"]

_COLS = ("recall@8", "recall@10", "correctness", "citation_precision", "citation_recall", "abstention_accuracy")


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.3f}"


def eval_answers_command(
    collection: str,
    golden: Path,
    modes: str,
    snapshot: int | None,
    generators: list[str],
    out: Path | None,
    dsn: str | None,
    home: Path | None,
    as_json: bool,
    *,
    half: str = "all",
    rerank: int | None = None,
) -> None:
    """Run the answer evaluation and print (or write) its report."""
    from ..domains.journal.questions import load_questions
    from ..eval.answers import evaluate_answers, markdown_answers
    from ..eval.run import parse_modes
    from ..eval.split import select_split

    try:
        questions = select_split(load_questions(golden), half)
        mode_list = parse_modes(modes)
    except RanklockError as exc:
        raise fail(exc) from None
    with engine(dsn, home) as eng, progress_bar(not as_json) as prog:
        try:
            rep = evaluate_answers(
                eng,
                collection,
                questions,
                generators=generators,
                modes=mode_list,
                snapshot=snapshot,
                source=str(golden),
                progress=prog,
                half=half,
                rerank=rerank,
            )
        except RanklockError as exc:
            raise fail(exc) from None
    written: list[str] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "answers.json").write_text(json.dumps(rep, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (out / "answers.md").write_text(markdown_answers(rep), encoding="utf-8")
        written = [str(out / "answers.json"), str(out / "answers.md")]
    if as_json:
        summary = {k: v for k, v in rep.items() if k not in ("runs", "retrieval")}
        summary["runs"] = [{k: v for k, v in r.items() if k != "per_question"} for r in rep["runs"]]
        summary["retrieval"] = {
            m: {k: v for k, v in r.items() if k != "per_question"} for m, r in rep["retrieval"].items()
        }
        summary["files"] = written
        print_json(summary)
        return
    for run in rep["runs"]:
        table = Table("class", "n", *_COLS, title=f"{run['generator']} over {run['mode']} retrieval")
        for cls, m in [*run["by_class"].items(), ("all", run["overall"])]:
            table.add_row(cls, str(m["questions"]), *(_fmt(m[c]) for c in _COLS))
        console.print(table)
        for cls, t in run["trigger"].items():
            console.print(f"  {cls}: [bold]{t['verdict']}[/]: {t['message']}", highlight=False, soft_wrap=True)
    if not rep["runs"]:
        for mode, r in rep["retrieval"].items():
            table = Table("class", "recall@8", "recall@10", title=f"{mode} retrieval")
            for cls, m in [*r["by_class"].items(), ("all", r["overall"])]:
                table.add_row(cls, _fmt(m["recall@8"]), _fmt(m["recall@10"]))
            console.print(table)
    console.print(
        f"{rep['questions']['count']} questions from {golden} on snapshot {rep['snapshot']['id']}", highlight=False
    )
    if written:
        console.print(f"wrote {', '.join(written)}", highlight=False)
