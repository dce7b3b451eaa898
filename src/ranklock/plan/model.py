"""The plan a structured request becomes: an answer, a clarification request, or a refusal."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["OPS", "PART_ROLES", "Constraint", "Part", "PartRole", "Plan", "PlanKind", "Preference"]

PlanKind = Literal["answer", "clarification_request", "refusal"]

#: Where a phrase of the request went (see :class:`Part`).
PartRole = Literal["constraint", "preference", "ranking_text", "not_understood", "ignored"]
PART_ROLES: tuple[str, ...] = ("constraint", "preference", "ranking_text", "not_understood", "ignored")

#: The operators of the structured filter form (see ranklock.search.filters).
OPS: tuple[str, ...] = (
    "=",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "between",
    "has",
    "has_all",
    "has_any",
    "is_null",
    "is_not_null",
)


class Constraint(BaseModel):
    """One hard constraint on one typed field; it becomes a SQL predicate and removes candidates."""

    field: str
    op: str
    value: Any = None
    negate: bool = Field(False, description="True: the candidate must NOT satisfy field-op-value.")
    phrase: str = Field("", description="The words of the request this constraint was read from.")

    def to_filter(self) -> dict[str, Any]:
        """This constraint in the structured filter form, e.g. ``{"field": "years_experience", "op": ">=", "value": 5}``."""
        base: dict[str, Any] = {"field": self.field, "op": self.op}
        if self.op not in ("is_null", "is_not_null"):
            base["value"] = self.value
        return {"not": base} if self.negate else base


class Preference(BaseModel):
    """A soft preference: it can move a candidate up or down, never remove one."""

    kind: Literal["ranking_text", "preferred_value"]
    value: str
    field: str | None = None
    phrase: str = ""


class Part(BaseModel):
    """One phrase of the request and the one place it went.

    The parts of a plan partition the request: every word that is not a stop
    word (:data:`ranklock.plan.partition.STOP_WORDS`) or part of the opening
    ("find me", "we are looking for") lies in exactly one part.
    ``constraint``: it became (part of) hard constraint ``constraint`` (an index
    into ``Plan.constraints``; ``predicate`` spells it out).  ``preference``: a
    soft preference, ranking only.  ``ranking_text``: words the ranker sees.
    ``not_understood``: a requirement the schema cannot express or a word whose
    meaning is not certain; ``question`` asks about it, and the plan is a
    ``clarification_request``.  ``ignored``: understood and deliberately without
    effect, e.g. "regardless of gender" (``note`` says why).
    """

    phrase: str
    role: PartRole
    start: int = Field(description="Offset of the phrase's first character in the request.")
    end: int = Field(description="Offset just after the phrase's last character in the request.")
    field: str | None = None
    predicate: str | None = Field(None, description="Constraints: the predicate, e.g. 'year >= 2020'.")
    constraint: int | None = Field(
        None,
        description="Constraints: index into the plan's constraints (in a clarification request, which has "
        "none, the index the constraint would have had).",
    )
    question: str | None = None
    note: str | None = None


class Plan(BaseModel):
    """What a request means for one collection.

    ``answer``: ``constraints`` (hard, SQL) plus ``ranking_text`` and ``preferences`` (soft).
    ``clarification_request``: ``phrase`` maps to no typed field; ``question`` asks what to do.
    ``refusal``: ``phrase`` selects or ranks on ``attribute`` (a protected attribute or a proxy);
    ``reason`` says why and what may be asked instead.
    """

    kind: PlanKind
    request: str
    collection: str | None = None
    constraints: list[Constraint] = Field(default_factory=list)
    ranking_text: str = ""
    preferences: list[Preference] = Field(default_factory=list)
    phrase: str | None = None
    question: str | None = None
    reason: str | None = None
    attribute: str | None = None
    extractor: str = "rules"
    parts: list[Part] = Field(
        default_factory=list,
        description="Which phrase of the request went where (empty for refusals and for extractors that do not say).",
    )

    @property
    def filter(self) -> dict[str, Any] | None:
        """The hard constraints as one structured filter (``None`` when there are none)."""
        if not self.constraints:
            return None
        parts = [c.to_filter() for c in self.constraints]
        return parts[0] if len(parts) == 1 else {"and": parts}

    def query_text(self) -> str:
        """The text the ranker sees: ranking text plus preferred values; never a protected term.

        When the request is all constraints, the positive constraint phrases stand in,
        so the search still has words to rank by (every candidate satisfies them anyway).
        """
        parts = [self.ranking_text.strip()] + [p.value for p in self.preferences if p.kind == "preferred_value"]
        text = " ".join(p for p in parts if p)
        if not text:
            text = " ".join(c.phrase for c in self.constraints if not c.negate and c.phrase)
        return text

    def summary(self) -> str:
        """One readable paragraph: what will be filtered, ranked, asked or refused."""
        if self.kind == "refusal":
            return f"refused: {self.phrase!r} ({self.attribute}). {self.reason}"
        if self.kind == "clarification_request":
            return f"clarification needed about {self.phrase!r}: {self.question}"
        cons = "; ".join(_describe(c) for c in self.constraints) or "none"
        prefs = ", ".join(p.value for p in self.preferences) or "none"
        return f"hard constraints: {cons}. Ranking text: {self.ranking_text or '(none)'!r}. Preferences: {prefs}."


def describe_constraint(c: Constraint) -> str:
    """``c`` as one readable predicate, e.g. ``year >= 2020`` or ``NOT skills has 'php'``."""
    return _describe(c)


def _describe(c: Constraint) -> str:
    value = "" if c.op in ("is_null", "is_not_null") else f" {c.value!r}"
    return f"{'NOT ' if c.negate else ''}{c.field} {c.op}{value}"
