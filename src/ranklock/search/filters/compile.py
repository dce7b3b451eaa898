"""Filters checked against a collection and compiled to a bound SQL predicate.

:func:`normalize_filter` validates a filter (text, object or list) against
the collection's declared fields, coercing every value to its field's type;
:func:`compile_filter` turns it into a :class:`CompiledFilter`, a predicate
over alias ``c`` with every value a named parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from psycopg import sql

from ...collection import CollectionInfo, FieldSpec
from ...errors import FilterError
from ...ingest.normalize import unstorable
from ...limits import BIGINT_MAX, BIGINT_MIN, MAX_FILTER_DEPTH, MAX_FILTER_VALUES
from .parse import _COMPARISONS, _EXAMPLE, _NULL_OPS, _ORDERED, SYNTAX, _check_node_shape, _short, parse_filter, spelled

__all__ = ["OPS_BY_TYPE", "CompiledFilter", "compile_filter", "normalize_filter"]

#: Operators each field type accepts.
OPS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "int": _ORDERED,
    "float": _ORDERED,
    "date": _ORDERED,
    "timestamp": _ORDERED,
    "keyword": ("=", "!=", "in", *_NULL_OPS),
    "bool": ("=", "!=", "in", *_NULL_OPS),
    "keyword[]": ("has", "has_all", "has_any", *_NULL_OPS),
}

_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "keyword": "a string",
    "keyword[]": "a string",
    "date": "an ISO date (YYYY-MM-DD)",
    "timestamp": "an ISO 8601 timestamp with a time zone (e.g. 2026-01-31T12:00:00Z)",
}


@dataclass
class CompiledFilter:
    """A predicate over alias ``c``, its bound values, and the validated structured form."""

    sql: sql.Composable
    params: dict[str, Any] = field(default_factory=dict)
    structured: dict[str, Any] = field(default_factory=dict)
    #: The typed fields the predicate reads, sorted (the scope counts one field's values: ranklock.search.scope).
    fields: tuple[str, ...] = ()


# -- validation against the collection ------------------------------------------------


def _fields_listing(coll: CollectionInfo) -> str:
    return ", ".join(f"{f.name} ({f.type})" for f in sorted(coll.fields, key=lambda f: f.name))


def _coerce(spec: FieldSpec, value: Any) -> Any:
    """One filter value as the Python value of the field's SQL type, or FilterError."""
    t = spec.type

    def bad() -> FilterError:
        return FilterError(
            f"field {spec.name!r} is {t}: value {_short(value)} ({type(value).__name__}) is not {_EXPECTED[t]}; "
            "fix the value."
        )

    if value is None or isinstance(value, (list, dict, tuple)):
        raise bad()
    if t == "int":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
            raise bad()
        if not BIGINT_MIN <= int(value) <= BIGINT_MAX:
            raise FilterError(
                f"field {spec.name!r} is int: value {value} is out of range; int fields hold "
                f"{BIGINT_MIN} to {BIGINT_MAX} (64-bit). Use a value in that range."
            )
        return int(value)
    if t == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise FilterError(
                f"field {spec.name!r} is float: value {_short(value)} is not a finite 64-bit number; "
                "use a value within ±1.8e308."
            )
        return number
    if t == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if t in ("keyword", "keyword[]"):
        # Integers are accepted because ingest accepts them for keywords too (stored as text).
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise bad()
        problem = unstorable(str(value), f"the value for {spec.name!r}")
        if problem is not None:
            raise FilterError(f"{problem}; no stored value can contain it, so remove it from the filter.")
        return str(value)
    if t == "date":
        if isinstance(value, datetime):
            raise bad()
        if isinstance(value, date):
            return value
        if not isinstance(value, str):
            raise bad()
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise bad() from None
    # timestamp
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str):
        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise bad() from None
    else:
        raise bad()
    if ts.tzinfo is None:
        raise bad()
    return ts


def _normalize(coll: CollectionInfo, node: Any, text: bool) -> dict[str, Any]:
    """``node`` checked against the collection; ``text``: it was parsed from an expression, whose
    spelling of the operators the messages use (``has all``), else the structured form's (``has_all``)."""
    _check_node_shape(node)
    if "and" in node or "or" in node:
        key = "and" if "and" in node else "or"
        return {key: [_normalize(coll, n, text) for n in node[key]]}
    if "not" in node:
        return {"not": _normalize(coll, node["not"], text)}
    name, op = node["field"], node["op"]
    spec = coll.field(name) if isinstance(name, str) else None
    if spec is None:
        untyped = (coll.field_inference or {}).get("untyped") or {}
        if isinstance(name, str) and name in untyped:
            # The key is in the documents' metadata; say why no filter reads it rather than that it is unknown.
            raise FilterError(
                f"field {_short(name)} is no typed field of collection {coll.name!r}: its first ingest left the "
                f"metadata key untyped ({untyped[name]}); valid fields: {_fields_listing(coll) or 'none'}."
            )
        if not coll.fields:
            raise FilterError(
                f"unknown field {_short(name)}: collection {coll.name!r} declares no typed fields; create the "
                "collection with --field NAME:TYPE to filter on document metadata."
            )
        raise FilterError(
            f"unknown field {_short(name)}; valid fields: {_fields_listing(coll)}. Filter on one of these, or "
            "declare the field when creating the collection."
        )
    allowed = OPS_BY_TYPE[spec.type]
    if op not in allowed:
        raise FilterError(
            f"operator {SYNTAX[op] if text else op!r} does not apply to field {name!r} ({spec.type}); valid "
            f"operators for {spec.type}: {spelled(allowed, text=text)}."
        )
    has_value = "value" in node
    value = node.get("value")
    if op in _NULL_OPS:
        if has_value and value is not None:
            raise FilterError(f"operator {op!r} takes no value, got {_short(value)}; drop the value.")
        return {"field": name, "op": op}
    if not has_value:
        raise FilterError(f"operator {op!r} on field {name!r} needs a value.")
    if op in ("in", "has_all", "has_any"):
        if not isinstance(value, (list, tuple)) or not value:
            raise FilterError(
                f"operator {op!r} on field {name!r} needs a non-empty list of values, got {_short(value)}."
            )
        return {"field": name, "op": op, "value": [_coerce(spec, v) for v in value]}
    if op == "between":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise FilterError(
                f"operator 'between' on field {name!r} needs a list [low, high] (both inclusive), got {_short(value)}."
            )
        return {"field": name, "op": op, "value": [_coerce(spec, value[0]), _coerce(spec, value[1])]}
    if isinstance(value, (list, tuple)):
        raise FilterError(
            f"operator {op!r} on field {name!r} takes one value, got the list {_short(value)}; use 'in' "
            "(or has_any / has_all for keyword lists) to match several."
        )
    return {"field": name, "op": op, "value": _coerce(spec, value)}


