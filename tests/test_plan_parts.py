"""Every phrase of a request ends up in exactly one place (issue 11, item 4).

A constraint (hard, SQL), a soft preference, ranking text, or a "not understood"
part that makes the plan a clarification request; ``Plan.parts`` says which
phrase went where.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fakes import HashEmbedder, use_hash_embedder
from ranklock import Engine
from ranklock.domains.resumes.labelled import SCHEMAS, load_labelled, score_entry
from ranklock.ingest.loaders import Document
from ranklock.plan import Constraint, Plan, build_schema, extract_plan, find_protected, validate_plan
from ranklock.plan.partition import STOP_WORDS, content_words, words

DATA = Path(__file__).parent / "data"
RESUMES = SCHEMAS["resumes"]
DOCS_FIELDS = ["year:int", "tags:keyword[]"]
DOCS = build_schema(DOCS_FIELDS, {"tags": ["biology", "parts", "vaccines"]})
EXAMPLE = "vaccine papers from 2020 or later tagged parts"


def _roles(plan: Plan) -> list[tuple[str, str]]:
    return [(p.phrase, p.role) for p in plan.parts]


def _part_words(plan: Plan) -> list[str]:
    return [
        p.phrase[s:e].lower() for p in plan.parts for s, e in words(p.phrase) if p.phrase[s:e].lower() not in STOP_WORDS
    ]


def assert_partition(request: str, plan: Plan) -> None:
    """The parts cover every content word of ``request`` exactly once, in order, and agree with the plan."""
    assert _part_words(plan) == content_words(request), _roles(plan)
    ends = [(p.start, p.end) for p in plan.parts]
    assert all(s < e for s, e in ends) and all(a[1] <= b[0] for a, b in itertools.pairwise(ends))
    for p in plan.parts:
        assert " ".join(request[p.start : p.end].split()) == p.phrase
    if any(p.role == "not_understood" for p in plan.parts):
        assert plan.kind == "clarification_request"
        assert all(p.question for p in plan.parts if p.role == "not_understood")
    if plan.kind == "answer":
        ranked = [w for p in plan.parts if p.role == "ranking_text" for w in p.phrase.split()]
        assert content_words(" ".join(ranked)) == content_words(plan.ranking_text)
        for p in plan.parts:
            if p.role == "constraint":
                assert p.constraint is not None and p.predicate is not None
                assert plan.constraints[p.constraint].field == p.field


# -- the example, on the database --------------------------------------------------------------

CORPUS = [
    ("d1", "Vaccine papers: spare parts for cold-chain freezers.", {"year": 2021, "tags": ["parts", "vaccines"]}),
    ("d2", "Vaccine papers about freezer parts from the old days.", {"year": 2019, "tags": ["parts"]}),
    ("d3", "Vaccine papers on immune response.", {"year": 2022, "tags": ["biology", "vaccines"]}),
    ("d4", "Papers on vaccine vials and their parts.", {"year": 2020, "tags": ["parts"]}),
    ("d5", "Vaccine papers with parts lists, undated.", {"tags": ["parts"]}),
    ("d6", "Vaccine papers, recent, untagged.", {"year": 2024, "tags": []}),
]


@pytest.fixture
def docs(engine: Engine, cname: str) -> str:
    engine.create_collection(cname, fields=DOCS_FIELDS, embedder=use_hash_embedder(engine))
    engine.ingest(cname, [Document(d, "", body, meta) for d, body, meta in CORPUS])
    return cname


def test_the_year_and_the_tag_become_constraints_and_the_search_keeps_only_matching_docs(
    engine: Engine, docs: str
) -> None:
    plan = engine.plan(docs, EXAMPLE)
    assert plan.kind == "answer"
    assert plan.filter == {
        "and": [{"field": "year", "op": ">=", "value": 2020}, {"field": "tags", "op": "has", "value": "parts"}]
    }
    assert plan.ranking_text == "vaccine papers"
    out = engine.search_request(docs, EXAMPLE, k=10)
    assert out.result is not None
    assert sorted(h.doc_id for h in out.result.hits) == ["d1", "d4"]
    assert out.result.matching_count == 2


def test_the_example_says_which_phrase_went_where() -> None:
    plan = extract_plan(EXAMPLE, DOCS)
    assert [(p.phrase, p.role, p.predicate) for p in plan.parts] == [
        ("vaccine papers", "ranking_text", None),
        ("from 2020 or later", "constraint", "year >= 2020"),
        ("tagged parts", "constraint", "tags has 'parts'"),
    ]
    assert [(p.start, p.end) for p in plan.parts] == [(0, 14), (15, 33), (34, 46)]
    assert_partition(EXAMPLE, plan)


@pytest.mark.usefixtures("engine")
def test_cli_plan_json_shows_the_parts(docs: str, rl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ranklock.embed.loaded
    from ranklock.cli import app

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )
    r = CliRunner().invoke(app, ["plan", docs, EXAMPLE, "--json", "--home", str(rl_home)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [(p["phrase"], p["role"], p["field"]) for p in out["parts"]] == [
        ("vaccine papers", "ranking_text", None),
        ("from 2020 or later", "constraint", "year"),
        ("tagged parts", "constraint", "tags"),
    ]
    r = CliRunner().invoke(app, ["plan", docs, "vaccine papers tagged freezers", "--home", str(rl_home)])
    assert r.exit_code == 0, r.output
    assert "not understood" in r.stdout and "clarification needed about 'tagged freezers'" in r.stdout


# -- generic typed fields ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("since 2019", {"field": "year", "op": ">=", "value": 2019}),
        ("papers from 2020 or later", {"field": "year", "op": ">=", "value": 2020}),
        ("published after 2018", {"field": "year", "op": ">", "value": 2018}),
        ("before 2015", {"field": "year", "op": "<", "value": 2015}),
        ("until 2015", {"field": "year", "op": "<=", "value": 2015}),
        ("2016 or earlier", {"field": "year", "op": "<=", "value": 2016}),
        ("in 2020", {"field": "year", "op": "=", "value": 2020}),
        ("year >= 2021", {"field": "year", "op": ">=", "value": 2021}),
        ("between 2018 and 2020", {"field": "year", "op": "between", "value": [2018, 2020]}),
        ("from 2018 to 2020", {"field": "year", "op": "between", "value": [2018, 2020]}),
        ("tagged biology", {"field": "tags", "op": "has", "value": "biology"}),
        ("with tag vaccines", {"field": "tags", "op": "has", "value": "vaccines"}),
        ("tags: parts", {"field": "tags", "op": "has", "value": "parts"}),
    ],
)
def test_typed_field_phrases_on_any_collection(request_text: str, expected: dict[str, Any]) -> None:
    plan = extract_plan(request_text, DOCS)
    assert (plan.kind, plan.filter) == ("answer", expected), plan.summary()
    assert_partition(request_text, plan)


@pytest.mark.parametrize(
    ("field", "request_text", "expected"),
    [
        ("published:date", "since 2019", {"field": "published", "op": ">=", "value": "2019-01-01"}),
        ("published:date", "after 2019", {"field": "published", "op": ">=", "value": "2020-01-01"}),
        ("published:date", "2019 or earlier", {"field": "published", "op": "<", "value": "2020-01-01"}),
        ("published:date", "in 2019", {"field": "published", "op": "between", "value": ["2019-01-01", "2019-12-31"]}),
        ("seen:timestamp", "before 2019", {"field": "seen", "op": "<", "value": "2019-01-01T00:00:00Z"}),
        ("published:date", "since 2021-03-01", {"field": "published", "op": ">=", "value": "2021-03-01"}),
        ("published:date", "on or before 2021-03-01", {"field": "published", "op": "<", "value": "2021-03-02"}),
        ("published:date", "on 2021-03-01", {"field": "published", "op": "=", "value": "2021-03-01"}),
        (
            "seen:timestamp",
            "in 2020",
            {"field": "seen", "op": "between", "value": ["2020-01-01T00:00:00Z", "2020-12-31T23:59:59.999999Z"]},
        ),
    ],
)
def test_year_phrases_on_date_fields_compare_whole_years(field: str, request_text: str, expected: Any) -> None:
    plan = validate_plan(extract_plan(request_text, build_schema([field])), build_schema([field]))
    assert plan.filter == expected


def test_a_day_on_a_year_field_is_a_question() -> None:
    plan = extract_plan("papers since 2021-03-01", DOCS)
    assert (plan.kind, plan.phrase) == ("clarification_request", "since 2021-03-01")
    assert (
        plan.question
        == "'since 2021-03-01' names a day, but year holds years. Which year should it be (e.g. 'since 2021')?"
    )


def test_two_fields_that_hold_years_make_a_question_unless_a_cue_names_one() -> None:
    schema = build_schema(["year:int", "updated:date"])
    plan = extract_plan("papers since 2019", schema)
    assert (plan.kind, plan.phrase) == ("clarification_request", "since 2019")
    assert plan.question == (
        "'since 2019' could be a condition on any of year, updated. Which one do you mean (e.g. 'year since 2019')?"
    )
    plan = extract_plan("papers updated since 2019", schema)
    assert plan.filter == {"field": "updated", "op": ">=", "value": "2019-01-01"}


def test_a_year_condition_without_a_year_field_is_a_question() -> None:
    plan = extract_plan("python developers since 2019", RESUMES)
    assert (plan.kind, plan.phrase) == ("clarification_request", "since 2019")
    assert plan.question is not None and plan.question.startswith(
        "'since 2019' is a condition on a date, but no field holds a year or a date (fields: years_experience, "
    )
    assert_partition("python developers since 2019", plan)


def test_either_or_years_cannot_be_two_hard_constraints() -> None:
    plan = extract_plan("papers before 2015 or after 2020", DOCS)
    assert (plan.kind, plan.phrase) == ("clarification_request", "before 2015 or after 2020")


def test_a_bare_year_is_asked_about_where_a_field_holds_years_and_ranked_elsewhere() -> None:
    plan = extract_plan("vaccine 2020", DOCS)
    assert (plan.kind, plan.phrase) == ("clarification_request", "2020")
    assert _roles(plan) == [("vaccine", "ranking_text"), ("2020", "not_understood")]
    plan = extract_plan("python 3 developers", RESUMES)
    assert (plan.kind, plan.ranking_text) == ("answer", "3 developers")


def test_a_named_field_with_an_unknown_value_is_a_question() -> None:
    plan = extract_plan("papers tagged freezers", DOCS)
    assert (plan.kind, plan.phrase) == ("clarification_request", "tagged freezers")
    assert plan.question == (
        "'tagged freezers' names the field tags, but 'freezers' is not one of its 3 known values "
        "(biology, parts, vaccines). Which value did you mean?"
    )
    # With no known values (nothing stored yet, or too many to list) the field's own name makes it certain.
    plan = extract_plan("papers tagged freezers", build_schema(DOCS_FIELDS))
    assert plan.filter == {"field": "tags", "op": "has", "value": "freezers"}


PRODUCTS = build_schema(
    ["price:float", "in_stock:bool", "brand:keyword", "rating:int", "released:date"], {"brand": ["acme", "globex"]}
)


def test_every_field_type_on_a_catalogue() -> None:
    request = "acme drills under 50 dollars, in stock, rating at least 4, released since 2022"
    plan = extract_plan(request, PRODUCTS)
    assert plan.filter == {
        "and": [
            {"field": "brand", "op": "=", "value": "acme"},
            {"field": "price", "op": "<", "value": 50},
            {"field": "in_stock", "op": "=", "value": True},
            {"field": "rating", "op": ">=", "value": 4},
            {"field": "released", "op": ">=", "value": "2022-01-01"},
        ]
    }
    assert [(p.phrase, p.role) for p in plan.parts] == [
        ("acme", "constraint"),
        ("drills", "ranking_text"),
        ("under 50 dollars", "constraint"),
        ("in stock", "constraint"),
        ("rating at least 4", "constraint"),
        ("released since 2022", "constraint"),
    ]
    assert_partition(request, plan)


def test_a_vague_word_asks_about_the_collections_own_field() -> None:
    plan = extract_plan("cheap drills", PRODUCTS)
    assert (
        plan.question == "'cheap' has no exact meaning. What is the highest price to accept (e.g. 'price under 80k')?"
    )
    plan = extract_plan("drills near the office", PRODUCTS)
    assert plan.question == (
        "'near the office' is a requirement that no typed field records (fields: price, in_stock, brand, rating, "
        "released). Should it be ranking text, or dropped?"
    )


# -- requirements on attributes the schema lacks ---------------------------------------------------------


@pytest.mark.parametrize(
    ("request_text", "phrase", "why"),
    [
        ("python developers with a security clearance", "security clearance", "no typed field records a security"),
        ("java engineer, AWS certification", "certification", "certifications are not a typed field"),
        ("nurses available for night shifts", "available for night shifts", "no typed field records shift"),
        ("python developer with a driving license", "driving license", "no typed field records licences"),
        ("python dev who can start next week", "who can start next week", "is a start date, and no field records"),
        ("go developers who hold a PMP", "PMP", "is stated as a requirement, but it is not a value"),
        ("python developers since 2019", "since 2019", "no field holds a year or a date"),
        ("python dev who speaks klingon", "speaks klingon", "'klingon' is not one of its 13 known values"),
    ],
)
def test_a_requirement_the_schema_cannot_express_is_a_question(request_text: str, phrase: str, why: str) -> None:
    plan = validate_plan(extract_plan(request_text, RESUMES), RESUMES)
    assert (plan.kind, plan.phrase) == ("clarification_request", phrase), plan.summary()
    assert plan.question is not None and why in plan.question and plan.question.endswith("?")
    [part] = [p for p in plan.parts if p.role == "not_understood"]
    assert (part.phrase, part.question) == (phrase if phrase != "PMP" else "hold a PMP", plan.question)
    assert_partition(request_text, plan)


def test_start_next_week_is_not_silently_a_notice_period() -> None:
    # notice_days exists, but "start next week" is a date, not a notice period: the planner asks.
    assert RESUMES.field("notice_days") is not None
    plan = extract_plan("react developer who can start next week", RESUMES)
    assert plan.kind == "clarification_request" and "notice period" in (plan.question or "")
    assert "next" not in plan.ranking_text


# -- validation, refusals, protected words ----------------------------------------------------------------


def test_a_constraint_that_fails_validation_turns_its_part_into_a_question() -> None:
    plan = extract_plan("tagged freezers, since 2019", build_schema(DOCS_FIELDS))
    assert plan.kind == "answer"
    out = validate_plan(plan, DOCS)  # the live schema knows the tags, and "freezers" is not one
    assert out.kind == "clarification_request"
    assert [(p.phrase, p.role) for p in out.parts] == [
        ("tagged freezers", "not_understood"),
        ("since 2019", "constraint"),
    ]
    assert out.parts[0].question == out.question


def test_refusals_carry_no_parts_and_disclaimers_are_ignored_not_ranked() -> None:
    assert extract_plan("young python developers", RESUMES).parts == []
    request = "python developers, regardless of gender or age"
    plan = extract_plan(request, RESUMES)
    assert plan.kind == "answer"
    assert [(p.phrase, p.role) for p in plan.parts] == [
        ("python", "constraint"),
        ("developers", "ranking_text"),
        ("regardless of gender or age", "ignored"),
    ]
    assert find_protected(plan.query_text()) is None
    assert_partition(request, plan)


def test_an_llm_plan_without_parts_still_validates() -> None:
    plan = Plan(kind="answer", request="r", constraints=[Constraint(field="year", op=">=", value=2020)])
    assert validate_plan(plan, DOCS).parts == []


# -- the partition, over the labelled sets and generated requests -----------------------------------------


LABELLED = [e for f in sorted(DATA.glob("plan_requests*.yaml")) for e in load_labelled(f) if e["kind"] != "refusal"]
TYPED = load_labelled(DATA / "plan_requests_typed.yaml")


@pytest.mark.parametrize("entry", TYPED, ids=[e["request"][:50] for e in TYPED])
def test_typed_field_and_missing_attribute_labels(entry: dict[str, Any]) -> None:
    plan, problems = score_entry(entry)
    assert problems == [], plan.model_dump_json(indent=1)


@pytest.mark.parametrize("entry", LABELLED, ids=[e["request"][:50] for e in LABELLED])
def test_every_labelled_request_is_partitioned(entry: dict[str, Any]) -> None:
    schema = SCHEMAS[entry.get("schema", "resumes")]
    plan = validate_plan(extract_plan(entry["request"], schema), schema)
    assert_partition(entry["request"], plan)


_DOC_FRAGMENTS = st.one_of(
    st.sampled_from(["vaccine papers", "papers about freezers", "reviews", "cold chain logistics", "mrna"]),
    st.builds(
        lambda w, y: f"{w} {y}",
        st.sampled_from(["since", "after", "before", "until", "in", "from"]),
        st.integers(1950, 2030),
    ),
    st.integers(1950, 2030).map(lambda y: f"{y} or later"),
    st.tuples(st.integers(1990, 2010), st.integers(2011, 2030)).map(lambda t: f"between {t[0]} and {t[1]}"),
    st.sampled_from(["parts", "biology", "vaccines", "freezers", "labs"]).map(lambda t: f"tagged {t}"),
    st.sampled_from(["parts", "biology"]).map(lambda t: f"with tag {t}"),
    st.sampled_from(["ideally biology", "no parts", "not before 2001", "must be peer reviewed", "top 10 journals"]),
    st.sampled_from(["with a security clearance", "available for night shifts", "near the office", "2020"]),
)
_RESUME_FRAGMENTS = st.one_of(
    st.sampled_from(["python", "go developers", "in berlin", "no agency recruiters", "kubernetes a plus", "remote"]),
    st.integers(1, 12).map(lambda n: f"{n}+ years of experience"),
    st.sampled_from(["salary under 90k", "notice under 30 days", "who can start next week", "master's or higher"]),
    st.sampled_from(["with a driving license", "regardless of gender", "team lead", "since 2019", "python 3"]),
)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["docs", "resumes"]).flatmap(
        lambda s: st.tuples(
            st.just(s), st.lists(_DOC_FRAGMENTS if s == "docs" else _RESUME_FRAGMENTS, min_size=1, max_size=5)
        )
    ),
    st.sampled_from([", ", " and ", "; ", " ", " ,\n  "]),
    st.sampled_from(["", "find me ", "we're looking for "]),
)
def test_every_content_word_lands_in_exactly_one_part(generated: tuple[str, list[str]], sep: str, opening: str) -> None:
    which, fragments = generated
    schema = DOCS if which == "docs" else RESUMES
    request = opening + sep.join(fragments)
    plan = validate_plan(extract_plan(request, schema), schema)
    assert plan.kind != "refusal"
    # The parts' words equal the request's content words as ordered lists: each lands in exactly one part.
    assert_partition(request, plan)
