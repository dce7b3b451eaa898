"""What a feature needs of the search: a callable with ``Engine.search``'s signature.

Features above the search layer (``ask``, ``plan``, ``eval``) run searches but must not
import the :class:`~ranklock.Engine` (dependencies point one way).  They take a
:class:`Searcher` instead; the bound method ``engine.search`` is one::

    >>> from ranklock.search.protocol import Searcher
    >>> def top_ids(search: Searcher, name: str, q: str) -> list[str]:
    ...     return [h.doc_id for h in search(name, q, k=3).hits]
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, Unpack

from ..settings import REQUEST
from .options import SearchOptions
from .results import SearchResult

__all__ = ["Searcher"]


class Searcher(Protocol):
    """``Engine.search``: search collection ``name`` and return the fused top ``k``."""

    def __call__(
        self,
        name: str,
        query: str,
        *,
        k: int = REQUEST.k,
        mode: str = REQUEST.mode,
        filter: Any = None,
        snapshot: int | None = None,
        as_of: datetime | str | None = None,
        **params: Unpack[SearchOptions],
    ) -> SearchResult: ...
