"""Typed hard constraints compiled to SQL predicates.

A filter is given either as an expression string (``years_exp >= 5 and
skills has "python"``) or in the equivalent structured form.  It compiles to
a :class:`CompiledFilter`: a ``psycopg.sql`` predicate over the chunk table
alias ``c`` with every value bound as a named parameter, placed identically in
both branches of the hybrid statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from ..collection import CollectionInfo
from ..errors import FilterError

__all__ = ["CompiledFilter", "compile_filter"]


@dataclass
class CompiledFilter:
    sql: sql.Composable
    params: dict[str, Any] = field(default_factory=dict)


def compile_filter(coll: CollectionInfo, spec: Any) -> CompiledFilter:
    """Compile ``spec`` against the collection's declared fields."""
    raise FilterError("filters are not supported yet")
