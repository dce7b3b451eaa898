"""Typed hard constraints compiled to SQL predicates.

A filter is given either as an expression string or in the equivalent
structured form (Python / JSON).  It compiles to a :class:`CompiledFilter`: a
``psycopg.sql`` predicate over the chunk table alias ``c`` with every value
bound as a named parameter (``%(f0)s``, ``%(f1)s``, ...), placed identically
in both branches of the hybrid statement.

Expression syntax (keywords are case-insensitive)::

    years_exp >= 5 and skills has "python"
    location in ("Berlin", 'Lisbon') or not (remote = true)
    years_exp between 3 and 7            -- inclusive on both ends
    skills has all ("python", "sql")     skills has any ("go", "rust")
    hired is null                        hired is not null
    start_date >= "2024-01-01"           -- dates and timestamps as strings

Structured form (``parse_filter`` turns the first into the second)::

    {"and": [f, ...]}   {"or": [f, ...]}   {"not": f}
    {"field": "years_exp", "op": ">=", "value": 5}

with ``op`` one of ``= != < <= > >= in between has has_all has_any is_null
is_not_null`` (``parse.SYNTAX`` declares them with their expression spellings); ``in``, ``has_all`` and ``has_any`` take a non-empty list,
``between`` takes ``[low, high]``, the null checks take no value.  A list of
filters is an implicit ``and``.

Semantics, chosen so that ``not`` is always the exact complement:

* a comparison on a missing (null) value is false, so ``years_exp != 5``
  does not match a document without ``years_exp``; ``not (years_exp = 5)``
  does (``not f`` compiles to ``(f) IS NOT TRUE``);
* keyword and keyword-list values match exactly, case-sensitively, as they
  were stored: ``"Python"`` and ``"python"`` are different skills.  Normalise
  case in the documents' metadata at ingest when it should not matter;
* an empty keyword list is a value, not null: ``skills is null`` matches only
  documents whose metadata has no ``skills``;
* keyword fields support ``= != in`` and the null checks (no ``<``: string
  order depends on the database collation); bool fields ``= != in``.

Field names are checked against the collection's declared fields and quoted
as identifiers; values are coerced to the field's type and bound, so neither
can change the statement's structure.
"""

from .compile import OPS_BY_TYPE, CompiledFilter, compile_filter, normalize_filter
from .parse import OPERATORS, SYNTAX, format_filter, parse_filter

__all__ = [
    "OPERATORS",
    "OPS_BY_TYPE",
    "SYNTAX",
    "CompiledFilter",
    "compile_filter",
    "format_filter",
    "normalize_filter",
    "parse_filter",
]
