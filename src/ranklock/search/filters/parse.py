"""The filter expression language: tokens, the parser, and the way back (``format_filter``).

``parse_filter`` turns the expression text into the structured form
(ranklock.search.filters describes both); ``format_filter`` writes a
structured filter back as text that parses to the same structure.  Nothing
here knows a collection: field names and value types are checked when the
filter is compiled (ranklock.search.filters.compile).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from ...errors import FilterError
from ...limits import BIGINT_MAX, BIGINT_MIN, MAX_FILTER_CHARS, MAX_FILTER_DEPTH

__all__ = ["OPERATORS", "SYNTAX", "format_filter", "parse_filter", "spelled"]

#: Every operator of the structured form, and how the expression syntax writes it: the one declaration of
#: the operator names.  The parser reads an operator by these words, ``format_filter`` writes them, and
#: every message that lists operators lists these, in the form the filter was written in (issue 45: a
#: message offered ``has_all`` to a text filter, whose parser takes ``has all``).
SYNTAX: dict[str, str] = {
    "=": "=",
    "!=": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "in": "in",
    "between": "between",
    "has": "has",
    "has_all": "has all",
    "has_any": "has any",
    "is_null": "is null",
    "is_not_null": "is not null",
}
OPERATORS: tuple[str, ...] = tuple(sorted(SYNTAX))
_COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
#: Operators that take a list of values, and those that take none.
_LISTS = ("in", "has_all", "has_any")
_NULL_OPS = ("is_null", "is_not_null")
_ORDERED = (*_COMPARISONS, "in", "between", *_NULL_OPS)
#: The parser tries the longest spelling first: ``is not null`` before ``is null``, ``has all`` before ``has``.
_BY_LENGTH = sorted(SYNTAX, key=lambda op: -len(SYNTAX[op].split()))


def spelled(ops: Any, *, text: bool) -> str:
    """``ops`` as a message lists them, in the order of :data:`SYNTAX`: as the expression syntax writes them
    (``text``), or as the structured form names them.

    >>> spelled(["has_any", "has"], text=True)
    'has, has any'
    """
    order = list(SYNTAX)
    return ", ".join(SYNTAX[op] if text else op for op in sorted(ops, key=order.index))


_EXAMPLE = 'e.g. years_exp >= 5 and skills has "python"'
#: A date or timestamp written without quotes, with the field and operator before it.
_UNQUOTED_DATE = re.compile(
    r"(?:(?P<field>[A-Za-z_][A-Za-z0-9_]*)\s*)?(?P<op>>=|<=|!=|=|<|>)\s*"
    r"(?P<date>\d{4}-\d{2}(?:-\d{2})?(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
)


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
#: The words of the grammar and of the operators' spellings; any other word is a field name.
_KEYWORDS = frozenset(
    {"and", "or", "not", "null", "true", "false"} | {w for s in SYNTAX.values() for w in s.split() if w.isalpha()}
)


@dataclass(frozen=True)
class _Tok:
    kind: str  # op, punct, number, word, keyword, string, end
    text: str
    pos: int
    value: Any = None


def _example(text: str) -> str:
    """The example a syntax error of ``text`` ends with: a quoted date when ``text`` holds an unquoted one
    (2024-01-01 reads as the number 2024 followed by -01), else the general one."""
    m = _UNQUOTED_DATE.search(text)
    if m is None:
        return _EXAMPLE
    field = m.group("field") or "date"
    return f'a date or time is a quoted string: {field} {m.group("op")} "{m.group("date")}"'


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
            raise FilterError(f"filter syntax error at position {pos}: unexpected character {ch!r}; {_example(text)}.")
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
            if isinstance(value, float):
                _check_exact(raw, value, pos)
        elif kind == "string":
            value = re.sub(r"\\(.)", r"\1", raw[1:-1], flags=re.DOTALL)
        elif kind == "word" and raw.lower() in _KEYWORDS:
            kind = "keyword"
            raw = raw.lower()
        toks.append(_Tok(kind, raw, pos, value))
        pos = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


def _check_exact(raw: str, value: float, pos: int) -> None:
    """Refuse a number that a 64-bit float turns into another kind of number: ``1e-400`` into 0.0, a fraction
    with too many digits into a whole number.  Either would then pass as an integer where ``0.5`` is refused."""
    exact = Decimal(raw)
    if not exact.is_finite() or exact == exact.to_integral_value() or not value.is_integer():
        return
    what = "is too small for a 64-bit float" if value == 0 else "has more digits than a 64-bit float holds"
    raise FilterError(
        f"filter: the number {raw} at position {pos} {what}: it would be read as {value!r}, a whole number "
        f"it is not. Write the value you mean ({int(value)}, or a fraction with fewer digits)."
    )


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
        self.text = text
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
            f"filter syntax error at position {tok.pos}: expected {expected}, found {found}; {_example(self.text)}."
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

    def operator(self) -> str | None:
        """The operator written at the cursor, its words consumed (:data:`SYNTAX`); None when there is none."""
        for op in _BY_LENGTH:
            words = SYNTAX[op].split()
            toks = self.toks[self.i : self.i + len(words)]
            if len(toks) == len(words) and all(
                t.kind in ("op", "keyword") and t.text == w for t, w in zip(toks, words, strict=True)
            ):
                self.i += len(words)
                return op
        return None

    def no_operator(self, name: str) -> FilterError:
        """The error for a field name followed by no operator, with a hint when what follows is nearly one."""
        tok = self.peek()
        starts = [s for s in SYNTAX.values() if tok.kind == "keyword" and s.split()[0] == tok.text and " " in s]
        if starts:  # `is` without `null` (a `has` of neither list form is `has` itself, so only `is` gets here)
            longest = max(len(s.split()) for s in starts)
            seen = " ".join(t.text for t in self.toks[self.i : self.i + longest] if t.kind != "end")
            return FilterError(
                f"filter syntax error at position {tok.pos}: expected {' or '.join(repr(s) for s in starts)} after "
                f"{name!r}, found {seen!r}; {_example(self.text)}."
            )
        hint = ""
        if tok.kind == "word" and tok.text in SYNTAX:  # `has_all`: the structured form's name
            hint = f" (the structured form's name; a filter expression writes it {SYNTAX[tok.text]!r})"
        found = "end of input" if tok.kind == "end" else repr(tok.text)
        return FilterError(
            f"filter syntax error at position {tok.pos}: expected an operator after {name!r} "
            f"({spelled(SYNTAX, text=True)}), found {found}{hint}; {_example(self.text)}."
        )

    def comparison(self) -> dict[str, Any]:
        tok = self.peek()
        if tok.kind != "word":
            raise self.fail("a field name, 'not' or '('")
        name = self.next().text
        op = self.operator()
        if op is None:
            raise self.no_operator(name)
        if op in _NULL_OPS:
            return {"field": name, "op": op}
        if op in _LISTS:
            return {"field": name, "op": op, "value": self.value_list()}
        if op == "between":
            lo = self.value()
            if not self.is_kw("and"):
                raise self.fail("'and' (between LOW and HIGH)")
            self.next()
            return {"field": name, "op": op, "value": [lo, self.value()]}
        return {"field": name, "op": op, "value": self.value()}


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
    if op in _NULL_OPS:
        return f"{name} {SYNTAX[op]}"
    if op == "between":
        return f"{name} between {_literal(value[0])} and {_literal(value[1])}"
    if op in _LISTS:
        return f"{name} {SYNTAX[op]} ({', '.join(_literal(v) for v in value)})"
    return f"{name} {SYNTAX[op]} {_literal(value)}"


# -- the shape of a structured node ---------------------------------------------------


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
