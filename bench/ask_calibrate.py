"""Choose the extractive generator's abstention threshold on the tuning half of the journal questions.

For every question of the tuning half (ranklock.eval.split, seed 26) it asks Ask once with the
threshold off, and records the best span's evidence (extractive-v3 rule 7) and whether the answer
given would be correct (answerable questions) or should have been an abstention (unanswerable
ones).  The threshold chosen is the one that maximises

    answerable questions answered correctly at or above it + unanswerable questions below it

(ties: the lowest such threshold, so as few right answers as possible are thrown away), placed
halfway between the two evidence values it separates.  The held-out half is never read.

    python bench/ask_calibrate.py --home /tmp/askbench-home     # ingests the journal if missing

Prints the table of evidence values and writes bench/out/ask_calibrate.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ask import ensure_journal
from ranklock import Engine
from ranklock.ask.generators.extractive import THRESHOLD, ExtractiveGenerator
from ranklock.domains.journal.questions import load_questions, shipped_questions_path
from ranklock.errors import QueryError
from ranklock.eval.answer_correctness import answer_correct
from ranklock.eval.split import select_split

OUT = Path(__file__).resolve().parent / "out"


def choose(rows: list[dict[str, Any]]) -> tuple[float, int]:
    """The threshold (midpoint) that maximises right answers kept plus unanswerables abstained; its count."""
    values = sorted({r["evidence"] for r in rows if r["evidence"] is not None})
    best: tuple[int, float] = (-1, float("-inf"))
    for i, t in enumerate(values):
        kept = sum(1 for r in rows if r["evidence"] is not None and r["evidence"] >= t and r["correct"])
        abstained = sum(1 for r in rows if not r["answerable"] and (r["evidence"] is None or r["evidence"] < t))
        if kept + abstained > best[0]:
            below = values[i - 1] if i else t
            best = (kept + abstained, (below + t) / 2)
    return best[1], best[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=os.environ.get("RANKLOCK_HOME"))
    ap.add_argument("--dsn", default=os.environ.get("RANKLOCK_DSN"))
    ap.add_argument("--collection", default="journal")
    ap.add_argument("--out", type=Path, default=OUT / "ask_calibrate.json")
    args = ap.parse_args()
    questions = select_split(load_questions(shipped_questions_path()), "tune")
    gen = ExtractiveGenerator(threshold=-2.0)  # below any evidence (a cosine difference is >= -1.5): off
    rows: list[dict[str, Any]] = []
    with Engine(dsn=args.dsn, home=args.home) as eng:
        ensure_journal(eng, args.collection, False)
        for q in questions:
            try:
                ans = eng.ask(args.collection, q.question, filter=q.filter, generator=gen)
                text, evidence = ans.answer, gen.last_evidence
            except QueryError:
                text, evidence = "", None
            rows.append(
                {
                    "id": q.id,
                    "class": q.cls,
                    "answerable": bool(q.gold),
                    "evidence": evidence,
                    "correct": bool(q.gold) and evidence is not None and answer_correct(text, q.answer),
                }
            )
    threshold, score = choose(rows)
    print(f"# extractive-v3 abstention threshold on the tuning half ({len(rows)} questions)\n")
    print("| kind | evidence values (sorted) |")
    print("|---|---|")
    for label, keep in (
        ("answerable, correct", lambda r: r["answerable"] and r["correct"]),
        ("answerable, wrong", lambda r: r["answerable"] and not r["correct"]),
        ("unanswerable", lambda r: not r["answerable"]),
    ):
        vals = sorted(r["evidence"] for r in rows if keep(r) and r["evidence"] is not None)
        none = sum(1 for r in rows if keep(r) and r["evidence"] is None)
        print(
            f"| {label} | {' '.join(f'{v:.3f}' for v in vals[:40])}{' …' if len(vals) > 40 else ''}"
            f" ({none} abstained before scoring) |"
        )
    print(f"\nchosen threshold {threshold:.4f} ({score} of {len(rows)} right); the rule pins THRESHOLD = {THRESHOLD}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"threshold": threshold, "right": score, "pinned": THRESHOLD, "rows": rows}, indent=2) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
