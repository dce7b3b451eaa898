"""Completeness: whether the result is the whole answer, and if not, why.

Every search first counts the documents that satisfy its filter and ``as_of``
(``matching_count``, ranklock.search.scope) with the very predicate every
branch uses.  The count picks the vector branch's strategy
(ranklock.search.semantic):

* ``exact``: the filtered set has at most ``exact_threshold`` chunks (or the
  collection has no ANN index).  Every filtered chunk is scored, so the branch
  is complete by construction;
* ``hnsw`` / ``ivfflat``: an index scan with pgvector's iterative scan
  (``strict_order`` for HNSW), bounded by ``max_scan_tuples`` / probes.

An index scan can still come back short: the budget runs out before enough
filtered rows were found.  The statement reports how many documents the
vector branch handed to fusion; when that is fewer than ``min(depth,
matching_count)`` the branch is re-run exactly (``exact_fallback``, the
default) or the response says ``complete: false, truncation:
"index_scan_budget"``.  Nothing is dropped silently.

``complete`` is true when the response holds ``min(k, matching_count)``
documents that are certainly the top of the chosen ranking, or, in lexical
mode, every matching document that contains the query's words.  An ANN index
(HNSW, IVFFlat) orders approximately, so a vector branch it served gives
``complete: false, truncation: "approximate_index"`` even when the count is
full; only an exact scan certifies the top.  Truncation reasons, strongest
first: ``index_scan_budget``, ``fusion_depth``, ``approximate_index``.
"""

from __future__ import annotations

from .spec import Scope, SearchSpec

__all__ = ["TRUNCATIONS", "judge"]

#: Why a response is not complete.
TRUNCATIONS = {
    "index_scan_budget": "the vector index stopped (ef_search / max_scan_tuples / probes) before it returned "
    "min(depth, matching_count) documents",
    "fusion_depth": "hybrid fusion saw at most `depth` documents per branch, fewer than k",
    "approximate_index": "the vector branch was served by an ANN index (hnsw / ivfflat) with enough documents, "
    "but its order is approximate: the true nearest documents are not guaranteed (raise exact_threshold above "
    "matching chunks for an exact scan)",
}


def judge(spec: SearchSpec, scope: Scope, returned: int, truncation: str | None, warnings: list[str]) -> str | None:
    """The truncation reason of a search that returned ``returned`` rows (None: complete); appends warnings.

    ``truncation`` is what the run already found (``index_scan_budget``).
    """
    expected = min(spec.k, scope.documents)
    if truncation is None and returned < expected:
        if any(b.ranks_every_document for b in spec.branches):
            # A branch that ranks every admitted document is complete to `depth`, so
            # only fusion's depth can have kept documents out (hybrid with depth < k).
            truncation = "fusion_depth"
            warnings.append(
                f"{returned} of {expected} matching documents returned: hybrid fusion takes {spec.depth} "
                f"per branch; raise depth to at least k={spec.k}"
            )
        else:
            warnings.append(
                f"{returned} of the {scope.documents} matching documents contain the query's words; "
                "lexical mode ranks only those (use hybrid or semantic mode to rank all)"
            )
    if truncation is None and any(b.approximate for b in spec.branches):
        # The index returned enough documents, but an ANN index cannot certify
        # they are the true nearest ones: say so rather than claim the top.
        truncation = "approximate_index"
    return truncation
