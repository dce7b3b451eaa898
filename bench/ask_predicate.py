"""Measure extractive-v6's predicate bar (PRED_NEAR) on the tuning halves, as issue 47 asks.

Rule 7 of extractive-v6 (src/ranklock/ask/generators/extractive.py) refuses a span that says none
of the question's predicate words (its topic words less the names it gives and what the span's
headings, title or label say) unless one of them is said in other words: a word of the span whose
vector has cosine at least PRED_NEAR with it.  This script retrieves once, exactly as Ask does, for
every question of the tuning half (ranklock.eval.split, seed 26) of the journal and of the three
hand-written sets of issue 40 (each collection ingested as bench/ask.py does when missing), then
runs v6 over those passages for every bar of the grid and counts

    answerable questions answered correctly (gold answer given, a gold note cited)
    + unanswerable questions abstained on

and prints the grid with extractive-v5 beside it.  ``--half held-out`` runs the same over the other
halves (to report the pinned bar once, after it froze).  Vectors are read through the embedding
cache once and kept in memory.

    python bench/ask_predicate.py --home /tmp/askbench-home

Writes bench/out/ask_predicate.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ask import ensure_notes, journal_collection, read_questions
from ask_calibrate import Recorder, memo
from ranklock import Engine
from ranklock.ask.generators import resolve_generator
from ranklock.ask.generators.extractive import PRED_NEAR, ExtractiveGenerator
from ranklock.ask.model import Generator
from ranklock.ask.retrieve import embed_fn
from ranklock.domains.journal.questions import load_questions, shipped_questions_path
from ranklock.eval.answer_correctness import answer_correct
from ranklock.eval.split import select_split

OUT = Path(__file__).resolve().parent / "out"
DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
GRID = (0.35, 0.4, 0.45, 0.5, 0.55, 0.6)
#: Collection -> its notes and questions (None: the journal).
SETS: dict[str, tuple[Path, Path] | None] = {
    "journal": None,
    "handset": (DATA / "ask_handset" / "notes", DATA / "ask_handset" / "questions.jsonl"),
    "handset2": (DATA / "ask_handset2" / "notes", DATA / "ask_handset2" / "questions.jsonl"),
    "handset3": (DATA / "ask_handset3" / "notes", DATA / "ask_handset3" / "questions.jsonl"),
}


def count(gen: Generator, asked: list[tuple[Any, Any]]) -> dict[str, int]:
    """Correct answers, false abstentions and right abstentions of ``gen`` over the recorded requests."""
    out = {"answerable": 0, "correct": 0, "false_abstentions": 0, "unanswerable": 0, "abstained": 0}
    for q, req in asked:
        d = gen.generate(req)
        if q.gold:
            cited = {req.chunks[c.n - 1].doc_id for c in d.citations}
            out["answerable"] += 1
            out["correct"] += (not d.abstained) and answer_correct(d.answer, q.answer) and bool(cited & set(q.gold))
            out["false_abstentions"] += d.abstained
        else:
            out["unanswerable"] += 1
            out["abstained"] += d.abstained
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=os.environ.get("RANKLOCK_HOME"))
    ap.add_argument("--dsn", default=os.environ.get("RANKLOCK_DSN"))
    ap.add_argument("--half", default="tune", choices=("tune", "held-out"))
    args = ap.parse_args()
    asked: list[tuple[Any, Any]] = []
    with Engine(dsn=args.dsn, home=args.home) as eng:
        for name, files in SETS.items():
            if files is None:
                journal_collection(eng, name, False)
                questions = load_questions(shipped_questions_path())
            else:
                ensure_notes(eng, name, files[0], False)
                questions = read_questions(files[1])
            coll = eng.collection(name)
            embed = memo(embed_fn(eng.db, coll, lambda c=coll: eng._collection_embedder(c)))
            rec = Recorder()
            for q in select_split(questions, args.half):
                eng.ask(name, q.question, filter=q.filter, generator=rec)
                assert rec.request is not None
                asked.append((q, replace(rec.request, embed=embed)))
        rows = [("extractive-v5", count(resolve_generator("extractive-v5"), asked))]
        rows += [(f"v6 PRED_NEAR {bar}", count(ExtractiveGenerator(pred_near=bar), asked)) for bar in GRID]
    print(f"# extractive-v6's predicate bar, {args.half} halves ({len(asked)} questions); pinned {PRED_NEAR}\n")
    print("| reader | correct | false abst. | abstained | right |\n|---|---:|---:|---:|---:|")
    for name, c in rows:
        right = c["correct"] + c["abstained"]
        print(
            f"| {name} | {c['correct']}/{c['answerable']} | {c['false_abstentions']}/{c['answerable']} | "
            f"{c['abstained']}/{c['unanswerable']} | {right} |"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "ask_predicate.json"
    path.write_text(
        json.dumps({"half": args.half, "pinned": PRED_NEAR, "rows": rows}, indent=2) + "\n", encoding="utf-8"
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
