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

from typing import Any, ClassVar, Protocol

from ..store.steps import Steps
from .lexical import LexicalBranch
from .results import BranchSignal, Hit
from .semantic import SemanticBranch
from .spec import Branch, BranchContext, Signal

__all__ = ["REGISTRY", "BranchKind", "kinds_for", "modes", "prepare_branches", "registry", "signals_from_fields"]


class BranchKind(Protocol):
    """A branch class: what fusion knows of a branch before it runs, and how to prepare one."""

    name: ClassVar[str]
    alias: ClassVar[str]
    cte: ClassVar[str]
    signal: ClassVar[Signal]
    can_fall_short: ClassVar[bool]

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


def signals_from_fields(hit: Hit) -> dict[str, BranchSignal]:
    """The signals of a hit read back from JSON (the result cache), from the JSON fields the branches name."""
    return {
        kind.name: BranchSignal(getattr(hit, kind.signal.rank_key, None), getattr(hit, kind.signal.raw_key, None))
        for kind in registry()
    }


def prepare_branches(ctx: BranchContext) -> Steps[tuple[tuple[Branch, ...], list[str]]]:
    """Each branch of ``ctx.spec.mode``, prepared in registry order; a branch with nothing to do is left out.

    Returns the branches and the warnings of those left out.
    """
    branches: list[Branch] = []
    warnings: list[str] = []
    for kind in kinds_for(ctx.spec.mode):
        branch, warning = yield from kind.prepare(ctx)
        if branch is not None:
            branches.append(branch)
        if warning is not None:
            warnings.append(warning)
    return tuple(branches), warnings
