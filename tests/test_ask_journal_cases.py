"""The four cases of issue 26, asked of the journal with the real embedder (all-MiniLM-L6-v2), by the default reader.

A slice of ``ranklock demo journal`` keeps the suite short: the notes that compete for the cases'
chunks on the full demo (``tests/data/ask_cases_notes.json``: each case's top 40 lexical and top 40
semantic candidates there), 253 of the 2,000.  The same four answers hold on the full demo
(docs/ask.md), where retrieval sees all of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranklock import Engine
from ranklock.domains.journal import JOURNAL_CREATE, generate_journal


@pytest.fixture(scope="module")
def journal_slice(engine: Engine) -> str:
    name = "t_ask_cases_minilm"
    j = generate_journal()
    data = Path(__file__).parent / "data" / "ask_cases_notes.json"
    keep = set(json.loads(data.read_text(encoding="utf-8"))["note_ids"])
    engine.ingest(name, [d for d in j.documents() if d.doc_id in keep], replace=True, create=dict(JOURNAL_CREATE))
    return name


def test_a_paraphrased_question_quotes_the_note(engine: Engine, journal_slice: str) -> None:
    ans = engine.ask(journal_slice, "What kind of dog did we adopt and what is it called?")
    assert ans.answer.startswith("Finally adopted a rescue greyhound from the shelter; we named him Biscuit. [")
    assert [c.doc_id for c in ans.citations] == ["2024-02-28-1"]


def test_a_pronoun_drop_sentence_brings_its_predecessor(engine: Engine, journal_slice: str) -> None:
    ans = engine.ask(journal_slice, "Para que cidade o Baltasar Quintela vai se mudar?")
    quote = ans.citations[0].quote
    assert quote.startswith("Jantar com Baltasar Quintela em ") and quote.endswith(
        "Vai mudar-se para Maputo em setembro."
    )
    assert len(ans.citations) == 1


def test_a_present_question_quotes_the_latest_note_and_says_so(engine: Engine, journal_slice: str) -> None:
    ans = engine.ask(journal_slice, "Where is the Quillmark project hosted now?")
    assert ans.answer.startswith("Reversing the earlier Quillmark call: the hosting moves from OVHcloud to Vultr")
    assert ans.answer.endswith("(the latest note: 2024-09-06-1, 2024-09-06)")
    assert "Decision on Quillmark" not in ans.answer


def test_a_question_the_journal_cannot_answer_abstains(engine: Engine, journal_slice: str) -> None:
    ans = engine.ask(journal_slice, "Which bus should visitors take?")
    assert (ans.citations, ans.abstained) == ((), True)
    assert ans.answer.startswith(
        f"The documents in “{journal_slice}” do not say. Looked for an answer about “visitors”, “take”: passage "
    )
