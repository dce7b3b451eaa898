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
is_not_null``; ``in``, ``has_all`` and ``has_any`` take a non-empty list,
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

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from psycopg import sql

from ..collection import CollectionInfo, FieldSpec
from ..errors import FilterError
from ..ingest.normalize import unstorable
from ..limits import BIGINT_MAX, BIGINT_MIN, MAX_FILTER_CHARS, MAX_FILTER_DEPTH, MAX_FILTER_VALUES

__all__ = [
    "OPERATORS",
    "OPS_BY_TYPE",
    "CompiledFilter",
    "compile_filter",
    "format_filter",
    "normalize_filter",
    "parse_filter",
]

_COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
#: Every operator of the structured form.
OPERATORS: tuple[str, ...] = tuple(
    sorted((*_COMPARISONS, "in", "between", "has", "has_all", "has_any", "is_null", "is_not_null"))
)
_NULL_OPS = ("is_null", "is_not_null")
_ORDERED = (*_COMPARISONS, "in", "between", *_NULL_OPS)

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

_EXAMPLE = 'e.g. years_exp >= 5 and skills has "python"'


@dataclass
class CompiledFilter:
    """A predicate over alias ``c``, its bound values, and the validated structured form."""

    sql: sql.Composable
    params: dict[str, Any] = field(default_factory=dict)
    structured: dict[str, Any] = field(default_factory=dict)


