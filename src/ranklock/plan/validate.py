"""Validation every plan passes through, whichever extractor proposed it.

A constraint must name a declared field, use an operator valid for the
field's type, and carry a value of that type (a keyword value from the
field's vocabulary when one is known).  A plan that fails is not executed:
it becomes a ``clarification_request`` naming the offending phrase.  A request
that touches a protected attribute is refused here too, so an extractor can
never talk the engine into ranking on one.
"""

from __future__ import annotations

from typing import Any

from ..search.filters import OPS_BY_TYPE
from .model import Constraint, Part, Plan
from .protected import find_protected
from .schema import PlanSchema

__all__ = ["OPS_BY_TYPE", "check_constraint", "validate_plan"]


def _scalar_ok(ftype: str, v: Any) -> bool:
    if ftype in ("int", "float"):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and (ftype == "float" or v == int(v))
    if ftype == "bool":
        return isinstance(v, bool)
    if ftype in ("keyword", "keyword[]", "date", "timestamp"):
        return isinstance(v, str) and v != ""
    return False


def check_constraint(c: Constraint, schema: PlanSchema) -> str | None:
    """Why ``c`` cannot run against ``schema``, or None when it can."""
    spec = schema.field(c.field)
    if spec is None:
        return (
            f"{c.phrase or c.field!r} maps to no typed field ({c.field!r} is not declared; fields: "
            f"{', '.join(sorted(schema.names()))})"
        )
    ops = OPS_BY_TYPE[spec.type]
    if c.op not in ops:
        return f"operator {c.op!r} does not apply to {c.field} ({spec.type}); valid: {', '.join(ops)}"
    if c.op in ("is_null", "is_not_null"):
        return None
    if c.op in ("in", "has_all", "has_any", "between"):
        if not isinstance(c.value, list) or not c.value:
            return f"{c.field} {c.op} needs a non-empty list, got {c.value!r}"
        if c.op == "between" and len(c.value) != 2:
            return f"{c.field} between needs [low, high], got {c.value!r}"
        values = c.value
    else:
        values = [c.value]
    for v in values:
        if not _scalar_ok(spec.type, v):
            return f"{c.field} ({spec.type}) cannot hold {v!r}"
    vocab = schema.vocab.get(c.field)
    if vocab and spec.type in ("keyword", "keyword[]"):
        unknown = sorted({str(v) for v in values} - set(vocab))
        if unknown:
            return f"{', '.join(map(repr, unknown))} is not a known value of {c.field}"
    return None


def validate_plan(plan: Plan, schema: PlanSchema) -> Plan:
    """``plan`` if it can run against ``schema``; otherwise the refusal or clarification it must become."""
    hit = find_protected(plan.request, schema.pack.protected)
    if hit is not None:
        return _refusal(plan, hit)
    if plan.kind != "answer":
        return plan
    # Soft text reaches the ranker, so it is held to the same bar as the request.
    for text in [plan.ranking_text, *(p.value for p in plan.preferences)]:
        hit = find_protected(text, schema.pack.protected)
        if hit is not None:
            return _refusal(plan, hit)
    for i, c in enumerate(plan.constraints):
        problem = check_constraint(c, schema)
        if problem is not None:
            question = f"{problem}. Which typed field and value did you mean?"
            return Plan(
                kind="clarification_request",
                request=plan.request,
                collection=plan.collection,
                phrase=c.phrase or c.field,
                extractor=plan.extractor,
                question=question,
                parts=[_unplaced(p, i, question) for p in plan.parts],
            )
    return plan


def _unplaced(part: Part, index: int, question: str) -> Part:
    """``part`` as it stands once constraint ``index`` cannot run: its phrase is now a question."""
    if part.role != "constraint" or part.constraint != index:
        return part
    return Part(phrase=part.phrase, role="not_understood", start=part.start, end=part.end, question=question)


def _refusal(plan: Plan, hit: Any) -> Plan:
    """The refusal ``plan`` becomes when ``hit`` (a protected attribute or proxy) was found in it."""
    return Plan(
        kind="refusal",
        request=plan.request,
        collection=plan.collection,
        phrase=hit.phrase,
        attribute=hit.attribute,
        reason=hit.reason,
        extractor=plan.extractor,
    )
