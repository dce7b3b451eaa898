"""Check the extractive reader's answer-check constants on the tuning half of the journal questions.

Rule 7 of extractive-v5 (src/ranklock/ask/generators/extractive_v5.py, as in extractive-v4; the
default reader extractive-v6 keeps it and adds a predicate check, whose bar bench/ask_predicate.py
measures), has three constants: THRESHOLD (the evidence a span needs, v3's value), KAPPA
(how much more a span needs per share of the question's topic it leaves uncovered, now asked
of every span) and NEAR (the word-vector cosine at which a question word counts as said in
other words); v5's FLOOR (0, for a span whose own words say the whole topic) is not fitted and
not searched.  For every question of the tuning half (ranklock.eval.split, seed 26) this
script retrieves once, exactly as Ask does, and then runs the generator over those passages
for every point of a small grid, counting

    answerable questions answered correctly (gold answer given, a gold note cited)
    + unanswerable questions abstained on

and prints the grid, the best points, and where the pinned constants stand.  The held-out half
is never read.  Vectors are read through the embedding cache once and kept in memory, so the
grid costs no model call after the first pass.  ``--generator extractive-v4`` runs the grid
over v4's rule 7 instead (issue 40's first round chose its constants with it).

    python bench/ask_calibrate.py --home /tmp/askbench-home     # ingests the journal if missing

Writes bench/out/ask_calibrate.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ask import journal_collection
from ranklock import Engine
from ranklock.ask.generators.extractive_v4 import ExtractiveV4Generator
from ranklock.ask.generators.extractive_v5 import KAPPA, NEAR, THRESHOLD, ExtractiveV5Generator
from ranklock.ask.model import ABSTAIN, Draft, GenerationRequest, GeneratorInfo
from ranklock.ask.retrieve import embed_fn
from ranklock.domains.journal.questions import load_questions, shipped_questions_path
from ranklock.eval.answer_correctness import answer_correct
from ranklock.eval.split import select_split

OUT = Path(__file__).resolve().parent / "out"
GRID = {
    "threshold": (0.05, 0.07, 0.093, 0.12, 0.15),
    "kappa": (0.1, 0.2, 0.3, 0.4, 0.5),
    "near": (0.35, 0.4, 0.45, 0.5),
}


class Recorder:
    """A generator that keeps the request it is handed and abstains: retrieval exactly as Ask runs it."""

    name = "recorder"

    def __init__(self) -> None:
        self.request: GenerationRequest | None = None

    def info(self) -> GeneratorInfo:
        return GeneratorInfo(self.name, None, None, {})

    def generate(self, request: GenerationRequest) -> Draft:
        self.request = request
        return Draft(ABSTAIN, (), True)


def memo(embed: Any) -> Any:
    """``embed`` with every text's vector kept in memory after its first read."""
    seen: dict[str, np.ndarray] = {}

    def cached(texts: Any) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in seen]
        if missing:
            seen.update(zip(missing, np.asarray(embed(missing)), strict=True))
        return np.stack([seen[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    return cached


def right(q: Any, request: GenerationRequest, draft: Draft) -> bool:
    """The objective's unit: a correct, cited answer to an answerable question, an abstention to an unanswerable one."""
    if not q.gold:
        return draft.abstained
    cited = {request.chunks[c.n - 1].doc_id for c in draft.citations}
    return not draft.abstained and answer_correct(draft.answer, q.answer) and bool(cited & set(q.gold))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=os.environ.get("RANKLOCK_HOME"))
    ap.add_argument("--dsn", default=os.environ.get("RANKLOCK_DSN"))
    ap.add_argument("--collection", default="journal")
    ap.add_argument("--out", type=Path, default=OUT / "ask_calibrate.json")
    ap.add_argument("--generator", choices=("extractive-v5", "extractive-v4"), default="extractive-v5")
    args = ap.parse_args()
    rule = ExtractiveV5Generator if args.generator == "extractive-v5" else ExtractiveV4Generator
    questions = select_split(load_questions(shipped_questions_path()), "tune")
    with Engine(dsn=args.dsn, home=args.home) as eng:
        journal_collection(eng, args.collection, False)
        coll = eng.collection(args.collection)
        embed = memo(embed_fn(eng.db, coll, lambda: eng._collection_embedder(coll)))
        requests = []
        for q in questions:
            rec = Recorder()
            eng.ask(args.collection, q.question, filter=q.filter, generator=rec)
            assert rec.request is not None
            requests.append((q, replace(rec.request, embed=embed)))
        points: list[dict[str, Any]] = []
        for threshold, kappa, near in itertools.product(*GRID.values()):
            gen = rule(threshold=threshold, kappa=kappa, near=near)
            rows = [(q, r, gen.generate(r)) for q, r in requests]
            points.append(
                {
                    "threshold": threshold,
                    "kappa": kappa,
                    "near": near,
                    "right": sum(right(q, r, d) for q, r, d in rows),
                    "answered_right": sum(right(q, r, d) for q, r, d in rows if q.gold),
                    "abstained_right": sum(right(q, r, d) for q, r, d in rows if not q.gold),
                }
            )
    answerable = sum(1 for q in questions if q.gold)
    print(f"# {rule().info().model} rule 7 on the tuning half: {len(questions)} questions ({answerable} answerable)\n")
    print("| threshold | kappa | near | right | answerable right | unanswerable abstained |")
    print("|---:|---:|---:|---:|---:|---:|")
    best = max(p["right"] for p in points)
    for p in points:
        mark = " **best**" if p["right"] == best else ""
        pinned = " (pinned)" if (p["threshold"], p["kappa"], p["near"]) == (THRESHOLD, KAPPA, NEAR) else ""
        print(
            f"| {p['threshold']} | {p['kappa']} | {p['near']} | {p['right']}{mark}{pinned} | "
            f"{p['answered_right']} | {p['abstained_right']} |"
        )
    pinned_p = next(p for p in points if (p["threshold"], p["kappa"], p["near"]) == (THRESHOLD, KAPPA, NEAR))
    n_best = sum(p["right"] == best for p in points)
    print(f"\nbest {best} of {len(questions)} at {n_best} grid points; the pinned constants give {pinned_p['right']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"generator": rule().info().model, "grid": GRID, "points": points, "pinned": pinned_p, "best": best},
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
