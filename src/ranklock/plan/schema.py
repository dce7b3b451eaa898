"""What the planner knows about a collection: its typed fields, their vocabularies and cue words.

Everything is derived from the collection's declared fields and from the
:class:`~ranklock.plan.pack.DomainPack` the caller hands over: the resume pack
adds hints for its well-known field names (aliases such as "golang" for "go",
the order of degrees, the words that announce a field: "experience" for
``years_experience``).  A collection with other fields (the generic pack) gets
cue words from its field names and vocabularies from the values stored in its
active snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..collection import FieldSpec, parse_field_spec
from .pack import GENERIC, DomainPack, FieldHints
from .vocab import ValueTable, value_table

__all__ = ["FieldHints", "PlanSchema", "build_schema"]


# Verb forms that announce a value of a field named for the noun: "tagged parts", "labelled urgent".
_VERB_FORMS: dict[str, list[str]] = {
    "tag": ["tagged"],
    "label": ["labelled", "labeled"],
    "category": ["categorised", "categorized"],
}


def _unit_from_name(name: str) -> str | None:
    words = set(name.split("_"))
    # Only the plural names a duration: "years_experience" counts years, "year" is a calendar year.
    for unit in ("years", "months", "weeks", "days", "hours"):
        if unit in words:
            return unit
    if words & {"salary", "price", "cost", "pay", "budget", "revenue", "amount"}:
        return "money"
    return None


@dataclass
class PlanSchema:
    """The planner's view of one collection."""

    fields: list[FieldSpec]
    vocab: dict[str, list[str]]
    hints: dict[str, FieldHints]
    tables: dict[str, ValueTable] = field(default_factory=dict)
    #: The domain pack the schema was built with (its extra protected rules apply to every plan).
    pack: DomainPack = GENERIC

    def field(self, name: str) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)

    def cues(self, name: str) -> tuple[str, ...]:
        """Words that announce field ``name``: its hints, the words of its name and (keyword fields) their forms."""
        h = self.hints[name].cues
        words = tuple(w for w in name.split("_") if len(w) > 2)
        return tuple(dict.fromkeys((*h, *words, name.replace("_", " "), *self.name_cues(name))))

    def name_cues(self, name: str) -> tuple[str, ...]:
        """For a keyword field, the words of its name in singular, plural and verb form.

        Only these make a mapping *certain*: "tagged X" and "with tag X" name field ``tags``
        because the words are the field's own name.

        >>> build_schema(["tags:keyword[]"]).name_cues("tags")
        ('tags', 'tag', 'tagged')
        """
        spec = self.field(name)
        if spec is None or spec.type not in ("keyword", "keyword[]"):
            return ()
        # A name of several words is announced by all of them ("employer type"): one of its words
        # alone ("work" of work_authorization) is ordinary English, not the field.
        *head, w = name.split("_")
        if len(w) <= 2:
            return ()
        stem = w[:-3] + "y" if w.endswith("ies") else w[:-1] if w.endswith("s") and not w.endswith("ss") else w
        forms = [w, stem, stem[:-1] + "ies" if stem.endswith("y") else stem + "s", *_VERB_FORMS.get(stem, [])]
        return tuple(dict.fromkeys(" ".join([*head, f]) for f in forms))

    def unit(self, name: str) -> str | None:
        return self.hints[name].unit or _unit_from_name(name)

    def bare_op(self, name: str) -> str:
        return self.hints[name].bare_op

    def names(self) -> list[str]:
        return [f.name for f in self.fields]


def build_schema(
    fields: Sequence[str | FieldSpec], vocab: Mapping[str, Iterable[str]] | None = None, pack: DomainPack = GENERIC
) -> PlanSchema:
    """The planner's schema for ``fields`` with the given vocabularies (keyword fields) and domain ``pack``.

    >>> s = build_schema(["skills:keyword[]", "years_experience:float"], {"skills": ["python"]})
    >>> s.unit("years_experience"), s.vocab["skills"]
    ('years', ['python'])
    """
    specs = [f if isinstance(f, FieldSpec) else parse_field_spec(f) for f in fields]
    hints = {f.name: pack.hint(f.name) for f in specs}
    voc: dict[str, list[str]] = {}
    tables: dict[str, ValueTable] = {}
    for f in specs:
        if f.type not in ("keyword", "keyword[]"):
            continue
        values = sorted({str(v).strip().lower() for v in (vocab or {}).get(f.name, ()) if str(v).strip()})
        values = [v for v in values if re.search(r"\w", v)]
        voc[f.name] = values
        aliases = {k: v for k, v in hints[f.name].aliases.items() if k in values}
        tables[f.name] = value_table(values, aliases)
    return PlanSchema(specs, voc, hints, tables, pack)
