"""``python -m ranklock.domains.journal``: rewrite the shipped question set from the generator."""

from __future__ import annotations

from .generate import generate_journal
from .questions import generate_questions, questions_jsonl, shipped_questions_path


def main() -> None:
    """Write ``questions.jsonl`` beside the package from ``generate_questions(generate_journal())``."""
    path = shipped_questions_path()
    path.write_text(questions_jsonl(generate_questions(generate_journal())), encoding="utf-8")
    print(f"wrote {path}")


main()
