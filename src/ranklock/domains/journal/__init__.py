"""The generated personal journal: notes, their typed fields and the labelled questions.

>>> from ranklock.domains.journal import generate_journal, generate_questions
>>> journal = generate_journal()
>>> len(journal.notes) > 1900, len(generate_questions(journal)) >= 200
(True, True)
"""

from .generate import Journal, Note, generate_journal
from .questions import QUESTION_CLASSES, Question, generate_questions, questions_jsonl
from .schema import JOURNAL_COLLECTION, JOURNAL_CREATE, JOURNAL_FIELDS

__all__ = [
    "JOURNAL_COLLECTION",
    "JOURNAL_CREATE",
    "JOURNAL_FIELDS",
    "QUESTION_CLASSES",
    "Journal",
    "Note",
    "Question",
    "generate_journal",
    "generate_questions",
    "questions_jsonl",
]
