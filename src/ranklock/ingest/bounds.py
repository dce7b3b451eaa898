"""How big and how deep a document's metadata may be, measured in bounded time.

Metadata comes from outside: a note's YAML front matter, a JSONL record, a
caller's dict.  YAML aliases let 364 bytes stand for gigabytes (nine levels of
nine references to the level below), and an alias inside its own anchor
(``a: &a [*a]``) is a value that contains itself.  Both are cheap as long as
nobody walks them; copying them to JSON walks every path.  :func:`metadata_problem`
walks a value once, stopping as soon as it passes :data:`~ranklock.limits.MAX_METADATA_BYTES`
(each node counts at least a byte, so it never visits more nodes than that) or
:data:`~ranklock.limits.MAX_METADATA_DEPTH`, and names a cycle as one.

>>> metadata_problem({"tags": ["a", "b"]}) is None
True
>>> a: list = []
>>> a.append(a)
>>> metadata_problem({"a": a})
'metadata.a[0] refers to itself (a YAML alias used inside its own anchor, like `a: &a [*a]`)'
"""

from __future__ import annotations

from typing import Any

from ..limits import MAX_METADATA_BYTES, MAX_METADATA_DEPTH

__all__ = ["metadata_problem"]


class _Stop(Exception):
    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def metadata_problem(value: Any, where: str = "metadata") -> str | None:
    """Why ``value`` is too big, too deep or cyclic to be a document's ``where``; None when it is not."""
    budget = [MAX_METADATA_BYTES]
    try:
        _walk(value, where, 0, set(), budget)
    except _Stop as stop:
        return stop.problem
    except _Spent as spent:
        return (
            f"{where} is over {MAX_METADATA_BYTES:,} bytes as JSON (MAX_METADATA_BYTES; reached at {spent.where}); "
            "a YAML alias counts as often as it is used"
        )
    return None


class _Spent(Exception):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


def _spend(budget: list[int], n: int, where: str) -> None:
    budget[0] -= n
    if budget[0] < 0:
        raise _Spent(where)


def _walk(value: Any, where: str, depth: int, ancestors: set[int], budget: list[int]) -> None:
    if isinstance(value, dict | list | tuple | set):
        if id(value) in ancestors:
            raise _Stop(f"{where} refers to itself (a YAML alias used inside its own anchor, like `a: &a [*a]`)")
        if depth >= MAX_METADATA_DEPTH:
            raise _Stop(f"{where} is nested more than {MAX_METADATA_DEPTH} levels deep (MAX_METADATA_DEPTH)")
        _spend(budget, 2, where)
        ancestors.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                name = f"{where}.{key}"
                _spend(budget, len(str(key).encode("utf-8", "replace")) + 4, name)
                _walk(item, name, depth + 1, ancestors, budget)
        else:
            for i, item in enumerate(value):
                name = f"{where}[{i}]"
                _spend(budget, 1, name)
                _walk(item, name, depth + 1, ancestors, budget)
        ancestors.discard(id(value))
        return
    text = value if isinstance(value, str) else str(value)
    _spend(budget, len(text.encode("utf-8", "replace")) + 2, where)
