"""Scoring the planner against a labelled set of requests (tests/data/plan_requests.yaml).

Shared by the parametrized test and ``bench/plan_accuracy.py`` so the number
reported and the number tested are computed the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ...plan.extract import extract_plan
from ...plan.model import Plan
from ...plan.schema import PlanSchema, build_schema
from ...plan.validate import validate_plan
from .pack import PACK
from .schema import RESUME_FIELDS, resume_vocabulary

__all__ = ["SCHEMAS", "load_labelled", "score_entry"]


def _schemas() -> dict[str, PlanSchema]:
    vocab = resume_vocabulary()
    return {
        "resumes": build_schema(RESUME_FIELDS, vocab, PACK),
        "resumes_no_seniority": build_schema([f for f in RESUME_FIELDS if not f.startswith("seniority")], vocab, PACK),
        "docs": build_schema(["year:int", "tags:keyword[]"], {"tags": ["biology", "database", "search", "vectors"]}),
        "papers": build_schema(["year:int", "tags:keyword[]"], {"tags": ["biology", "parts", "reviews", "vaccines"]}),
        "dated": build_schema(["published:date", "category:keyword"], {"category": ["news", "review", "study"]}),
    }


SCHEMAS = _schemas()


def load_labelled(path: str | Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a YAML list of labelled requests")
    return data


def _canon(f: dict[str, Any]) -> str:
    return json.dumps(f, sort_keys=True)


def score_entry(entry: dict[str, Any]) -> tuple[Plan, list[str]]:
    """The plan for a labelled request and the list of ways it differs from the label (empty: correct)."""
    schema = SCHEMAS[entry.get("schema", "resumes")]
    plan = validate_plan(extract_plan(entry["request"], schema), schema)
    problems: list[str] = []
    if plan.kind != entry["kind"]:
        detail = plan.phrase if plan.kind != "answer" else plan.summary()
        return plan, [f"kind {plan.kind} ({detail}), expected {entry['kind']}"]
    if plan.kind == "answer":
        got = sorted(_canon(c.to_filter()) for c in plan.constraints)
        want = sorted(_canon(c) for c in entry.get("constraints") or [])
        if got != want:
            problems.append(f"constraints {got} != expected {want}")
        if "ranking_text" in entry and plan.ranking_text != entry["ranking_text"]:
            problems.append(f"ranking text {plan.ranking_text!r} != expected {entry['ranking_text']!r}")
        if "preferences" in entry:
            prefs = sorted(p.value for p in plan.preferences if p.kind == "preferred_value")
            if prefs != sorted(entry["preferences"]):
                problems.append(f"preferences {prefs} != expected {sorted(entry['preferences'])}")
    elif plan.kind == "clarification_request":
        if str(entry["phrase"]).lower() not in (plan.phrase or "").lower():
            problems.append(f"phrase {plan.phrase!r} does not contain {entry['phrase']!r}")
        if not plan.question or not plan.question.strip().endswith("?"):
            problems.append(f"question {plan.question!r} is not a question")
    else:
        if plan.attribute != entry["attribute"]:
            problems.append(f"attribute {plan.attribute!r} != expected {entry['attribute']!r}")
        if not plan.reason:
            problems.append("refusal without a reason")
    return plan, problems
