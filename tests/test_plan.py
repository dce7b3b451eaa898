"""The planner: labelled requests, units, negation, validation, the LLM extractor against a local fake server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranklock import ConfigError, QueryError
from ranklock.domains.resumes.labelled import SCHEMAS, load_labelled, score_entry
from ranklock.domains.resumes.schema import LOCATIONS, SKILLS
from ranklock.plan import (
    Constraint,
    LLMExtractor,
    Plan,
    build_schema,
    check_constraint,
    extract_plan,
    find_protected,
    matches,
    validate_plan,
)

LABELLED = load_labelled(Path(__file__).parent / "data" / "plan_requests.yaml")
RESUMES = SCHEMAS["resumes"]


def test_labelled_set_covers_the_three_outcomes() -> None:
    kinds = [e["kind"] for e in LABELLED]
    assert len(LABELLED) >= 60
    assert {k: kinds.count(k) >= 10 for k in ("answer", "clarification_request", "refusal")} == {
        "answer": True,
        "clarification_request": True,
        "refusal": True,
    }
    requests = " | ".join(e["request"].lower() for e in LABELLED)
    for feature in ("no agency", "months", "2+ years", "between", " or ", "neither", "a plus"):
        assert feature in requests


@pytest.mark.parametrize("entry", LABELLED, ids=[e["request"][:50] for e in LABELLED])
def test_planner_matches_label(entry: dict[str, Any]) -> None:
    plan, problems = score_entry(entry)
    assert problems == [], plan.model_dump_json(indent=1)


def test_same_request_same_plan() -> None:
    for e in LABELLED[:30]:
        schema = SCHEMAS[e.get("schema", "resumes")]
        assert (
            extract_plan(e["request"], schema).model_dump_json() == extract_plan(e["request"], schema).model_dump_json()
        )


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("6 months of experience", 0.5),
        ("18 months of experience", 1.5),
        ("2 years of experience", 2),
        ("1.5 years of experience", 1.5),
        ("half a year of experience", 0.5),
    ],
)
def test_duration_units_convert_to_the_fields_unit(request_text: str, expected: float) -> None:
    plan = extract_plan(request_text, RESUMES)
    assert [c.to_filter() for c in plan.constraints] == [{"field": "years_experience", "op": ">=", "value": expected}]


def test_integer_field_rounds_so_the_predicate_keeps_its_meaning() -> None:
    # notice_days is an integer: "at most 1 month" is 30.4 days, so at most 30 whole days.
    plan = extract_plan("notice of at most 1 month", RESUMES)
    assert plan.constraints[0].to_filter() == {"field": "notice_days", "op": "<=", "value": 30}
    plan = extract_plan("notice of at least 1 month", RESUMES)
    assert plan.constraints[0].to_filter() == {"field": "notice_days", "op": ">=", "value": 31}


def test_negation_keeps_excluded_words_out_of_the_ranking_text() -> None:
    plan = extract_plan("python developers, no agency recruiters", RESUMES)
    assert "recruiters" not in plan.query_text()
    assert "agency" not in plan.query_text()
    assert plan.filter == {
        "and": [
            {"field": "skills", "op": "has", "value": "python"},
            {"not": {"field": "employer_types", "op": "has", "value": "agency"}},
        ]
    }


def test_protected_words_never_reach_the_ranker() -> None:
    plan = extract_plan("python developers, regardless of gender, age or nationality", RESUMES)
    assert plan.kind == "answer"
    for word in ("gender", "age", "nationality"):
        assert word not in plan.query_text()


def test_refusal_names_the_phrase_and_suggests_a_job_related_alternative() -> None:
    plan = extract_plan("native German speakers with python", RESUMES)
    assert (plan.kind, plan.attribute, plan.phrase) == ("refusal", "national origin", "native German speakers")
    assert plan.reason is not None and "fluent in German" in plan.reason
    assert extract_plan("fluent in German, python", RESUMES).kind == "answer"


def test_clarification_asks_one_concrete_question() -> None:
    plan = extract_plan("python developers near the office", RESUMES)
    assert plan.kind == "clarification_request"
    assert plan.phrase == "near the office"
    assert plan.question is not None and plan.question.count("?") == 1 and "locations" in plan.question


def test_other_schema_without_the_field_asks_instead_of_ranking() -> None:
    schema = build_schema(["year:int", "tags:keyword[]"], {"tags": ["database"]})
    assert extract_plan("senior database people", schema).kind == "clarification_request"
    plan = extract_plan("database", schema)
    assert plan.filter == {"field": "tags", "op": "has", "value": "database"}


def test_validation_turns_unmappable_constraints_into_a_question() -> None:
    bad = Plan(kind="answer", request="r", constraints=[Constraint(field="height", op=">", value=180, phrase="tall")])
    out = validate_plan(bad, RESUMES)
    assert out.kind == "clarification_request" and out.phrase == "tall"
    assert out.question is not None and "not declared" in out.question
    wrong_op = Plan(kind="answer", request="r", constraints=[Constraint(field="skills", op=">", value="go")])
    assert "does not apply" in (validate_plan(wrong_op, RESUMES).question or "")
    unknown = Plan(kind="answer", request="r", constraints=[Constraint(field="skills", op="has", value="cobol")])
    assert "not a known value of skills" in (validate_plan(unknown, RESUMES).question or "")


def test_validation_refuses_protected_requests_whatever_the_extractor_says() -> None:
    sneaky = Plan(kind="answer", request="young engineers", ranking_text="engineers")
    assert validate_plan(sneaky, RESUMES).kind == "refusal"
    soft = Plan(kind="answer", request="engineers", ranking_text="engineers under 30 years old")
    assert validate_plan(soft, RESUMES).attribute == "age"


def test_reference_evaluator_null_semantics_match_the_filters_module() -> None:
    # A comparison on a missing value is false; `not` is its exact complement.
    assert not matches({"field": "years_experience", "op": ">=", "value": 1}, {})
    assert matches({"not": {"field": "years_experience", "op": ">=", "value": 1}}, {})
    assert matches({"field": "skills", "op": "is_null"}, {})


# -- the LLM extractor, against a fake OpenAI-compatible server on 127.0.0.1 ---------------------------


class _FakeLLM(BaseHTTPRequestHandler):
    answer: ClassVar[str] = "{}"
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "body": body})
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": type(self).answer}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload.encode())

    def log_message(self, *_args: Any) -> None:
        return None


@pytest.fixture
def fake_llm() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _FakeLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeLLM.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join()


def test_llm_plan_goes_through_the_same_validation(fake_llm: str) -> None:
    ext = LLMExtractor(fake_llm, "fake-model")
    _FakeLLM.answer = json.dumps(
        {
            "kind": "answer",
            "constraints": [{"field": "skills", "op": "has", "value": "python", "phrase": "python"}],
            "ranking_text": "developers",
        }
    )
    plan = validate_plan(ext.extract("python developers", RESUMES, "resumes"), RESUMES)
    assert (plan.kind, plan.extractor, plan.filter) == (
        "answer",
        "llm:fake-model",
        {"field": "skills", "op": "has", "value": "python"},
    )
    sent = _FakeLLM.seen[0]
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["temperature"] == 0
    assert "years_experience (float, unit years)" in sent["body"]["messages"][0]["content"]
    # A constraint on a field the collection does not have never runs.
    _FakeLLM.answer = json.dumps({"kind": "answer", "constraints": [{"field": "age", "op": "<", "value": 30}]})
    assert validate_plan(ext.extract("engineers", RESUMES), RESUMES).kind == "clarification_request"
    # Nor does an answer to a protected request, whatever the model says.
    _FakeLLM.answer = json.dumps({"kind": "answer", "ranking_text": "engineers"})
    assert validate_plan(ext.extract("young engineers", RESUMES), RESUMES).kind == "refusal"


def test_llm_errors_name_the_problem(fake_llm: str) -> None:
    ext = LLMExtractor(fake_llm, "fake-model")
    _FakeLLM.answer = "sure! here is your plan"
    with pytest.raises(QueryError, match="did not answer with a JSON plan"):
        ext.extract("python", RESUMES)
    _FakeLLM.answer = json.dumps({"kind": "maybe"})
    with pytest.raises(QueryError, match="malformed plan: kind"):
        ext.extract("python", RESUMES)
    with pytest.raises(ConfigError, match="cannot reach the LLM endpoint"):
        LLMExtractor("http://127.0.0.1:9/v1", "m", timeout=2).extract("python", RESUMES)


def test_llm_extractor_needs_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANKLOCK_PLAN_LLM_URL", raising=False)
    monkeypatch.delenv("RANKLOCK_PLAN_LLM_MODEL", raising=False)
    with pytest.raises(ConfigError, match="RANKLOCK_PLAN_LLM_URL"):
        LLMExtractor()


# -- properties ---------------------------------------------------------------------------------------

_FRAGMENTS = st.one_of(
    st.sampled_from(sorted(SKILLS)),
    st.sampled_from(sorted(LOCATIONS)).map(lambda c: f"in {c}"),
    st.integers(1, 15).map(lambda n: f"{n}+ years of experience"),
    st.sampled_from(
        [
            "no agency",
            "remote",
            "ideally docker",
            "backend engineer",
            "master's or higher",
            "no php",
            "not in paris",
            "salary under 80k",
            "within 2 weeks",
            "developers",
            "fluent in german",
        ]
    ),
)
_PROTECTED = st.sampled_from(
    [
        "young",
        "female",
        "native speaker",
        "no pregnant women",
        "christian",
        "under 30 years old",
        "married",
        "named Anna",
        "white candidates",
        "no disabled people",
        "German nationals",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_FRAGMENTS, min_size=1, max_size=5), st.sampled_from([", ", " and ", "; "]))
def test_answers_are_valid_and_never_rank_on_protected_words(parts: list[str], sep: str) -> None:
    request = sep.join(parts)
    plan = validate_plan(extract_plan(request, RESUMES), RESUMES)
    assert plan.model_dump_json() == validate_plan(extract_plan(request, RESUMES), RESUMES).model_dump_json()
    if plan.kind == "answer":
        assert all(check_constraint(c, RESUMES) is None for c in plan.constraints)
        assert find_protected(plan.query_text()) is None


@settings(max_examples=150, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=4), _PROTECTED, st.integers(0, 4))
def test_a_protected_phrase_anywhere_makes_a_refusal(parts: list[str], bad: str, at: int) -> None:
    parts.insert(min(at, len(parts)), bad)
    plan = validate_plan(extract_plan(", ".join(parts), RESUMES), RESUMES)
    assert plan.kind == "refusal", plan.summary()
