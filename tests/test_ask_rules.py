"""The pinned rules of Ask, without a database: segmentation, the extractive scoring rule,
citation validation and the parsing of a model's reply."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ranklock.ask.generators.extractive_v2 import ExtractiveV2Generator
from ranklock.ask.generators.extractive_v3 import (
    ExtractiveV3Generator,
    answer_type,
    has_type,
    is_present,
    meaning_query,
    spans_of,
)
from ranklock.ask.generators.reply import parse_reply
from ranklock.ask.model import ABSTAIN, AskChunk, Draft, DraftCitation, GenerationRequest
from ranklock.ask.prompt import render_prompt
from ranklock.ask.segment import RULES_SHA256, language_code, sentences
from ranklock.ask.terms import content_terms, key_terms, stem, terms
from ranklock.ask.validate import validate_draft
from ranklock.errors import CitationError, GenerationError

# -- segmentation --------------------------------------------------------------------------


def test_english_abbreviations_initials_and_dates() -> None:
    text = "Mr. Smith met Dr. Watson on Jan. 3 at 5 p.m. with J. R. Tolkien. Then they left! Really? Yes."
    assert sentences(text, "en") == [
        "Mr. Smith met Dr. Watson on Jan. 3 at 5 p.m. with J. R. Tolkien.",
        "Then they left!",
        "Really?",
        "Yes.",
    ]


def test_portuguese_abbreviations() -> None:
    text = "A Dra. Inês chegou cedo. O Sr. Costa trouxe, p. ex. O livro azul. A Sra. Lima saiu."
    assert sentences(text, "pt") == [
        "A Dra. Inês chegou cedo.",
        "O Sr. Costa trouxe, p. ex. O livro azul.",
        "A Sra. Lima saiu.",
    ]


def test_spanish_abbreviations() -> None:
    text = "La Dra. Ruiz llegó. El Sr. Pérez viajó a EE. UU. el lunes, p. ej. Nueva York. ¿Vino Ud. también? Sí."
    assert sentences(text, "es") == [
        "La Dra. Ruiz llegó.",
        "El Sr. Pérez viajó a EE. UU. el lunes, p. ej. Nueva York.",
        "¿Vino Ud. también?",
        "Sí.",
    ]


def test_rules_are_per_language_not_the_host_locale() -> None:
    # "Dra." is a Portuguese/Spanish abbreviation, not an English one: the English rules cut there.
    text = "Met Dra. Faria today. It rained."
    assert sentences(text, "en") == ["Met Dra.", "Faria today.", "It rained."]
    assert sentences(text, "pt") == sentences(text, "es") == ["Met Dra. Faria today.", "It rained."]
    assert sentences(text, "all") == ["Met Dra. Faria today.", "It rained."]
    # Text-search languages map onto rule sets; any other language gets the union.
    assert [language_code(x) for x in ("english", "portuguese", "spanish", "simple")] == ["en", "pt", "es", "all"]
    assert sentences(text, "portuguese") == sentences(text, "pt")


def test_paragraphs_and_lowercase_continuations() -> None:
    text = "First line without a stop\nstill the same sentence\n\nA new paragraph. etc. and more"
    assert sentences(text) == [
        "First line without a stop\nstill the same sentence",
        "A new paragraph. etc. and more",
    ]
    assert len(RULES_SHA256) == 64


# -- the extractive rule --------------------------------------------------------------------


def chunks(*texts: str, dates: tuple[str | None, ...] = ()) -> tuple[AskChunk, ...]:
    return tuple(
        AskChunk(n=i, doc_id=f"d{i}", chunk=0, rank=i, score=1 / (60 + i), text=t, date=dates[i - 1] if dates else None)
        for i, t in enumerate(texts, 1)
    )


def bag_of_words(texts: list[str] | tuple[str, ...]) -> np.ndarray:
    """A deterministic stand-in for the embedder: each term hashed to one of 64 dimensions, counted, normalised.

    Texts sharing terms are close, others orthogonal-ish: enough to test the rule's plumbing, not its quality
    (bench/ask.py measures that with the real model)."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for row, text in enumerate(texts):
        for t in terms(text):
            out[row, hashlib.sha256(t.encode()).digest()[0] % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def request(question: str, *texts: str, dates: tuple[str | None, ...] = ()) -> GenerationRequest:
    cs = chunks(*texts, dates=dates)
    return GenerationRequest(question, cs, render_prompt(question, cs), embed=bag_of_words)


def test_content_and_key_terms() -> None:
    q = "Who reviewed the XJ-900 budget for Ana Ruiz in March 2024? Quem aprovou o orçamento?"
    assert content_terms(q) == ["reviewed", "xj-900", "budget", "ana", "ruiz", "march", "2024", "aprovou", "orcamento"]
    # Identifiers and names are key terms; calendar words and bare numbers are not.
    assert key_terms(q) == ["xj-900", "ana", "ruiz"]
    assert key_terms("Halyard moved where?") == []  # the first word's capital says nothing
    words = ("hosted", "hosting", "host", "reviews", "bus", "ties", "tie", "move", "moved", "moving")
    assert [stem(w) for w in words] == ["host", "host", "host", "review", "bus", "tie", "tie", "mov", "mov", "mov"]


def test_v2_rare_terms_outweigh_the_shared_name() -> None:
    # N = 3 chunks; cf(ana) = cf(ruiz) = 3, cf(allergic) = 1.
    d = ExtractiveV2Generator().generate(
        request(
            "What is Ana Ruiz allergic to?",
            "Coffee with Ana Ruiz at the loft. She is allergic to hazelnuts.",
            "Lunch with Ana Ruiz at noon.",
            "Met Ana Ruiz and Rui to review dashboards.",
        )
    )
    # "She is allergic…" scores 3/1 = 3; each name sentence 3/3 + 3/3 = 2 < 3/4 * 3: left out.
    assert d.answer == "She is allergic to hazelnuts. [1]"
    assert d.citations == (DraftCitation(1, "She is allergic to hazelnuts."),)


def test_v2_selection_order_is_score_then_passage_then_position() -> None:
    # Q = {host, halyard}; N = 3; cf(host) = 2 ("hosted" ~ "host" ~ "hosting"), cf(halyard) = 2.
    d = ExtractiveV2Generator().generate(
        request(
            "Where is Halyard hosted?",
            "Unrelated words. Halyard hosting moved to Linode.",
            "We will host Halyard on Hetzner.",
            "Nothing here.",
        )
    )
    # Both sentences score 3/2 + 3/2 = 3: passage [1] first, then [2].
    assert d.answer == "Halyard hosting moved to Linode. [1] We will host Halyard on Hetzner. [2]"


# -- extractive-v3 ------------------------------------------------------------------------------


def test_v3_helpers() -> None:
    assert meaning_query("Which city did I fly to in March 2024?") == "Which city did I fly to in ?"
    assert meaning_query("Which cities did I travel to in Q2 2023 now?") == "Which cities did I travel to in ?"
    assert [is_present(q) for q in ("Where is it hosted now?", "¿Dónde vive ahora?", "Onde mora hoje?", "Who?")] == [
        True,
        True,
        True,
        False,
    ]
    assert [answer_type(q) for q in ("How much did it cost?", "¿Cuántos vinieron?", "Who won?", "Where?")] == [
        "number",
        "number",
        "person",
        None,
    ]
    assert has_type("number", "ninety-five candles") and has_type("number", "480 euros")
    assert not has_type("number", "the bicycle was stolen")
    assert has_type("person", "The kickoff: Ana Ruiz leads.") and not has_type("person", "The screen cracked.")


def test_v3_spans_continue_a_pronoun_or_an_unnamed_subject() -> None:
    c = chunks(
        "Jantar com Baltasar Quintela em Café Aurora. Vai mudar-se para Maputo em setembro.",
        "Lunch with Ana Ruiz. She is allergic to hazelnuts. Then it rained.",
    )
    q = "Para que cidade o Baltasar Quintela vai se mudar?"
    spans = spans_of(c[0], content_terms(q), set(key_terms(q)))
    # The second sentence names nobody its predecessor named: it is quoted with it.
    assert [(s.first, s.last, s.text) for s in spans] == [
        (0, 0, "Jantar com Baltasar Quintela em Café Aurora."),
        (0, 1, "Jantar com Baltasar Quintela em Café Aurora. Vai mudar-se para Maputo em setembro."),
    ]
    # "She" and "Then" continue (pronoun, connective): the span reaches back to the sentence naming Ana.
    spans = spans_of(c[1], ["allergic"], set())
    assert [(s.first, s.last) for s in spans] == [(0, 0), (0, 1), (0, 2)]


def test_v3_quotes_the_predecessor_of_a_pronoun_sentence() -> None:
    d = ExtractiveV3Generator().generate(
        request(
            "What is Ana Ruiz allergic to?",
            "Coffee with Ana Ruiz at the loft. She is allergic to hazelnuts.",
            "Weekly sync with Ana Ruiz and Rui; nothing decided.",
        )
    )
    assert d.answer == "Coffee with Ana Ruiz at the loft. She is allergic to hazelnuts. [1]"
    assert d.citations == (DraftCitation(1, "Coffee with Ana Ruiz at the loft. She is allergic to hazelnuts."),)


def test_v3_key_terms_gate_and_threshold_abstain() -> None:
    gen = ExtractiveV3Generator()
    # Nobody named Oskar in the chunks: no chunk qualifies, however close its meaning.
    d = gen.generate(request("What is Oskar Lind allergic to?", "Coffee with Ana Ruiz. She is allergic to hazelnuts."))
    assert (d.answer, d.citations, d.abstained) == (ABSTAIN, (), True)
    # No name, and nothing given is about the question: the evidence is below the calibrated threshold.
    d = gen.generate(request("Which bus should visitors take?", "Cooked soup for dinner.", "The river was cold."))
    assert d.abstained and d.answer == ABSTAIN
    # A "how much" question with no number in any span has nothing of the answer's type.
    d = gen.generate(request("How much did the bicycle cost?", "Somebody stole my bicycle outside the library."))
    assert d.abstained


def test_v3_present_questions_quote_the_latest_note_that_revisits() -> None:
    texts = (
        "Halyard is hosted on Hetzner.",
        "Reversed: Halyard is hosted on Linode.",
        "Weekly sync on Halyard; nothing decided.",
    )
    dates = ("2023-05-01", "2024-02-03", "2024-09-09")
    d = ExtractiveV3Generator().generate(request("Where is Halyard hosted now?", *texts, dates=dates))
    assert d.answer == ("Reversed: Halyard is hosted on Linode. [2] (the latest note: d2, 2024-02-03)")
    # Without a present marker both hosting notes may be quoted; with no dates nothing is "latest".
    d = ExtractiveV3Generator().generate(request("Where is Halyard hosted now?", *texts))
    assert "(the latest note" not in d.answer


def test_v3_needs_the_collections_vectors() -> None:
    cs = chunks("Ana moved to Lisbon.")
    with pytest.raises(GenerationError) as e:
        ExtractiveV3Generator().generate(GenerationRequest("Where did Ana move?", cs, render_prompt("x", cs)))
    assert str(e.value) == (
        "the extractive generator scores by meaning and needs the collection's embedder, but the request "
        "carries none; ask through Engine.ask, or pass GenerationRequest(embed=...)."
    )


def test_v3_is_deterministic() -> None:
    r = request("Where did Ana move?", "Ana moved to Lisbon. She likes it.", "Rui stayed in Porto.")
    assert ExtractiveV3Generator().generate(r) == ExtractiveV3Generator().generate(r)
    assert ExtractiveV3Generator().info().model == "extractive-v3"
    # Its rule is pinned: the checksum of issue 26, unchanged by extractive-v4 (which reuses its lists).
    assert ExtractiveV3Generator().info().checksum == "4d3e02f606e1b47bbfad13113ae93a7d2e43a7a287c581e18c9a5e9ca566add6"
    assert ExtractiveV3Generator().info().checksum != ExtractiveV2Generator().info().checksum


# -- validation -------------------------------------------------------------------------------


def test_citation_outside_the_chunks_is_rejected() -> None:
    cs = chunks("Ana moved to Lisbon.", "Rui stayed.")
    with pytest.raises(CitationError) as e:
        validate_draft(Draft("Ana moved [3].", (DraftCitation(3, "Ana moved"),), False), cs)
    assert str(e.value) == (
        "the answer cites passage [3] but only passages [1]..[2] were given; the answer was rejected, not shown. "
        "Ask again, or use --generator extractive."
    )
    with pytest.raises(CitationError) as e:
        validate_draft(Draft("Ana moved [0].", (DraftCitation(0, "Ana moved"),), False), cs)
    assert "cites passage [0]" in str(e.value)


def test_quote_must_be_in_the_cited_chunk() -> None:
    cs = chunks("Ana moved to Lisbon.", "Rui stayed.")
    with pytest.raises(CitationError) as e:
        validate_draft(Draft("Rui stayed [1].", (DraftCitation(1, "Rui stayed"),), False), cs)
    assert str(e.value) == (
        "citation [1] quotes 'Rui stayed', which is not in passage [1] (d1, chunk 0); the answer was rejected, "
        "not shown. Ask again, or use --generator extractive."
    )
    # Whitespace and case are forgiven; the citation keeps the chunk's own words.
    _answer, cites, abstained = validate_draft(
        Draft("Ana went to Lisbon [1].", (DraftCitation(1, "ana  MOVED to\nlisbon"),), False), cs
    )
    assert cites[0].quote == "Ana moved to Lisbon" and (cites[0].doc_id, abstained) == ("d1", False)


def test_markers_must_be_in_range_and_quoted() -> None:
    cs = chunks("Ana moved to Lisbon.", "Rui stayed.")
    with pytest.raises(CitationError) as e:
        validate_draft(Draft("Ana moved [1] [7].", (DraftCitation(1, "Ana moved"),), False), cs)
    assert str(e.value).startswith("the answer text cites [7] but only passages [1]..[2] were given;")
    with pytest.raises(CitationError) as e:
        validate_draft(Draft("Ana moved [1], Rui stayed [2].", (DraftCitation(1, "Ana moved"),), False), cs)
    assert str(e.value).startswith("the answer text cites [2] without quoting passage [2];")


def test_answers_cite_and_abstentions_do_not() -> None:
    cs = chunks("Ana moved to Lisbon.")
    with pytest.raises(CitationError) as e:
        validate_draft(Draft("Ana moved.", (), False), cs)
    assert str(e.value).startswith("the answer 'Ana moved.' cites no passage;")
    with pytest.raises(CitationError) as e:
        validate_draft(Draft(ABSTAIN, (DraftCitation(1, "Ana"),), True), cs)
    assert str(e.value).startswith("the answer abstains")
    assert validate_draft(Draft(ABSTAIN, (), True), ()) == (ABSTAIN, (), True)


# -- model replies --------------------------------------------------------------------------


def test_local_reply_gate() -> None:
    from ranklock.ask.generators.local import reply_state

    assert [reply_state(t) for t in ("", " ``", '```json\n{"a"', '{"a": "}\\" x"}', '{"a": {"b": 1}}')] == [
        "more",
        "more",
        "more",
        "done",
        "done",
    ]
    assert [reply_state(t) for t in ("Sure, here it is", "[1] Lisbon", "```python")] == ["not_json"] * 3


def test_reply_parsing_accepts_fenced_json() -> None:
    d = parse_reply(
        '```json\n{"answer": "Lisbon [1].", "citations": [{"n": "[1]", "quote": "Lisbon"}]}\n```', source="m"
    )
    assert (d.answer, d.citations, d.abstained) == ("Lisbon [1].", (DraftCitation(1, "Lisbon"),), False)
    assert parse_reply(f'{{"answer": "{ABSTAIN}", "citations": []}}', source="m").abstained is True


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("Lisbon, I think.", "no JSON object in it"),
        ('{"answer": "Lisbon", "citations": [}', "invalid JSON: Expecting value"),
        ('{"answer": "", "citations": []}', "'answer' is missing or not a non-empty string"),
        ('{"answer": "x", "citations": {"n": 1}}', "'citations' is not a list"),
        ('{"answer": "x", "citations": [{"n": 1}]}', "a citation is not an object with 'n' and 'quote'"),
        ('{"answer": "x", "citations": [{"n": "one", "quote": "x"}]}', "citation number 'one' is not an integer"),
    ],
)
def test_garbage_replies_are_rejected_with_what_came_back(content: str, why: str) -> None:
    with pytest.raises(GenerationError) as e:
        parse_reply(content, source="model 'm'")
    assert str(e.value) == (
        f"the reply of model 'm' is not the JSON object the prompt asks for ({why}): {content!r}; "
        "the answer was rejected. Use a model that follows instructions, or --generator extractive."
    )


