"""The vault of issue 47 (tests/data/ask_vault47), asked with the real embedder (all-MiniLM-L6-v2).

extractive-v5 quoted across Markdown bullets, kept a note's hard line breaks in its quotes and
answered "who will paint" with who will pour; each test asks v5 too, so the failure stays visible,
and the default reader (extractive-v6) must quote one unit as a person reads it, or abstain naming
what it searched and the passages that came closest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ranklock import Engine

VAULT = Path(__file__).parent / "data" / "ask_vault47" / "notes"


@pytest.fixture(scope="module")
def vault(engine: Engine) -> str:
    name = "t_ask_vault47"
    engine.ingest(name, VAULT, replace=True)
    return name


def test_a_quote_never_runs_into_the_next_bullet(engine: Engine, vault: str) -> None:
    question = "When was boreal bought?"
    old = engine.ask(vault, question, generator="extractive-v5")
    assert [c.quote for c in old.citations] == [
        "Bought in 2022.\n- **boreal**: Raspberry Pi 5, runs Pi-hole and the VPN."
    ]
    ans = engine.ask(vault, question)
    assert (ans.abstained, ans.citations) == (True, ())
    assert ans.answer == (
        "The notes in “t_ask_vault47” do not say. Looked for a date or a time about “boreal”, “bought” (the question "
        "asks “When”): passage 1 comes closest but does not say it."
    )
    # The passages that came closest, each with its closest span, in --json and the plain output alike.
    assert (ans.closest[0].doc_id, ans.closest[0].quote) == ("Server inventory.md", "Bought in 2022.")
    assert '"closest":[{"n":1,"doc_id":"Server inventory.md"' in ans.to_json()


def test_a_bullet_is_quoted_as_a_person_reads_it(engine: Engine, vault: str) -> None:
    ans = engine.ask(vault, "When was atlas bought?")
    assert ans.answer == "atlas: Intel NUC 12, runs Jellyfin and the family photo library. Bought in 2022. [1]"
    # The citation keeps the note's own characters, inside the one bullet.
    assert [c.quote for c in ans.citations] == [
        "**atlas**: Intel NUC 12, runs Jellyfin and the family photo library.\n  Bought in 2022."
    ]


def test_a_soft_line_break_is_a_space(engine: Engine, vault: str) -> None:
    question = "Who will pour the concrete base?"
    assert "on\n21 October" in engine.ask(vault, question, generator="extractive-v5").answer
    ans = engine.ask(vault, question)
    assert ans.answer == "Tomás Reyes will pour the concrete base on 21 October 2026, weather permitting. [1]"


def test_who_will_paint_is_not_who_will_pour(engine: Engine, vault: str) -> None:
    question = "Who will paint the garden shed?"
    assert "pour the concrete base" in engine.ask(vault, question, generator="extractive-v5").answer
    ans = engine.ask(vault, question)
    assert ans.abstained and ans.answer.startswith(
        "The notes in “t_ask_vault47” do not say. Looked for a person's or a team's name about “paint”, “garden”, "
        "“shed” (the question asks “Who”): passage 1 comes closest but does not say it."
    )


def test_a_line_of_links_is_never_quoted(engine: Engine, vault: str) -> None:
    ans = engine.ask(vault, "When does the restore test of the server inventory run?")
    assert ans.answer == "The restore test runs on the first Saturday of each month. [1]"
