"""The journal domain pack: the journal's fields need no hint beyond their names and stored values.

It is named so that the planner's schema cache and ``ranklock.domains.pack_for``
say which domain a journal collection belongs to.
"""

from __future__ import annotations

from ...collection import parse_field_spec
from ...plan.pack import DomainPack
from .schema import JOURNAL_FIELDS

__all__ = ["PACK"]

PACK = DomainPack("journal", signature=frozenset(parse_field_spec(f).name for f in JOURNAL_FIELDS))