def test_prompt_is_versioned_and_hashed() -> None:
    cs = chunks("Ana moved to Lisbon.")
    p = render_prompt("Where did Ana move?", cs)
    assert p.version == "ask-v2"
    assert (
        p.messages[1]["content"] == "Question: Where did Ana move?\n\nPassages:\n[1] (d1, chunk 0) Ana moved to Lisbon."
    )
    assert p.sha256 == render_prompt("Where did Ana move?", cs).sha256
    assert p.sha256 != render_prompt("Where did Ana go?", cs).sha256
    dated = chunks("Ana moved to Lisbon.", dates=("2024-03-01",))
    assert (
        render_prompt("Where did Ana move?", dated)
        .messages[1]["content"]
        .endswith("[1] (d1, chunk 0, dated 2024-03-01) Ana moved to Lisbon.")
    )


# -- layering ----------------------------------------------------------------------------------


def test_ask_depends_only_downward() -> None:
    """ranklock.ask takes a database handle, a collection record and a search callable: it never imports
    the Engine or an interface (cli, http), and reaches only the foundations below it."""
    import ast
    from pathlib import Path

    import ranklock.ask

    allowed = {
        "ranklock.errors",
        "ranklock.collection",
        "ranklock.search.results",
        "ranklock.settings",  # declarations only (the request defaults): a leaf below everything
        "ranklock.snapshot.segments",  # which documents a snapshot holds (the live ones of its segments)
        "ranklock.store.database",
        "ranklock.embed.base",
    }
    root = Path(ranklock.ask.__file__).parent
    reached: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        package = "ranklock." + ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                reached.add(".".join([*base, *([node.module] if node.module else [])]))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ranklock"):
                reached.add(node.module)
            elif isinstance(node, ast.Import):
                reached.update(a.name for a in node.names if a.name.startswith("ranklock"))
    outside = sorted(m for m in reached if not m.startswith("ranklock.ask") and m not in allowed)
    assert outside == []
    assert "ranklock.errors" in reached
