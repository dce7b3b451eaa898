"""What a domain tells the planner: field hints, closed vocabularies, extra protected rules.

The planner is generic: it reads a collection's declared fields and the values
stored in its active snapshot.  What it knows beyond that about one kind of
collection (resumes: "golang" is "go", degrees are ordered, "experience"
announces ``years_experience``) comes in a :class:`DomainPack`, handed over by
whoever calls it (the :class:`~ranklock.Engine` picks one with
``ranklock.domains.pack_for``).  The planner never imports a domain.

A pack can *add* protected-attribute rules; it can never remove the general ones
of :mod:`ranklock.plan.protected`, which apply to every collection whatever its pack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["GENERIC", "Concept", "DomainPack", "FieldHints", "concept"]


@dataclass(frozen=True)
class FieldHints:
    """Optional knowledge about a field, looked up by field name."""

    cues: tuple[str, ...] = ()  # words that announce the field in a request
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # value -> other spellings
    ordinal: tuple[str, ...] = ()  # values from lowest to highest ("at least a master")
    unit: str | None = None  # "years", "days", "money": what a number in this field counts
    bare_op: str = "="  # what "5 years" alone means for this field
    true_cues: tuple[str, ...] = ()  # bool fields: regexes meaning True
    value_cues: tuple[str, ...] = ()  # words after which the next word is certainly a value of this field


@dataclass(frozen=True)
class Concept:
    """A requirement that reads like a filter but names something no typed field holds: it becomes a question."""

    name: str
    pattern: re.Pattern[str]
    question: str  # {phrase}, {fields} and {field} (the field of unit `needs`) are filled in
    fields: tuple[str, ...] = ()  # fields that would express it if the schema had them
    needs: str | None = None  # the question suggests a field: of this unit ("years", "days", "money") or name
    extend: bool = False  # the phrase runs on to the end of its scope ("near *the office*")


def concept(
    name: str,
    pattern: str,
    question: str,
    fields: tuple[str, ...] = (),
    needs: str | None = None,
    *,
    extend: bool = False,
) -> Concept:
    """A :class:`Concept` whose ``pattern`` matches case-insensitively."""
    return Concept(name, re.compile(pattern, re.IGNORECASE), question, fields, needs, extend)


@dataclass(frozen=True)
class DomainPack:
    """One domain's knowledge for the planner; :data:`GENERIC` knows nothing beyond the fields.

    >>> DomainPack("resumes", signature=frozenset({"skills"})).fits(["skills", "year"])
    True
    >>> GENERIC.fits([])
    True
    """

    #: "generic", "resumes", "journal": part of the planner's schema cache key.
    name: str
    #: Field names a collection must declare to get this pack (all of them).
    signature: frozenset[str] = frozenset()
    #: Closed vocabularies of keyword fields, by field name: known even before a value is stored.
    vocabulary: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: Hints by field name (cue words, aliases, order of values, units).
    hints: Mapping[str, FieldHints] = field(default_factory=dict)
    #: Extra requirements no field expresses, asked about after the general ones.
    concepts: tuple[Concept, ...] = ()
    #: Extra (attribute, regex) protected-attribute rules, checked after the general ones.
    protected: tuple[tuple[str, str], ...] = ()

    def fits(self, field_names: Iterable[str]) -> bool:
        """Whether a collection with ``field_names`` declares every field of the signature."""
        return self.signature <= set(field_names)

    def hint(self, field_name: str) -> FieldHints:
        """The hints for ``field_name``; none when the pack has none."""
        return self.hints.get(field_name) or FieldHints()


#: The pack of a collection no domain claims: its fields and stored values only.
GENERIC = DomainPack("generic")
