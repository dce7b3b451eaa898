"""What an evaluation needs of the thing it evaluates: a Searcher, the database and the collection record.

Evaluations sit beside ``ask`` and ``plan``, above ``search``, and never import the
:class:`~ranklock.Engine` (dependencies point one way).  Every search they score goes
through :meth:`EvalTarget.search`, which has the signature of
:class:`ranklock.search.protocol.Searcher`; the snapshot they pin is read with
``db`` and ``collection``.  An ``Engine`` is an :class:`EvalTarget` as it is, and so is any
object with these members (a test double, a remote client).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..settings import REQUEST

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..search.protocol import Searcher
    from ..settings import Settings
    from ..store.database import Database

__all__ = ["AskTarget", "EvalTarget"]


class EvalTarget(Protocol):
    """A search (``Engine.search``'s signature), the collection records and the settings (result cache, home)."""

    db: Database
    settings: Settings

    def collection(self, name: str) -> CollectionInfo: ...

    @property
    def search(self) -> Searcher:
        """``Engine.search`` (see :class:`ranklock.search.protocol.Searcher` for its signature)."""
        ...


class AskTarget(EvalTarget, Protocol):
    """An :class:`EvalTarget` that also answers questions (``Engine.ask``), for ``eval --answers``."""

    def ask(
        self,
        name: str,
        question: str,
        *,
        filter: Any = None,
        as_of: datetime | str | None = None,
        snapshot: int | None = None,
        chunks: int = REQUEST.chunks,
        generator: Any = "extractive",
        mode: str = REQUEST.mode,
    ) -> Any: ...
