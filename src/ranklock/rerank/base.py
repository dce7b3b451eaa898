"""The reranker protocol and its record.

A reranker scores (query, text) pairs; higher is more relevant.  It tells what
it is (:class:`RerankerInfo`: name, model id, weights sha256 when the weights
are local, its pinned settings), and that record travels with every reranked
result, the query log and the answer log, so a replay can say whether the same
reranker ran.  Scoring must be deterministic: same pairs, same scores (a fixed
batch size and order for a local model; greedy, no sampling, for an endpoint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Reranker", "RerankerInfo"]


@dataclass(frozen=True)
class RerankerInfo:
    """What reranked: enough to say whether a replay ran the same reranker."""

    name: str
    model: str
    weights_sha256: str | None
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            "weights_sha256": self.weights_sha256,
            "params": dict(self.params),
        }


@runtime_checkable
class Reranker(Protocol):
    """Scores ``texts`` against ``query``, one float per text, in the order given."""

    name: str

    def info(self) -> RerankerInfo: ...

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...