def _check_size(spec: Any) -> None:
    """Depth and value count of a structured filter, walked without recursion (it may be nested anyhow)."""
    deepest = values = 0
    stack: list[tuple[Any, int]] = [(spec, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, list):
            stack.extend((n, depth) for n in node)
            continue
        if not isinstance(node, dict):
            continue
        groups = [node[key] for key in ("and", "or", "not") if key in node]
        if groups:
            deepest = max(deepest, depth + 1)
            if deepest > MAX_FILTER_DEPTH:
                raise FilterError(
                    f"the filter nests and/or/not groups more than {MAX_FILTER_DEPTH} deep; the limit is "
                    f"{MAX_FILTER_DEPTH} (MAX_FILTER_DEPTH). Flatten it: one 'and' list holds any number of "
                    "conditions."
                )
            stack.extend((g, depth + 1) for g in groups)
        elif "value" in node:
            values += len(node["value"]) if isinstance(node["value"], (list, tuple)) else 1
    if values > MAX_FILTER_VALUES:
        raise FilterError(
            f"the filter has {values:,} values; the limit is {MAX_FILTER_VALUES:,} (MAX_FILTER_VALUES). "
            "Narrow it, or filter on a coarser field."
        )


def normalize_filter(coll: CollectionInfo, spec: Any) -> dict[str, Any]:
    """Validate ``spec`` (string, dict or list) against the collection; values coerced to field types."""
    text = isinstance(spec, str)
    if isinstance(spec, str):
        spec = parse_filter(spec)
    elif isinstance(spec, list):
        if not spec:
            raise FilterError(f"the filter is an empty list; give at least one condition, {_EXAMPLE}.")
        spec = {"and": spec}
    _check_size(spec)
    return _normalize(coll, spec, text)


# -- compilation ------------------------------------------------------------------------


class _Compiler:
    def __init__(self, coll: CollectionInfo) -> None:
        self.coll = coll
        self.params: dict[str, Any] = {}
        self.fields: set[str] = set()

    def bind(self, value: Any, sql_type: str) -> sql.Composable:
        # Unique names; the explicit cast keeps the comparison on the column's
        # own type, so its btree/GIN index stays usable whatever Python type
        # psycopg would have picked for the value.
        name = f"f{len(self.params)}"
        self.params[name] = value
        return sql.SQL("{}::{}").format(sql.Placeholder(name), sql.SQL(sql_type))

    def node(self, n: dict[str, Any]) -> sql.Composable:
        if "and" in n or "or" in n:
            key = "and" if "and" in n else "or"
            joiner = sql.SQL(" AND ") if key == "and" else sql.SQL(" OR ")
            return sql.SQL("({})").format(joiner.join(self.node(x) for x in n[key]))
        if "not" in n:
            # IS NOT TRUE, not NOT: a comparison on a null value is null, and
            # the complement of "matches" must match those rows.
            return sql.SQL("(({}) IS NOT TRUE)").format(self.node(n["not"]))
        spec = self.coll.field(n["field"])
        assert spec is not None  # normalised above
        self.fields.add(spec.name)
        col = sql.Identifier("c", spec.name)
        op, t = n["op"], spec.sql_type()
        value: Any = n.get("value")
        if op == "is_null":
            return sql.SQL("({} IS NULL)").format(col)
        if op == "is_not_null":
            return sql.SQL("({} IS NOT NULL)").format(col)
        if op in _COMPARISONS:
            return sql.SQL("({} {} {})").format(col, sql.SQL(op), self.bind(value, t))
        if op == "between":
            return sql.SQL("({} BETWEEN {} AND {})").format(col, self.bind(value[0], t), self.bind(value[1], t))
        if op == "in":
            return sql.SQL("({} = ANY({}))").format(col, self.bind(list(value), t + "[]"))
        if op == "has":
            return sql.SQL("({} @> {})").format(col, self.bind([value], "text[]"))
        if op == "has_all":
            return sql.SQL("({} @> {})").format(col, self.bind(list(value), "text[]"))
        # has_any
        return sql.SQL("({} && {})").format(col, self.bind(list(value), "text[]"))


def compile_filter(coll: CollectionInfo, spec: Any) -> CompiledFilter:
    """Compile ``spec`` (expression string, structured dict, or list = and) against the collection's fields.

    >>> f = compile_filter(coll, "years_exp >= 5")     # doctest: +SKIP
    >>> f.params
    {'f0': 5}
    """
    structured = normalize_filter(coll, spec)
    comp = _Compiler(coll)
    predicate = comp.node(structured)
    return CompiledFilter(sql=predicate, params=comp.params, structured=structured, fields=tuple(sorted(comp.fields)))
