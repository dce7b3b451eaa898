"""The pure helpers of bench/peers.py: the reference pipeline's RRF, ranking, best chunk, split, BM25.

Expected values are written as the formulas they come from (ranx's habit).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import peers


def test_rrf_sums_reciprocal_ranks_over_the_rankings() -> None:
    fused = peers.rrf([["b", "a", "c"], ["a", "d", "b"]], k=60)
    assert fused == [
        ("a", 1 / (60 + 2) + 1 / (60 + 1)),
        ("b", 1 / (60 + 1) + 1 / (60 + 3)),
        ("d", 1 / (60 + 2)),
        ("c", 1 / (60 + 3)),
    ]


def test_rrf_breaks_equal_scores_by_doc_id_not_by_list_order() -> None:
    # x and y both score 1/(60+1) + 1/(60+2), whichever list puts which first.
    for rankings in ([["x", "y"], ["y", "x"]], [["y", "x"], ["x", "y"]]):
        fused = peers.rrf(rankings, k=60)
        assert [d for d, _ in fused] == ["x", "y"]
        assert fused[0][1] == fused[1][1] == 1 / (60 + 1) + 1 / (60 + 2)
    # One document only in each branch, at the same rank: a tie, id order.
    assert peers.rrf([["q", "p"], ["z", "m"]], k=60) == [
        ("q", 1 / (60 + 1)),
        ("z", 1 / (60 + 1)),
        ("m", 1 / (60 + 2)),
        ("p", 1 / (60 + 2)),
    ]


def test_rrf_refuses_a_ranking_that_lists_a_document_twice() -> None:
    with pytest.raises(ValueError, match="lists a document twice"):
        peers.rrf([["a", "b", "a"]])


def test_top_documents_ties_by_id_and_positive_only() -> None:
    ids = ["a", "b", "c", "d"]
    scores = np.array([0.5, 0.9, 0.5, 0.0])
    assert peers.top_documents(ids, scores, 10) == ["b", "a", "c", "d"]
    assert peers.top_documents(ids, scores, 2) == ["b", "a"]
    assert peers.top_documents(ids, scores, 10, positive=True) == ["b", "a", "c"]
    with pytest.raises(ValueError, match="must be sorted"):
        peers.top_documents(["b", "a"], np.array([1.0, 1.0]), 2)
    with pytest.raises(ValueError, match="2 documents but 1 scores"):
        peers.top_documents(["a", "b"], np.array([1.0]), 2)


def test_best_per_document_is_the_max_over_each_documents_chunks() -> None:
    # Documents of 2, 1 and 3 chunks.
    scores = np.array([0.2, 0.7, 0.4, 0.1, 0.9, 0.3])
    assert peers.best_per_document(np.array([0, 2, 3]), scores).tolist() == [
        max(0.2, 0.7),
        0.4,
        max(0.1, 0.9, 0.3),
    ]


def test_split_queries_is_seeded_disjoint_and_order_free() -> None:
    qids = [str(i) for i in range(11)]
    tuning, held = peers.split_queries(qids, seed=22)
    assert (len(tuning), len(held)) == (11 // 2, 11 - 11 // 2)
    assert set(tuning).isdisjoint(held) and set(tuning) | set(held) == set(qids)
    assert peers.split_queries(list(reversed(qids)), seed=22) == (tuning, held)
    assert peers.split_queries(qids, seed=23) != (tuning, held)


def test_collapsing_and_query_terms_once() -> None:
    assert peers.first_per_document(["d2", "d1", "d2", "d3", "d1"]) == ["d2", "d1", "d3"]
    assert peers.each_once(["tumor", "cell", "tumor"]) == ["tumor", "cell"]


def test_bm25_counts_a_repeated_query_term_per_occurrence() -> None:
    # Lucene's BM25 (bm25s method "lucene"): idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
    # weight = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)).  N = 2, avgdl = (2 + 1) / 2.
    index = peers.Bm25([["x", "y"], ["y"]], k1=1.2, dtype="float64")
    x_in_doc0 = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5)) * 1 / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / 1.5))
    assert index.scores(["x"]).tolist() == pytest.approx([x_in_doc0, 0.0], rel=1e-12)
    assert index.scores(["x", "x"]).tolist() == pytest.approx([2 * x_in_doc0, 0.0], rel=1e-12)
    assert index.scores(peers.each_once(["x", "x"])).tolist() == pytest.approx([x_in_doc0, 0.0], rel=1e-12)
    # A query of unknown terms scores nothing rather than failing.
    assert index.scores(["unseen"]).tolist() == [0.0, 0.0]
