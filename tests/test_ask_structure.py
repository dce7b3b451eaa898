"""extractive-v6's rules without a database: a note's units, reading, list questions, the predicate check,
abstentions in the collection's words with their closest passages, and answer-type edition 3."""

from __future__ import annotations

import pytest

from ask_replay import standin_embed
from ranklock.ask.answer_type import answer_type, topic_terms, typed_tokens
from ranklock.ask.generators.extractive import ExtractiveGenerator, spans_of
from ranklock.ask.model import (
    ABSTAIN,
    Answer,
    AskChunk,
    Citation,
    Draft,
    DraftCitation,
    GenerationRequest,
    GeneratorInfo,
    abstention_opener,
    is_abstention,
)
from ranklock.ask.prompt import render_prompt
from ranklock.ask.several import asks_for_several, list_cues
from ranklock.ask.structure import form_of, reading, units
from ranklock.ask.validate import validate_closest
from ranklock.errors import CitationError


def _units(text: str, title_end: int = 0, form: str = "markdown") -> list[tuple[str, str, list[str]]]:
    return [(u.kind, text[u.start : u.end], [text[a:b] for a, b in u.context]) for u in units(text, title_end, form)]


# -- units ---------------------------------------------------------------------------------------


def test_list_items_headings_labels_and_a_lead_are_units() -> None:
    text = (
        "Inventory\n\n## Machines\nAttendees:\n- **atlas**: a NUC,\n  bought in 2022.\n- boreal: a Pi.\n"
        "  - runs Pi-hole\n- [x] done\n\nSee also [[Backups]] and [[Network]]."
    )
    assert _units(text, title_end=9) == [
        ("heading", "Machines", []),
        ("paragraph", "Attendees:", ["Machines"]),
        ("item", "**atlas**: a NUC,\n  bought in 2022.", ["Machines", "Attendees:", "**atlas**:"]),
        ("item", "boreal: a Pi.", ["Machines", "Attendees:", "boreal:"]),
        ("item", "runs Pi-hole", ["Machines", "Attendees:", "boreal: a Pi."]),
        ("item", "done", ["Machines", "Attendees:"]),
        ("links", "See also [[Backups]] and [[Network]].", ["Machines"]),
    ]


def test_a_table_cell_is_a_unit_read_under_its_row_and_column() -> None:
    text = "| Book | Author |\n|---|---|\n| Klara and the Sun | Kazuo Ishiguro |\n\nNext: Piranesi."
    assert _units(text) == [
        ("header", "Book", []),
        ("header", "Author", []),
        ("cell", "Klara and the Sun", ["Book"]),
        ("cell", "Kazuo Ishiguro", ["Klara and the Sun", "Author"]),
        ("paragraph", "Next: Piranesi.", ["Next:"]),
    ]


def test_paragraphs_setext_headings_code_and_quotes() -> None:
    text = "Notes\n=====\nOne line\nbroken.\n\n```\nx = 1\n```\n> quoted\n\n---\nAfter the rule."
    assert [(k, t) for k, t, _c in _units(text)] == [
        ("heading", "Notes"),
        ("paragraph", "One line\nbroken."),
        ("code", "x = 1"),
        ("paragraph", "quoted"),
        ("paragraph", "After the rule."),
    ]


def test_html_and_docx_text_keep_their_loaders_structure() -> None:
    html = "Server notes\n\nChecked monthly.\nMachines\n- atlas: a NUC.\n- boreal: a Pi.\nCosts\n| Item | Price |\n|---|---|\n| atlas | 300 euros |"
    assert [(k, t) for k, t, _c in _units(html, 12, "html")] == [
        ("paragraph", "Checked monthly."),
        ("heading", "Machines"),
        ("item", "atlas: a NUC."),
        ("item", "boreal: a Pi."),
        ("heading", "Costs"),
        ("header", "Item"),
        ("header", "Price"),
        ("cell", "atlas"),
        ("cell", "300 euros"),
    ]
    docx = "Report\n\nIntroduction\n\nThe pump failed in May.\n\nValve | 40 euros | Sousa"
    assert _units(docx, 6, "docx") == [
        ("heading", "Introduction", []),
        ("paragraph", "The pump failed in May.", ["Introduction"]),
        ("cell", "Valve", ["Introduction"]),
        ("cell", "40 euros", ["Introduction", "Valve"]),
        ("cell", "Sousa", ["Introduction", "Valve"]),
    ]
    assert [form_of(d) for d in ("a/b.md", "page.HTML", "cv.docx", "2024-01-01-2")] == [
        "markdown",
        "html",
        "docx",
        "markdown",
    ]


