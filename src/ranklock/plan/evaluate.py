"""A reference evaluator of the structured filter form over a document's metadata, in Python.

It mirrors the SQL semantics of :mod:`ranklock.search.filters` (a comparison
on a missing value is false; ``not f`` is ``f IS NOT TRUE``), and exists so
tests and ``explain`` can check, candidate by candidate, that the SQL
predicate admitted exactly the documents it should.
"""

from __future__ import annotations

from typing import Any

__all__ = ["matches"]


def _leaf(node: dict[str, Any], meta: dict[str, Any]) -> bool:
    op = node["op"]
    have = meta.get(node["field"])
    if op == "is_null":
        return have is None
    if op == "is_not_null":
        return have is not None
    if have is None:
        return False
    v: Any = node.get("value")
    if op == "=":
        return bool(have == v)
    if op == "!=":
        return bool(have != v)
    if op == "<":
        return bool(have < v)
    if op == "<=":
        return bool(have <= v)
    if op == ">":
        return bool(have > v)
    if op == ">=":
        return bool(have >= v)
    if op == "in":
        return have in v
    if op == "between":
        return bool(v[0] <= have <= v[1])
    if op == "has":
        return v in have
    if op == "has_all":
        return all(x in have for x in v)
    if op == "has_any":
        return any(x in have for x in v)
    raise ValueError(f"unknown operator {op!r}")


def matches(node: dict[str, Any] | None, meta: dict[str, Any]) -> bool:
    """Whether a document with ``meta`` satisfies the structured filter ``node`` (None: no filter).

    >>> matches({"not": {"field": "skills", "op": "has", "value": "php"}}, {"skills": ["go"]})
    True
    """
    if node is None:
        return True
    if "and" in node:
        return all(matches(x, meta) for x in node["and"])
    if "or" in node:
        return any(matches(x, meta) for x in node["or"])
    if "not" in node:
        return not matches(node["not"], meta)
    return _leaf(node, meta)
