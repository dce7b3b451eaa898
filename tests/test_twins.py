"""Code written twice on purpose, checked so that the twins cannot drift apart.

A search's keywords are spelled out in every public signature that takes them
(so that an editor and mypy show them), which repeats them in six places: the
two engines' ``search`` and ``search_sql``, the ``Searcher`` protocol that the
features call, and ``SearchRequest.of`` that turns them into one frozen
request.  The sync and async engines repeat their snapshot operations.  These
tests fail when one twin changes without the other.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from ranklock import AsyncEngine, Engine
from ranklock.search.protocol import Searcher
from ranklock.search.request import SearchRequest

#: Everything that takes a search's keywords, and what it calls its first argument.
KEYWORD_TAKERS: dict[str, Callable[..., Any]] = {
    "Engine.search_sql": Engine.search_sql,
    "AsyncEngine.search": AsyncEngine.search,
    "AsyncEngine.search_sql": AsyncEngine.search_sql,
    "Searcher.__call__": Searcher.__call__,
    "SearchRequest.of": SearchRequest.of,
}


def keywords(fn: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """The keyword parameters of ``fn`` (name, kind, default), without its first two (the collection and the query)."""
    sig = inspect.signature(inspect.unwrap(fn))
    params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
    return [(p.name, p.kind, p.default) for p in params[2:]]


def test_engine_search_is_the_reference() -> None:
    names = [n for n, _, _ in keywords(Engine.search)]
    # Engine.search alone takes rerank (a stage after the search, ranklock.rerank.stage); both engines
    # take offset (a page of a deeper search, SearchResult.page), which the search itself never sees.
    assert names == ["k", "mode", "filter", "snapshot", "as_of", "rerank", "offset", "params"]


#: Keywords only the engines' ``search`` take: stages around the search.
AROUND = {"AsyncEngine.search": {"rerank"}}


@pytest.mark.parametrize("name", sorted(KEYWORD_TAKERS))
def test_every_search_signature_takes_the_same_keywords(name: str) -> None:
    left_out = AROUND.get(name, {"rerank", "offset"})
    reference = [p for p in keywords(Engine.search) if p[0] not in left_out]
    assert keywords(KEYWORD_TAKERS[name]) == reference, name


def test_the_async_engine_takes_and_returns_what_the_sync_one_does() -> None:
    for op in (
        "list_snapshots",
        "activate",
        "rollback",
        "drop_snapshot",
        "drop_collection",
        "prune_snapshots",
        "set_snapshot_retention",
        "pin",
        "document",
        "collection",
        "collections",
    ):
        sync, async_ = inspect.signature(getattr(Engine, op)), inspect.signature(getattr(AsyncEngine, op))
        assert list(sync.parameters) == list(async_.parameters), op
        assert sync.return_annotation == async_.return_annotation, op
