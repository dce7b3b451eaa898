"""The rerank stage: a fused search result in, a reranked result out, logged and replayed as its own layer.

``Engine.search(..., rerank=N)`` runs the ordinary search for ``max(k, N)``
documents, then :func:`rerank_result`:

1. the reranker scores (query, text) for the top ``N`` fused hits;
2. those hits are ordered by score, high first, ties broken by ``doc_id`` (byte
   order) and then chunk, like every ranking step of ranklock;
3. the fused hits below ``N`` follow in their fused order; ranks are counted
   again from 1 and the result is cut to ``k``;
4. ``params["rerank"]`` records the reranker (name, model, weights sha256,
   settings), ``N`` and the reranked order ``[doc_id, chunk, fused rank, score]``,
   so the result's JSON (and its digest) says what reranked it.

The fused result is logged by the search itself; the stage adds the rerank
record to that query-log row (``query_log.rerank``, migration 0009), and
:func:`replay_rerank` re-runs the fusion, then the reranker, and reports the
rerank layer apart from the fusion's differences.  A search without ``rerank``
never reaches this module: its bytes are unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from ..errors import QueryError
from ..limits import MAX_K
from ..search.ties import branch_tie_groups
from ..settings import REQUEST
from .base import Reranker

if TYPE_CHECKING:
    from ..search.log import ReplayReport
    from ..search.results import SearchResult
    from ..store.database import Database

__all__ = ["RerankedReplay", "check_rerank", "rerank_result", "reranked_search", "replay_rerank"]

SearchFn = Callable[..., "SearchResult"]


def check_rerank(n: object) -> int:
    """``n`` as the number of fused hits to rerank; QueryError unless it is an integer from 1 to MAX_K."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_K:
        raise QueryError(f"rerank must be an integer from 1 to {MAX_K} (fused hits to rerank), got {n!r}; e.g. 40.")
    return n


def rerank_result(result: SearchResult, reranker: Reranker, n: int, k: int) -> SearchResult:
    """The top ``n`` hits of ``result`` reordered by ``reranker``, the rest after them, cut to ``k`` (a new result)."""
    head, tail = result.hits[:n], result.hits[n:]
    scores = reranker.score(result.query, [h.text for h in head])
    if len(scores) != len(head):
        raise QueryError(f"the reranker returned {len(scores)} scores for {len(head)} hits; it must score each once.")
    # High score first; equal scores keep a stable, meaningless order by doc_id (byte order), then chunk.
    ranked = sorted(zip(head, scores, strict=True), key=lambda p: (-p[1], p[0].doc_id.encode("utf-8"), p[0].chunk))
    order = [[h.doc_id, h.chunk, h.rank, s] for h, s in ranked]
    hits = [h for h, _s in ranked] + list(tail)
    hits = [h.model_copy(update={"rank": i, "tie_group": None}) for i, h in enumerate(hits[:k], start=1)]
    # A branch's ties are still ties: numbered by the new ranks (ranklock.search.ties).
    hits = branch_tie_groups(hits)
    params = {**result.params, "rerank": {"reranker": reranker.info().to_dict(), "n": n, "order": order}}
    return result.model_copy(update={"hits": hits, "k": k, "params": params})


def _digest(result: SearchResult) -> str:
    return hashlib.sha256(result.to_json().encode("utf-8")).hexdigest()


def _record(result: SearchResult) -> dict[str, Any]:
    """What the query log keeps of the rerank layer: the result's rerank record, k and the result digest."""
    return {**result.params["rerank"], "k": result.k, "digest": _digest(result)}


def reranked_search(
    search: SearchFn, db: Database, reranker: Reranker, name: str, query: str, n: int, kwargs: Mapping[str, Any]
) -> SearchResult:
    """``search`` for ``max(k, n)`` fused hits, reranked (:func:`rerank_result`), the rerank logged beside the search."""
    n = check_rerank(n)
    k = kwargs.get("k", REQUEST.k)
    if isinstance(k, bool) or not isinstance(k, int):
        raise QueryError(f"k must be an integer, got {k!r}.")
    fused = search(name, query, **{**kwargs, "k": max(k, n)})
    out = rerank_result(fused, reranker, n, k)
    if fused.query_id is not None:
        db.execute("UPDATE ranklock.query_log SET rerank = %s WHERE id = %s", [Jsonb(_record(out)), fused.query_id])
    return out


@dataclass
class RerankedReplay:
    """A search replay with its rerank layer: the fusion's report and the rerank comparison."""

    report: ReplayReport
    rerank: dict[str, Any]

    @property
    def identical(self) -> bool:
        return self.report.identical and bool(self.rerank["identical"])

    @property
    def differences(self) -> list[dict[str, Any]]:
        """The fusion's differences, then the rerank layer's (``where`` starts with ``rerank:``)."""
        return [*self.report.differences, *({"position": None, **d} for d in self.rerank["differences"])]

    def __getattr__(self, name: str) -> Any:
        # Everything else (query_id, snapshot_id, digests, differences) is the fusion's report.
        return getattr(self.report, name)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.report.to_dict(),
            "identical": self.identical,
            "differences": self.differences,
            "rerank": self.rerank,
        }


def replay_rerank(
    db: Database, search: SearchFn, reranker: Callable[[], Reranker], report: ReplayReport
) -> ReplayReport | RerankedReplay:
    """``report`` itself for a search that was not reranked; else the report with the rerank layer replayed."""
    row = db.fetchone("SELECT request, rerank FROM ranklock.query_log WHERE id = %s", [report.query_id])
    if row is None or row["rerank"] is None:
        return report
    from ..search.log import replaying

    logged: dict[str, Any] = row["rerank"]
    req: dict[str, Any] = row["request"]
    # The fused result again, unlogged and uncached (the replay context), then the reranker on it.
    with replaying():
        fused = search(
            req["collection"],
            req["query"],
            k=req["k"],
            mode=req["mode"],
            filter=req.get("filter"),
            snapshot=report.snapshot_id,
            as_of=req.get("as_of"),
            **req.get("params", {}),
        )
    fresh = _record(rerank_result(fused, reranker(), int(logged["n"]), int(logged["k"])))
    differences = [
        {"where": f"rerank:{key}", "logged": logged.get(key), "replayed": fresh.get(key)}
        for key in ("reranker", "n", "k", "order", "digest")
        if logged.get(key) != fresh.get(key)
    ]
    layer = {"identical": not differences, "differences": differences, "logged": logged, "replayed": fresh}
    return RerankedReplay(report=report, rerank=layer)
