"""Structured requests: a request becomes a plan that answers, asks a clarifying question, or refuses.

>>> from ranklock.plan import build_schema, extract_plan
>>> schema = build_schema(["skills:keyword[]", "years_experience:float"], {"skills": ["python", "go"]})
>>> extract_plan("python, 2+ years, no Go", schema).filter
{'and': [{'field': 'skills', 'op': 'has', 'value': 'python'}, {'field': 'years_experience', 'op': '>=', 'value': 2}, {'not': {'field': 'skills', 'op': 'has', 'value': 'go'}}]}
"""

from __future__ import annotations

from .evaluate import matches
from .extract import RuleExtractor, extract_plan
from .llm import LLMExtractor
from .model import Constraint, Part, Plan, Preference
from .protected import find_protected
from .schema import PlanSchema, build_schema
from .validate import check_constraint, validate_plan

__all__ = [
    "Constraint",
    "LLMExtractor",
    "Part",
    "Plan",
    "PlanSchema",
    "Preference",
    "RuleExtractor",
    "build_schema",
    "check_constraint",
    "extract_plan",
    "find_protected",
    "matches",
    "validate_plan",
]