# -- the expression language ---------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<op>>=|<=|!=|=|<|>)
  | (?P<punct>[(),])
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?![A-Za-z0-9_]))
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    """,
    re.VERBOSE | re.DOTALL,
)
_KEYWORDS = frozenset({"and", "or", "not", "in", "between", "has", "all", "any", "is", "null", "true", "false"})


@dataclass(frozen=True)
class _Tok:
    kind: str  # op, punct, number, word, keyword, string, end
    text: str
    pos: int
    value: Any = None


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            if ch in "\"'":
                raise FilterError(
                    f"filter syntax error at position {pos}: string starting here has no closing {ch}; "
                    f"close it with {ch}."
                )
            raise FilterError(f"filter syntax error at position {pos}: unexpected character {ch!r}; {_EXAMPLE}.")
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "ws":
            pos = m.end()
            continue
        value: Any = None
        if kind == "number":
            try:
                value = float(raw) if any(c in raw for c in ".eE") else int(raw)
            except ValueError:  # an integer of thousands of digits
                raise FilterError(
                    f"filter syntax error at position {pos}: the number has {len(raw):,} digits; "
                    f"integers range from {BIGINT_MIN} to {BIGINT_MAX}."
                ) from None
        elif kind == "string":
            value = re.sub(r"\\(.)", r"\1", raw[1:-1], flags=re.DOTALL)
        elif kind == "word" and raw.lower() in _KEYWORDS:
            kind = "keyword"
            raw = raw.lower()
        toks.append(_Tok(kind, raw, pos, value))
        pos = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


def _check_paren_depth(toks: list[_Tok]) -> None:
    depth = deepest = 0
    for tok in toks:
        if tok.kind == "punct" and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
            deepest = max(deepest, depth)
    if deepest > MAX_FILTER_DEPTH:
        raise FilterError(
            f"the filter nests parentheses {deepest:,} deep; the limit is {MAX_FILTER_DEPTH} (MAX_FILTER_DEPTH). "
            "Flatten it: 'a and b and c' needs no parentheses."
        )


class _Parser:
    """Recursive descent: or < and < not < comparison, parentheses group."""

    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0  # open parentheses and `not`s around the current position
        _check_paren_depth(self.toks)

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def next(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def is_kw(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "keyword" and tok.text in words

    def fail(self, expected: str) -> FilterError:
        tok = self.peek()
        found = "end of input" if tok.kind == "end" else repr(tok.text)
        return FilterError(
            f"filter syntax error at position {tok.pos}: expected {expected}, found {found}; {_EXAMPLE}."
        )

    def expect_punct(self, ch: str) -> None:
        tok = self.peek()
        if tok.kind != "punct" or tok.text != ch:
            raise self.fail(repr(ch))
        self.i += 1

    def parse(self) -> dict[str, Any]:
        node = self.or_expr()
        if self.peek().kind != "end":
            raise self.fail("'and', 'or' or the end of the filter")
        return node

    def or_expr(self) -> dict[str, Any]:
        items = [self.and_expr()]
        while self.is_kw("or"):
            self.next()
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else {"or": items}

    def and_expr(self) -> dict[str, Any]:
        items = [self.not_expr()]
        while self.is_kw("and"):
            self.next()
            items.append(self.not_expr())
        return items[0] if len(items) == 1 else {"and": items}

    def nest(self, tok: _Tok) -> None:
        # Recursion is bounded by the limit, never by Python's stack.
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise FilterError(
                f"the filter nests parentheses and 'not' more than {MAX_FILTER_DEPTH} deep (at position "
                f"{tok.pos}); the limit is {MAX_FILTER_DEPTH} (MAX_FILTER_DEPTH). Flatten it: 'a and b and c' "
                "needs no parentheses, and 'not not a' is 'a'."
            )

    def not_expr(self) -> dict[str, Any]:
        if self.is_kw("not"):
            self.nest(self.next())
            node = {"not": self.not_expr()}
            self.depth -= 1
            return node
        tok = self.peek()
        if tok.kind == "punct" and tok.text == "(":
            self.nest(self.next())
            node = self.or_expr()
            self.expect_punct(")")
            self.depth -= 1
            return node
        return self.comparison()

    def value(self) -> Any:
        tok = self.peek()
        if tok.kind in ("number", "string"):
            self.next()
            return tok.value
        if tok.kind == "keyword" and tok.text in ("true", "false"):
            self.next()
            return tok.text == "true"
        if tok.kind == "keyword" and tok.text == "null":
            raise FilterError(
                f"filter syntax error at position {tok.pos}: null is not a value to compare with; "
                "write 'FIELD is null' or 'FIELD is not null'."
            )
        raise self.fail("a value (a number, a quoted string, true or false)")

    def value_list(self) -> list[Any]:
        self.expect_punct("(")
        items = [self.value()]
        while self.peek().kind == "punct" and self.peek().text == ",":
            self.next()
            items.append(self.value())
        self.expect_punct(")")
        return items

    def comparison(self) -> dict[str, Any]:
        tok = self.peek()
        if tok.kind != "word":
            raise self.fail("a field name, 'not' or '('")
        name = self.next().text
        nxt = self.peek()
        if nxt.kind == "op":
            self.next()
            return {"field": name, "op": nxt.text, "value": self.value()}
        if self.is_kw("in"):
            self.next()
            return {"field": name, "op": "in", "value": self.value_list()}
        if self.is_kw("between"):
            self.next()
            lo = self.value()
            if not self.is_kw("and"):
                raise self.fail("'and' (between LOW and HIGH)")
            self.next()
            return {"field": name, "op": "between", "value": [lo, self.value()]}
        if self.is_kw("has"):
            self.next()
            if self.is_kw("all", "any"):
                which = self.next().text
                return {"field": name, "op": f"has_{which}", "value": self.value_list()}
            return {"field": name, "op": "has", "value": self.value()}
        if self.is_kw("is"):
            self.next()
            negated = False
            if self.is_kw("not"):
                self.next()
                negated = True
            if not self.is_kw("null"):
                raise self.fail("'null' ('is null' or 'is not null')")
            self.next()
            return {"field": name, "op": "is_not_null" if negated else "is_null"}
        raise self.fail(f"an operator after {name!r} (= != < <= > >= in between has 'has all' 'has any' 'is null')")


def parse_filter(text: str) -> dict[str, Any]:
    """Parse the expression syntax into the structured form.

    >>> parse_filter('years_exp >= 5 and skills has "python"')
    {'and': [{'field': 'years_exp', 'op': '>=', 'value': 5}, {'field': 'skills', 'op': 'has', 'value': 'python'}]}
    """
    if not isinstance(text, str) or not text.strip():
        raise FilterError(f"the filter is empty; write a condition, {_EXAMPLE}.")
    if len(text) > MAX_FILTER_CHARS:
        raise FilterError(
            f"the filter is {len(text):,} characters; the limit is {MAX_FILTER_CHARS:,} (MAX_FILTER_CHARS). "
            "Shorten it, e.g. one 'in (...)' instead of many 'or's."
        )
    return _Parser(text).parse()


def _literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (date, datetime)):
        v = v.isoformat()
    s = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def format_filter(spec: Any) -> str:
    """The expression text of a structured filter; ``parse_filter`` reads it back to the same structure.

    >>> format_filter({"field": "skills", "op": "has_any", "value": ["go", "rust"]})
    'skills has any ("go", "rust")'
    """
    if isinstance(spec, list):
        spec = {"and": spec}
    _check_node_shape(spec)
    if "and" in spec or "or" in spec:
        key = "and" if "and" in spec else "or"
        return f" {key} ".join(f"({format_filter(s)})" for s in spec[key])
    if "not" in spec:
        return f"not ({format_filter(spec['not'])})"
    name, op, value = spec["field"], spec["op"], spec.get("value")
    if op in _COMPARISONS:
        return f"{name} {op} {_literal(value)}"
    if op == "between":
        return f"{name} between {_literal(value[0])} and {_literal(value[1])}"
    if op == "has":
        return f"{name} has {_literal(value)}"
    if op in ("in", "has_all", "has_any"):
        words = {"in": "in", "has_all": "has all", "has_any": "has any"}[op]
        return f"{name} {words} ({', '.join(_literal(v) for v in value)})"
    return f"{name} is null" if op == "is_null" else f"{name} is not null"


# -- validation against the collection ------------------------------------------------


def _check_node_shape(node: Any) -> None:
    if not isinstance(node, dict):
        raise FilterError(
            f"a filter must be an expression string, an object or a list of objects, got {_short(node)} "
            f'({type(node).__name__}); {_EXAMPLE}, or {{"field": "years_exp", "op": ">=", "value": 5}}.'
        )
    keys = set(node)
    for key in ("and", "or", "not"):
        if key in keys:
            if keys != {key}:
                raise FilterError(
                    f"a {key!r} filter node has only the key {key!r}, got keys {', '.join(sorted(keys))}; "
                    "nest the other conditions inside it."
                )
            if key != "not" and (not isinstance(node[key], list) or not node[key]):
                raise FilterError(f"{key!r} needs a non-empty list of filters, got {_short(node[key])}.")
            return
    if "field" not in keys or "op" not in keys:
        raise FilterError(
            f'a filter node is {{"and": [...]}}, {{"or": [...]}}, {{"not": ...}} or '
            f'{{"field": ..., "op": ..., "value": ...}}; got keys {", ".join(sorted(keys)) or "(none)"}.'
        )
    extra = sorted(keys - {"field", "op", "value"})
    if extra:
        raise FilterError(f"unknown key(s) {', '.join(extra)} in a filter condition; use field, op and value.")
    if node["op"] not in OPERATORS:
        raise FilterError(f"unknown filter operator {_short(node['op'])}; valid operators: {', '.join(OPERATORS)}.")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _normalize(coll: CollectionInfo, node: Any) -> dict[str, Any]:
    _check_node_shape(node)
    if "and" in node or "or" in node:
        key = "and" if "and" in node else "or"
        return {key: [_normalize(coll, n) for n in node[key]]}
    if "not" in node:
        return {"not": _normalize(coll, node["not"])}
    name, op = node["field"], node["op"]
    spec = coll.field(name) if isinstance(name, str) else None
    if spec is None:
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
            f"operator {op!r} does not apply to field {name!r} ({spec.type}); valid operators for "
            f"{spec.type}: {', '.join(sorted(allowed))}."
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
    if isinstance(spec, str):
        spec = parse_filter(spec)
    elif isinstance(spec, list):
        if not spec:
            raise FilterError(f"the filter is an empty list; give at least one condition, {_EXAMPLE}.")
        spec = {"and": spec}
    _check_size(spec)
    return _normalize(coll, spec)


# -- compilation ------------------------------------------------------------------------


class _Compiler:
    def __init__(self, coll: CollectionInfo) -> None:
        self.coll = coll
        self.params: dict[str, Any] = {}

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
    return CompiledFilter(sql=predicate, params=comp.params, structured=structured)