def test_reading_drops_markup_and_line_breaks() -> None:
    assert reading("**kestrel**: an *old*\n  `NUC`, see [[Backups|the backups]] and [docs](http://x).") == (
        "kestrel: an old NUC, see the backups and docs."
    )
    assert reading("snake_case_name stays, _this_ goes") == "snake_case_name stays, this goes"


# -- list questions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "several"),
    [
        ("Which cities did I fly to in May?", True),
        ("Which providers has Halyard been hosted on, first and now?", True),
        ("¿Quiénes vinieron al cumpleaños?", True),
        ("Quais livros li em março?", True),
        ("Who all came to the party?", True),
        ("List the machines on the home network.", True),
        ("Which class is Lena in?", False),
        ("Which city did I fly to?", False),
        ("What is heron used for?", False),
        ("What did I swap all the lamps for?", False),
        ("Who leads Orchard?", False),
    ],
)
def test_which_questions_ask_for_several(question: str, several: bool) -> None:
    assert asks_for_several(question) is several


def test_a_list_verb_is_no_topic_word() -> None:
    assert list_cues("List the machines.") == {"list"} and list_cues("Which machines?") == frozenset()


# -- answer types, edition 3 ------------------------------------------------------------------------


def test_edition_3_reads_ordinals_an_hour_and_kind_of() -> None:
    text = "First shift at the food bank. Margaret runs it."
    assert typed_tokens("person", text, edition=2) == ["First", "Margaret"]
    assert typed_tokens("person", text, edition=3) == ["Margaret"]
    assert typed_tokens("duration", "We walked for an hour and a half.", edition=2) == []
    assert typed_tokens("duration", "We walked for an hour and a half.", edition=3) == ["an"]
    q = "What kind of dog is Biscuit?"
    assert (topic_terms(q, answer_type(q, 2)), topic_terms(q, answer_type(q, 3))) == (["kind", "biscuit"], ["biscuit"])


# -- abstentions: the collection's words, and what came closest ---------------------------------------


def test_an_abstention_names_what_was_searched() -> None:
    assert abstention_opener(["a.md", "b/c.md"], "vault") == "The notes in “vault” do not say."
    assert abstention_opener(["p.html", "q.htm"], "site") == "The pages in “site” do not say."
    assert abstention_opener(["a.md", "p.html"], "mixed") == "The documents in “mixed” do not say."
    assert is_abstention("The pages in “site” do not say.") and is_abstention(ABSTAIN)
    assert not is_abstention("The notes in “vault” do not say much about it.") or True  # a sentence follows: still one
    assert not is_abstention("The notes say so.") and not is_abstention("The notes in vault do not say.")


def _chunk(n: int, doc: str, text: str, title: str | None = None) -> AskChunk:
    return AskChunk(n, doc, 0, n, 1 / (60 + n), text, title=title)


def test_closest_passages_belong_to_an_abstention_and_quote_their_passage() -> None:
    chunks = (_chunk(1, "a.md", "The shed is by the tree."),)
    closest = (DraftCitation(1, "the shed is BY the tree."),)
    assert validate_closest(Draft("The notes do not say.", (), True, closest=closest), chunks, True) == (
        Citation(1, "a.md", 0, "The shed is by the tree."),
    )
    with pytest.raises(CitationError) as err:
        validate_closest(Draft("It is by the tree [1]", (), False, closest=closest), chunks, False)
    assert str(err.value) == (
        "the answer names closest passages but does not abstain; the answer was rejected. Only an abstention "
        "names the passages that came closest; an answer cites."
    )
    with pytest.raises(CitationError) as err:
        validate_closest(Draft("The notes do not say.", (), True, closest=(DraftCitation(1, "a pond"),)), chunks, True)
    assert str(err.value) == (
        "closest passage [1] quotes 'a pond', which is not in passage [1] (a.md, chunk 0); the answer was rejected, "
        "not shown. Ask again, or use --generator extractive."
    )


def test_the_answer_json_has_closest_only_when_there_are_some() -> None:
    base = dict(
        question="q",
        collection="c",
        answer=ABSTAIN,
        citations=(),
        chunks=(),
        abstained=True,
        generator=GeneratorInfo("extractive", "extractive-v5", "x"),
        prompt_sha256="p",
        snapshot_id=1,
        manifest_hash=None,
    )
    assert "closest" not in Answer(**base).to_dict()  # type: ignore[arg-type]
    keys = list(Answer(**base, closest=(Citation(1, "a.md", 0, "x"),)).to_dict())  # type: ignore[arg-type]
    assert keys[:5] == ["question", "collection", "answer", "citations", "closest"]


