"""The search parameters as keyword arguments: a TypedDict of :class:`~ranklock.settings.SearchParams`.

``Engine.search(name, query, depth=100, ef_search=200)`` takes any search
parameter by keyword; this TypedDict types them for mypy and IDEs
(``**params: Unpack[SearchOptions]``).  The values are still checked strictly
at run time by SearchParams, which stays the one declaration of their
defaults, bounds and help; ``tests/test_public_api.py`` checks the two name
the same fields with the same types.
"""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = ["SearchOptions"]


class SearchOptions(TypedDict, total=False):
    """Every :class:`~ranklock.settings.SearchParams` field, each optional (None: the default)."""

    depth: int | None
    rrf_k: int | None
    ef_search: int | None
    iterative_scan: Literal["off", "strict_order", "relaxed_order"] | None
    max_scan_tuples: int | None
    probes: int | None
    exact_threshold: int | None
    exact_fallback: bool | None
    lexical_ranker: Literal["bm25", "ts_rank_cd"] | None
    k1: float | None
    b: float | None
    query_syntax: Literal["natural", "websearch"] | None
