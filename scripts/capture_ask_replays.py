"""Capture what the frozen extractive readers answer, for tests/test_ask_replay.py (see tests/ask_replay.py).

Two steps, each run once, on purpose:

    python scripts/capture_ask_replays.py requests --home H   # the requests Ask hands a reader, over H's collections
    python scripts/capture_ask_replays.py answers extractive-v6  # a version's answers, when it freezes

``--set structure`` (both steps) captures the second set instead: issue 47's notes in lists,
headings and tables (:data:`STRUCTURE`), whose answers issue 47 captured for every version.

``requests`` asks every question of the journal and of the hand-written sets named in
:data:`SETS` (each collection already ingested in home H, as bench/ask.py does) through a
generator that only records what it is handed; ``answers`` asks every recorded request of the
generator given, under the stand-in embedder, and writes ``answers-<its rule version>.jsonl``.
A version's file is written once, when it freezes, and never again: rewriting it to make the test
pass would defeat it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from ask_replay import SETS as REPLAY_SETS  # noqa: E402
from ask_replay import answers_path, read_requests, replay, write_requests  # noqa: E402
from ranklock import Engine  # noqa: E402
from ranklock.ask.model import ABSTAIN, Draft, GenerationRequest, GeneratorInfo  # noqa: E402
from ranklock.domains.journal.questions import Question, load_questions, shipped_questions_path  # noqa: E402

DATA = ROOT / "tests" / "data"
#: Collection -> its question set (the journal's is shipped with the package).
SETS = {
    "journal": None,
    "handset": DATA / "ask_handset" / "questions.jsonl",
    "handset2": DATA / "ask_handset2" / "questions.jsonl",
    "handset3": DATA / "ask_handset3" / "questions.jsonl",
}
#: The second set (issue 47): collection -> its notes and questions, ingested when missing.
STRUCTURE = {
    "handset4": DATA / "ask_handset4",
    "vault47": DATA / "ask_vault47",
}


class Recorder:
    """A generator that answers nothing and keeps every request it is handed."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[GenerationRequest] = []

    def info(self) -> GeneratorInfo:
        return GeneratorInfo(self.name, None, None)

    def generate(self, request: GenerationRequest) -> Draft:
        self.seen.append(request)
        return Draft(ABSTAIN, (), True)


def _questions(path: Path) -> list[Question]:
    return [Question.from_record(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x]


def capture_requests(home: str, prefix: str) -> None:
    rec = Recorder()
    captured = []
    with Engine(home=home) as eng:
        if prefix == "structure":
            sets = {}
            for coll, root in STRUCTURE.items():
                eng.ingest(coll, root / "notes", replace=True)  # unchanged notes: nothing is rebuilt
                sets[coll] = _questions(root / "questions.jsonl")
        else:
            sets = {c: _questions(p) if p else load_questions(shipped_questions_path()) for c, p in SETS.items()}
        for coll, qs in sets.items():
            for q in qs:
                eng.ask(coll, q.question, filter=q.filter, generator=rec)
                captured.append((coll, q.id, q.cls, rec.seen[-1]))
    path = REPLAY_SETS[prefix]
    write_requests(path, captured)
    print(f"wrote {len(captured)} requests to {path} ({path.stat().st_size:,} bytes)")


def capture_answers(generator: str, prefix: str) -> None:
    lines = replay(generator, read_requests(REPLAY_SETS[prefix]))
    version = json.loads(lines[0])["info"]["model"]
    path = answers_path(version, prefix)
    if path.exists():
        sys.exit(
            f"{path} exists: a version's answers are captured once, when it freezes; delete it by hand if you must."
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines) - 1} answers of {version} to {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    r = sub.add_parser("requests")
    r.add_argument("--home", required=True)
    r.add_argument("--set", choices=sorted(REPLAY_SETS), default="answers")
    a = sub.add_parser("answers")
    a.add_argument("generator")
    a.add_argument("--set", choices=sorted(REPLAY_SETS), default="answers")
    args = ap.parse_args()
    if args.step == "requests":
        capture_requests(args.home, args.set)
    else:
        capture_answers(args.generator, args.set)


if __name__ == "__main__":
    main()
