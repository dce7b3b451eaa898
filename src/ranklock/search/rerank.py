"""The rerank stage: the top ``N`` fused hits reordered by a reranker, a stage of the one search pipeline.

``search(..., rerank=N)`` runs the statement for ``max(k + offset, N)`` fused hits, then
:func:`rerank_result` (the post-stage, ranklock.search.pipeline):

1. the reranker scores (query, text) for the top ``N`` fused hits;
2. those hits are ordered by score, high first, ties broken by ``doc_id`` (byte
   order) and then chunk, like every ranking step of ranklock;
3. the fused hits below ``N`` follow in their fused order; ranks are counted
   again from 1 and the result is cut to ``k``;
4. ``params["rerank"]`` records the reranker (name, model, weights sha256,
   settings), ``N`` and the reranked order ``[doc_id, chunk, fused rank, score]``,
   so the result's JSON (and its digest) says what reranked it.

The search is logged once, as served: its request with ``rerank`` and its reranked hits, the
fusion's branch candidates, and the rerank record in ``query_log.rerank`` (migration 0009).
A replay reports the rerank layer apart from the fusion's differences (ranklock.search.replay).  An
entry logged before the stage was logged with the search (its request without ``rerank``, its
result the fused one) replays the same way: the fused result again, then the reranker on it.
A search without ``rerank`` never reaches this module: its bytes are unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import QueryError
from ..limits import MAX_K
from ..rerank.base import Reranker
from .ties import branch_tie_groups

if TYPE_CHECKING:
    from .results import SearchResult

__all__ = ["check_rerank", "rerank_result"]


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
