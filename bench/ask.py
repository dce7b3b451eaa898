"""Ask benchmark (issue 12 items 5 and 6): answer quality on the generated journal, per class and mode.

On the journal of ``ranklock demo journal`` (2,000 notes, all-MiniLM-L6-v2,
collection language english, accents folded) and its 255 labelled questions
(src/ranklock/domains/journal/questions.jsonl), in one run:

* item 5, per generator over hybrid retrieval: recall@8 and recall@10 of the
  gold notes, citation precision and recall, answer correctness, abstention
  accuracy, per question class, and the reranker trigger per class;
* item 6, the design's claim: recall@10 and answer correctness of the
  extractive generator over semantic-only, lexical-only and hybrid retrieval,
  per class, and whether "hybrid wins on names and codenames, keyword search
  fails on paraphrases" holds (computed from the table, not written in).

* with ``--half`` (default ``all``), only that half of the question set (ranklock.eval.split):
  ``held-out`` for the figures issues 26 and 40 report, ``tune`` for the half constants were chosen on;
* with ``--notes DIR --questions FILE``, another question set (the journal's format, any classes) over
  a folder of notes, ingested into ``--collection`` when missing: ``--notes tests/data/ask_handset/notes
  --questions tests/data/ask_handset/questions.jsonl --collection handset`` is issue 40's hand-written set;
* ``--modes``: the retrieval modes of item 6 (default all three; ``hybrid`` alone for item 5 only);
* ``--determinism-only``: every question of the half asked twice and its answer replayed: how many
  answers are byte-identical across the two runs and across the replay (every layer);
* every answer of item 5 is checked for quotes that **cross a unit** of the note's Markdown, read by
  an independent CommonMark parser (markdown-it-py, not the reader's own rule): a quote holding lines
  of two list items, of a heading and what follows, of two paragraphs, or two cells of a table row;
  the count is printed per generator (issue 47's target is 0 for the default reader);
* ``--latency``: warm Ask latency of the generators given (default extractive-v3 and extractive),
  side by side: every question of the sample is asked with each generator in turn, the order
  alternating from round to round, after one warm-up round (model loaded, every vector cached),
  so both see the same load; p50 and p95 per generator and their ratio.

Prints the tables and writes bench/out/ask.json (the full report, per question).

    python bench/ask.py --home /work/bench-home            # ingests the journal if missing
    python bench/ask.py --home /work/bench-home --ingest   # rebuild it first
    python bench/ask.py --home /work/bench-home --latency-only --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from markdown_it import MarkdownIt

from ranklock import Engine
from ranklock.domains.journal import JOURNAL_CREATE, generate_journal
from ranklock.domains.journal.questions import Question, load_questions, shipped_questions_path
from ranklock.errors import NotFound
from ranklock.eval.answers import evaluate_answers
from ranklock.eval.split import select_split

OUT = Path(__file__).resolve().parent / "out"
MODES = ("semantic", "lexical", "hybrid")
NAME_CLASSES = ("person", "codename")


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def journal_collection(eng: Engine, name: str, rebuild: bool) -> dict[str, Any]:
    """Ingest the generated journal into ``name`` unless it is there already; report what was done."""
    if not rebuild:
        try:
            coll = eng.collection(name)
            if coll.active_snapshot_id is not None:
                return {"ingested": False, "snapshot": coll.active_snapshot_id}
        except NotFound:
            pass
    journal = generate_journal()
    t0 = time.perf_counter()
    rep = eng.ingest(name, journal.documents(), replace=True, create=dict(JOURNAL_CREATE))
    return {
        "ingested": True,
        "snapshot": rep.snapshot_id,
        "documents": rep.documents,
        "chunks": rep.chunks,
        "embedded": rep.embedded,
        "seconds": round(time.perf_counter() - t0, 1),
        "loadavg_after_ingest": Path("/proc/loadavg").read_text().split()[:3],
    }


def ensure_notes(eng: Engine, name: str, notes: Path, rebuild: bool) -> dict[str, Any]:
    """Ingest the folder ``notes`` into ``name`` (fields inferred from the notes) unless it is there already."""
    if not rebuild:
        try:
            if eng.collection(name).active_snapshot_id is not None:
                return {"ingested": False}
        except NotFound:
            pass
    rep = eng.ingest(name, notes, replace=True)
    return {"ingested": True, "snapshot": rep.snapshot_id, "documents": rep.documents}


def read_questions(path: Path) -> list[Question]:
    """A question set in the journal's format whose classes are its own (load_questions knows the journal's)."""
    return [Question.from_record(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]


def correct_and_cited(run: dict[str, Any], questions: list[Any], cls: str | None) -> float | None:
    """Share of answerable questions (of ``cls``) answered correctly *and* citing a gold note (issue 40's target)."""
    per_q = run["per_question"]
    qs = [q for q in questions if q.gold and (cls is None or q.cls == cls)]
    if not qs:
        return None
    return sum(1 for q in qs if per_q[q.id]["correct"] and set(per_q[q.id]["cited"]) & set(q.gold)) / len(qs)


#: The leaf blocks of CommonMark (and GFM tables' rows): the units a quote must stay inside.
_LEAVES = ("paragraph_open", "heading_open", "fence", "code_block", "tr_open", "hr", "html_block")
_MARKDOWN = MarkdownIt("commonmark").enable("table")


def crosses(text: str, quote: str) -> bool:
    """Whether ``quote`` (verbatim in ``text``) holds lines of two CommonMark leaf blocks or two table cells."""
    at = text.find(quote)
    if at < 0:
        return False
    first, last = text.count("\n", 0, at), text.count("\n", 0, at + len(quote.rstrip()))
    blocks = [tok.map for tok in _MARKDOWN.parse(text) if tok.type in _LEAVES and tok.map]
    inside = [b for b in blocks if b[0] <= first and last < b[1]]
    if not inside:
        return True  # no single block holds every line of the quote
    row = next((b for b in inside if text.split("\n")[b[0]].lstrip().startswith("|")), None)
    return row is not None and "|" in quote.strip().strip("|")


class Recording:
    """The engine, keeping every answer it gives (for :func:`crosses`); every other call goes to the engine."""

    def __init__(self, eng: Engine) -> None:
        self.eng = eng
        self.answers: dict[str, list[Any]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.eng, name)

    def ask(self, *args: Any, **kwargs: Any) -> Any:
        ans = self.eng.ask(*args, **kwargs)
        self.answers.setdefault(str(kwargs.get("generator", "extractive")), []).append(ans)
        return ans


def crossing_answers(answers: list[Any]) -> list[str]:
    """The questions of ``answers`` with a citation whose quote crosses a unit of its passage."""
    return [a.question for a in answers if any(crosses(a.chunks[c.n - 1].text, c.quote) for c in a.citations)]


def mrr_at_10(item6: dict[str, Any], questions: list[Any], mode: str, cls: str | None) -> float:
    """Mean over answerable questions (of ``cls``, or all) of 1 / rank of the first gold note in the top 10."""
    per_q = item6["retrieval"][mode]["per_question"]
    qs = [q for q in questions if q.gold and (cls is None or q.cls == cls)]
    return sum(1 / min(per_q[q.id]["ranks"].values()) if per_q[q.id]["ranks"] else 0.0 for q in qs) / len(qs)


def _who_wins(v: dict[str, float]) -> str:
    best_single = max(v["semantic"], v["lexical"])
    return "holds" if v["hybrid"] > best_single else ("ties" if v["hybrid"] == best_single else "does not hold")


def claim_check(item6: dict[str, Any], questions: list[Any]) -> list[str]:
    """Sentences on the design's claims, each computed from the per-class figures."""
    runs = {r["mode"]: r for r in item6["runs"]}
    out = []
    for cls in NAME_CLASSES:
        r = {m: runs[m]["by_class"][cls]["recall@10"] for m in MODES}
        mrr = {m: mrr_at_10(item6, questions, m, cls) for m in MODES}
        c = {m: runs[m]["by_class"][cls]["correctness"] for m in MODES}
        out.append(
            f"hybrid wins on {cls}: {_who_wins(r)} for recall@10 (hybrid {r['hybrid']:.3f}, semantic "
            f"{r['semantic']:.3f}, lexical {r['lexical']:.3f}); {_who_wins(mrr)} for MRR@10 (hybrid "
            f"{mrr['hybrid']:.3f}, semantic {mrr['semantic']:.3f}, lexical {mrr['lexical']:.3f}); correctness "
            f"hybrid {c['hybrid']:.3f}, semantic {c['semantic']:.3f}, lexical {c['lexical']:.3f}"
        )
    p = {m: runs[m]["by_class"]["paraphrase"]["recall@10"] for m in MODES}
    fails = p["lexical"] < min(p["semantic"], p["hybrid"])
    out.append(
        f"keyword search fails on paraphrases: {'holds' if fails else 'does not hold'} (recall@10 lexical "
        f"{p['lexical']:.3f}, semantic {p['semantic']:.3f}, hybrid {p['hybrid']:.3f})"
    )
    return out


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def latency(eng: Engine, collection: str, questions: list[Any], generators: list[str], rounds: int) -> dict[str, Any]:
    """Warm Ask latency per generator, side by side (see the module docstring), in milliseconds."""
    times: dict[str, list[float]] = {g: [] for g in generators}
    for r in range(rounds + 1):  # round 0 warms up: models loaded, query and span vectors cached
        for q in questions:
            order = generators if r % 2 == 0 else generators[::-1]
            for g in order:
                t = time.perf_counter()
                eng.ask(collection, q.question, filter=q.filter, generator=g)
                if r:
                    times[g].append((time.perf_counter() - t) * 1000)
    out: dict[str, Any] = {
        g: {"n": len(v), "p50_ms": _pct(v, 0.5), "p95_ms": _pct(v, 0.95), "mean_ms": sum(v) / len(v)}
        for g, v in times.items()
    }
    base, new = generators[0], generators[-1]
    out["ratio_p50"] = out[new]["p50_ms"] / out[base]["p50_ms"]
    out["ratio_p95"] = out[new]["p95_ms"] / out[base]["p95_ms"]
    return out


def determinism(eng: Engine, collection: str, questions: list[Any]) -> dict[str, Any]:
    """Ask each question twice and replay the answer: counts of byte-identical answers and identical replays."""
    same = replayed = 0
    differ: list[str] = []
    for q in questions:
        a = eng.ask(collection, q.question, filter=q.filter)
        b = eng.ask(collection, q.question, filter=q.filter)
        rep = eng.replay_answer(a.answer_id)
        same += a.to_json() == b.to_json()
        replayed += rep.identical
        if a.to_json() != b.to_json() or not rep.identical:
            differ.append(q.id)
    return {"questions": len(questions), "identical_runs": same, "identical_replays": replayed, "differ": differ}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=os.environ.get("RANKLOCK_HOME"), help="ranklock home (embedded Postgres).")
    ap.add_argument("--dsn", default=os.environ.get("RANKLOCK_DSN"))
    ap.add_argument("--collection", default="journal")
    ap.add_argument("--ingest", action="store_true", help="Rebuild the journal collection first.")
    ap.add_argument("--generator", action="append", help="Generator(s) for item 5 (default extractive).")
    ap.add_argument("--out", type=Path, default=OUT / "ask.json")
    ap.add_argument("--half", default="all", help="tune, held-out or all of the questions (ranklock.eval.split).")
    ap.add_argument("--latency", action="store_true", help="Also measure warm Ask latency side by side.")
    ap.add_argument("--latency-only", action="store_true", help="Only the latency comparison.")
    ap.add_argument(
        "--latency-generator", action="append", help="Generators to time (default extractive-v2, extractive)."
    )
    ap.add_argument("--latency-questions", type=int, default=40, help="Questions of the half timed (every k-th).")
    ap.add_argument("--rounds", type=int, default=3, help="Timed rounds after the warm-up round.")
    ap.add_argument("--determinism-only", action="store_true", help="Only the two-runs-and-replay check.")
    ap.add_argument("--notes", type=Path, help="A folder of notes to ask instead of the journal (with --questions).")
    ap.add_argument("--questions", type=Path, help="Their question set (the journal's JSONL format).")
    ap.add_argument("--modes", default=",".join(MODES), help="Retrieval modes of item 6 (comma-separated).")
    args = ap.parse_args()
    generators = args.generator or ["extractive"]
    modes = [m for m in args.modes.split(",") if m]
    if bool(args.notes) != bool(args.questions):
        ap.error("--notes and --questions go together")
    questions = select_split(
        read_questions(args.questions) if args.questions else load_questions(shipped_questions_path()), args.half
    )

    def ensure_journal(eng: Engine, name: str, rebuild: bool) -> dict[str, Any]:
        return ensure_notes(eng, name, args.notes, rebuild) if args.notes else journal_collection(eng, name, rebuild)

    if args.determinism_only:
        with Engine(dsn=args.dsn, home=args.home) as eng:
            ensure_journal(eng, args.collection, args.ingest)
            det = determinism(eng, args.collection, questions)
        print(f"# Determinism ({args.half} half): {det['questions']} questions asked twice and replayed")
        print(f"byte-identical across two runs: {det['identical_runs']}; replays identical: {det['identical_replays']}")
        print(f"differ: {det['differ'] or 'none'}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_name("ask_determinism.json").write_text(json.dumps(det, indent=2) + "\n", encoding="utf-8")
        return
    if args.latency or args.latency_only:
        step = max(1, len(questions) // args.latency_questions)
        sample = questions[::step][: args.latency_questions]
        timed = args.latency_generator or ["extractive-v3", "extractive"]
        load0 = Path("/proc/loadavg").read_text().split()[:3]
        with Engine(dsn=args.dsn, home=args.home) as eng:
            ensure_journal(eng, args.collection, args.ingest)
            lat = latency(eng, args.collection, sample, timed, args.rounds)
        load1 = Path("/proc/loadavg").read_text().split()[:3]
        print(f"# Warm Ask latency, side by side: {len(sample)} questions x {args.rounds} rounds ({args.half} half)")
        print(f"load average before {' '.join(load0)}, after {' '.join(load1)}\n")
        print(
            _table(
                ["generator", "n", "p50 ms", "p95 ms", "mean ms"],
                [
                    [
                        g,
                        str(lat[g]["n"]),
                        f"{lat[g]['p50_ms']:.1f}",
                        f"{lat[g]['p95_ms']:.1f}",
                        f"{lat[g]['mean_ms']:.1f}",
                    ]
                    for g in timed
                ],
            )
        )
        print(f"\n{timed[-1]} / {timed[0]}: p50 x{lat['ratio_p50']:.2f}, p95 x{lat['ratio_p95']:.2f}")
        if args.latency_only:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            path = args.out.with_name("ask_latency.json")
            path.write_text(
                json.dumps(
                    {
                        "bench": "ask-latency",
                        "command": "python " + " ".join(sys.argv),
                        "loadavg_before": load0,
                        "loadavg_after": load1,
                        "half": args.half,
                        "latency": lat,
                    },
                    indent=2,
                )
                + "\n",
                encoding="utf-8",
            )
            print(f"wrote {path}")
            return
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    with Engine(dsn=args.dsn, home=args.home) as eng:
        ingest = ensure_journal(eng, args.collection, args.ingest)
        t0 = time.perf_counter()
        item6 = evaluate_answers(eng, args.collection, questions, generators=["extractive"], modes=modes)
        others = [g for g in generators if g != "extractive"]
        recording = Recording(eng)
        item5_extra = (
            evaluate_answers(recording, args.collection, questions, generators=others, modes=["hybrid"])  # type: ignore[arg-type]
            if others
            else None
        )
        if "extractive" in generators:  # item 6's hybrid run asked them; asked again (deterministic), kept
            for q in questions:
                recording.ask(args.collection, q.question, filter=q.filter, generator="extractive")
        seconds = time.perf_counter() - t0
    runs6 = {r["mode"]: r for r in item6["runs"]}
    item5_runs = [runs6["hybrid"]] if "extractive" in generators else []
    item5_runs += item5_extra["runs"] if item5_extra else []
    classes = list(runs6["hybrid"]["by_class"])

    print(f"# Ask on {args.collection}: {len(questions)} questions ({args.half}), snapshot {item6['snapshot']['id']}")
    print(
        f"load average before {' '.join(load_before)}, after {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
    )
    cols = ["recall@8", "recall@10", "citation_precision", "citation_recall", "correctness", "abstention_accuracy"]
    for run in item5_runs:
        print(f"\n## Item 5: {run['generator']} over hybrid retrieval (8 chunks)\n")
        rows = [
            [
                cls,
                str(m["questions"]),
                *(_fmt(m[c]) for c in cols),
                _fmt(correct_and_cited(run, questions, None if cls == "all" else cls)),
                _fmt(m["false_abstention_rate"]),
            ]
            for cls, m in [*run["by_class"].items(), ("all", run["overall"])]
        ]
        print(_table(["class", "n", *cols, "correct+cited", "false_abstention"], rows))
        given = [a for a in recording.answers.get(run["generator"], []) if not a.abstained]
        crossing = crossing_answers(given)
        print(
            f"\nanswers quoting across a list item, heading, paragraph or table cell: {len(crossing)} of {len(given)}"
        )
        for question in crossing:
            print(f"  - {question}")
        run["crossing"] = {"answers": len(given), "crossing": crossing}
        print()
        for cls, t in run["trigger"].items():
            print(f"- {cls}: {t['verdict']}: {t['message']}")
    if set(modes) != set(MODES):
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {"command": "python " + " ".join(sys.argv), "item6": item6, "item5_other_generators": item5_extra}
            )
            + "\n",
            encoding="utf-8",
        )
        print(f"\nwrote {args.out} (item 6 needs all three modes)")
        return
    print("\n## Item 6: extractive, recall@10 / correctness per retrieval mode\n")
    rows = []
    for cls in [*classes, "all"]:
        cells = [cls]
        for m in MODES:
            mm = runs6[m]["overall"] if cls == "all" else runs6[m]["by_class"][cls]
            cells += [_fmt(mm["recall@10"]), _fmt(mm["correctness"])]
        rows.append(cells)
    headers = ["class"] + [f"{m} {x}" for m in MODES for x in ("R@10", "correct")]
    print(_table(headers, rows))
    # recall@10 saturates on the name classes; where the gold note lands says more.
    print("\n## Item 6, sharper: share of answerable questions whose gold note is ranked first (MRR@10 beside)\n")
    rows = []
    for cls in [*classes, "all"]:
        cells = [cls]
        for m in MODES:
            per_q = item6["retrieval"][m]["per_question"]
            qs = [q for q in questions if q.gold and (cls == "all" or q.cls == cls)]
            if not qs:
                cells += ["-", "-"]
                continue
            top1 = sum(1 for q in qs if 1 in per_q[q.id]["ranks"].values()) / len(qs)
            cells += [_fmt(top1), _fmt(mrr_at_10(item6, questions, m, None if cls == "all" else cls))]
        rows.append(cells)
    print(_table(["class"] + [f"{m} {x}" for m in MODES for x in ("top-1", "MRR@10")], rows))
    abst = {m: _fmt(runs6[m]["overall"]["abstention_accuracy"]) for m in MODES}
    print(f"\nabstention accuracy on unanswerable questions: {abst}")
    claims = claim_check(item6, questions)
    print()
    for line in claims:
        print(f"- {line}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "bench": "ask",
        "started": started,
        "command": "python " + " ".join(sys.argv),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
        "ingest": ingest,
        "eval_seconds": round(seconds, 1),
        "claims": claims,
        "item6": item6,
        "item5_other_generators": item5_extra,
    }
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
