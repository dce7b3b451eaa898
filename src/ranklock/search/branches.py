"""The branches a search can run, in fusion order, and which of them a request's mode runs.

``hybrid`` runs every branch of :data:`REGISTRY`; a mode named after one
branch (``lexical``, ``semantic``) runs that one alone.  The registry's order
is the order of each hit's signals in the statement, the JSON and the query
log, and of the terms of the fused score.  Adding a branch is its own module
(a class with the :class:`~.spec.Branch` protocol and a ``prepare`` step)
and one entry here.

>>> [kind.name for kind in REGISTRY]
['lexical', 'semantic']
>>> modes()
('hybrid', 'lexical', 'semantic')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from ..store.steps import Steps, gather
from .lexical import LexicalBranch
from .results import BranchSignal, Hit, SearchResult
from .semantic import SemanticBranch
from .spec import Branch, BranchContext, Signal
from .ties import branch_tie_groups

__all__ = [
    "REGISTRY",
    "BranchKind",
    "describe",
    "kinds_for",
    "modes",
    "prepare_branches",
    "read_result",
    "registry",
    "short_name",
    "short_names",
    "signals_from_fields",
]


class BranchKind(Protocol):
    """A branch class: what fusion knows of a branch before it runs, and how to prepare one."""

    name: ClassVar[str]
    alias: ClassVar[str]
    cte: ClassVar[str]
    signal: ClassVar[Signal]
    can_fall_short: ClassVar[bool]
    echo_keys: ClassVar[tuple[str, ...]]

    @classmethod
    def prepare(cls, ctx: BranchContext) -> Steps[tuple[Any, str | None]]: ...


#: Every branch, in fusion order.
REGISTRY: tuple[type[BranchKind], ...] = (LexicalBranch, SemanticBranch)


def registry() -> tuple[type[BranchKind], ...]:
    """:data:`REGISTRY`, read when called (so a test can register a branch of its own)."""
    return REGISTRY


def modes() -> tuple[str, ...]:
    """The search modes: ``hybrid`` (every branch), then one per branch."""
    return ("hybrid", *(kind.name for kind in registry()))


def kinds_for(mode: str) -> tuple[type[BranchKind], ...]:
    """The branches ``mode`` runs, in registry order."""
    return registry() if mode == "hybrid" else tuple(kind for kind in registry() if kind.name == mode)


def describe() -> list[dict[str, str]]:
    """Each branch as the search page shows it, in registry order: its name, short name, the JSON keys of a
    hit's rank and raw score, and what the raw score is called (``BM25``, ``distance``)."""
    return [
        {
            "name": kind.name,
            "short": kind.cte,
            "rank_key": kind.signal.rank_key,
            "raw_key": kind.signal.raw_key,
            "raw_name": kind.signal.raw_name,
        }
        for kind in registry()
    ]


def short_names() -> tuple[str, ...]:
    """Each branch's short name in tables and hit lines, in registry order: its CTE's (``lex``, ``sem``)."""
    return tuple(kind.cte for kind in registry())


def short_name(name: str) -> str:
    """The short name of the branch called ``name`` (:func:`short_names`); the name itself for an unknown one."""
    return next((kind.cte for kind in registry() if kind.name == name), name)


def signals_from_fields(hit: Mapping[str, Any]) -> tuple[BranchSignal, ...]:
    """The signals of a hit read back from its JSON (the result cache), from the keys the branches name."""
    return tuple(
        BranchSignal(kind.name, hit.get(kind.signal.rank_key), hit.get(kind.signal.raw_key), kind.signal)
        for kind in registry()
    )


def read_result(payload: Mapping[str, Any]) -> SearchResult:
    """A result read back from its JSON (the result cache): each hit's signals from the keys the branches
    name, and each branch's tie groups from those, as the search set them (the whole ranking's are in it).

    >>> import json
    >>> from ranklock.search.results import SnapshotRef
    >>> res = SearchResult(query="q", collection="c", mode="hybrid", k=1, hits=[], params={}, snapshot=SnapshotRef(id=1, manifest_hash=None))
    >>> read_result(json.loads(res.to_json())) == res
    True
    """
    hits = [Hit.model_validate({**h, "signals": signals_from_fields(h)}) for h in payload.get("hits", ())]
    return SearchResult.model_validate({**payload, "hits": branch_tie_groups(hits)})


def prepare_branches(ctx: BranchContext) -> Steps[tuple[tuple[Branch, ...], list[str]]]:
    """Each branch of ``ctx.spec.mode``, prepared side by side (their reads in one round trip: ``gather``), in
    registry order; a branch with nothing to do is left out.

    Returns the branches and the warnings of those left out.
    """
    prepared = yield from gather(*(kind.prepare(ctx) for kind in kinds_for(ctx.spec.mode)))
    branches = tuple(branch for branch, _ in prepared if branch is not None)
    return branches, [warning for _, warning in prepared if warning is not None]