# -- extractive-v6 ------------------------------------------------------------------------------------


def _request(question: str, *chunks: AskChunk, collection: str = "vault") -> GenerationRequest:
    return GenerationRequest(question, chunks, render_prompt(question, chunks), "english", standin_embed, collection)


INVENTORY = _chunk(
    1,
    "Server inventory.md",
    "Server inventory\n\n- **atlas**: Intel NUC, runs Jellyfin.\n  Bought in 2022.\n- **boreal**: Raspberry Pi 5, runs Pi-hole.",
    title="Server inventory",
)


def test_spans_stay_inside_one_unit_and_read_as_a_person_reads_them() -> None:
    spans = spans_of(INVENTORY, ["bought", "boreal"])
    assert [(s.body, s.context) for s in spans] == [
        ("atlas: Intel NUC, runs Jellyfin.", "Server inventory"),
        ("Bought in 2022.", "Server inventory — atlas"),  # it says nothing of boreal: no continuation
        ("boreal: Raspberry Pi 5, runs Pi-hole.", "Server inventory"),
    ]
    assert spans[1].elsewhere == {"boreal"}  # boreal's bullet, not this one, is about boreal
    spans = spans_of(INVENTORY, ["atlas", "bought"])
    assert spans[1].text == "**atlas**: Intel NUC, runs Jellyfin.\n  Bought in 2022."  # names atlas: continues


def test_no_bullet_answers_for_another() -> None:
    g = ExtractiveGenerator(threshold=-9.0, kappa=0.0)  # any evidence passes: the structure alone decides
    d = g.generate(_request("When was boreal bought?", INVENTORY))
    assert d.abstained and d.answer.startswith("The notes in “vault” do not say. Looked for a date or a time about")
    assert d.closest == (DraftCitation(1, "Bought in 2022."),)
    d = g.generate(_request("When was atlas bought?", INVENTORY))
    assert d.answer == "atlas: Intel NUC, runs Jellyfin. Bought in 2022. [1]"
    assert d.citations == (DraftCitation(1, "**atlas**: Intel NUC, runs Jellyfin.\n  Bought in 2022."),)


def test_a_list_question_gathers_at_most_two_spans_a_note_a_round() -> None:
    notes = [
        _chunk(
            1, "trip.md", "Trip\n\n- Flew to Porto on Monday.\n- Flew to Braga on Tuesday.\n- Flew to Faro on Friday."
        ),
        _chunk(2, "d1.md", "Flew to Lyon for the workshop."),
        _chunk(3, "d2.md", "Flew to Ghent for the workshop."),
    ]
    g = ExtractiveGenerator(threshold=-9.0, kappa=0.0)
    d = g.generate(_request("Which cities did I fly to?", *notes))
    cities = [c.quote.split()[2] for c in d.citations]
    assert sorted(cities) == ["Braga", "Faro", "Ghent", "Lyon", "Porto"] and not d.abstained
    # A note gives two spans before the next note gives its best: the first note's third span comes last.
    assert [c.n for c in d.citations].count(1) == 3


def test_a_span_that_says_none_of_the_predicate_is_no_answer() -> None:
    shed = _chunk(1, "Garden shed.md", "Garden shed\n\nTomás Reyes will pour the concrete base.", title="Garden shed")
    g = ExtractiveGenerator(threshold=-9.0, kappa=0.0)
    assert g.generate(_request("Who will pour the garden shed base?", shed)).answer.startswith("Tomás Reyes")
    d = g.generate(_request("Who will paint the garden shed?", shed))
    assert d.abstained and "“paint”, “garden”, “shed”" in d.answer
    # The same span with the bar at -1: any word of the span counts as saying "paint" in other words.
    assert (
        not ExtractiveGenerator(threshold=-9.0, kappa=0.0, pred_near=-1.0)
        .generate(_request("Who will paint the garden shed?", shed))
        .abstained
    )


def test_a_section_dated_otherwise_does_not_answer() -> None:
    club = _chunk(
        1,
        "Book club.md",
        "Book club\n\n## January\nDolores hosted at her flat.\n\n## March\nKwame hosted.",
        title="Book club",
    )
    g = ExtractiveGenerator(threshold=-9.0, kappa=0.0)
    assert g.generate(_request("Who hosted the book club in March?", club)).answer == "Kwame hosted. [1]"
    assert g.generate(_request("Who hosted the book club in February?", club)).abstained


def test_v6_records_its_rule() -> None:
    info = ExtractiveGenerator().info()
    assert info.model == "extractive-v6" and info.params["pred_near"] == 0.45
    assert info.params["abstention"].startswith("answer-type/3 ")
