"""Metric definitions (trec_eval), overlap measures and the stability core, as formulas."""

from __future__ import annotations

from math import log2

import pytest

from ranklock.errors import InputError
from ranklock.eval.metrics import mean, ndcg_at_k, recall_at_k, reciprocal_rank
from ranklock.eval.overlap import jaccard, rank_biased_overlap
from ranklock.eval.stability import stability_of_runs

QRELS = {"a": 1, "b": 1, "c": 0, "d": 2}


def test_recall_counts_relevant_in_top_k_over_all_relevant() -> None:
    ranking = ["a", "x", "b", "d"]
    assert recall_at_k(ranking, QRELS, 1) == pytest.approx(1 / 3)
    assert recall_at_k(ranking, QRELS, 3) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, QRELS, 100) == pytest.approx(3 / 3)
    # A judged-non-relevant document (grade 0) is not relevant.
    assert recall_at_k(["c"], QRELS, 1) == 0.0
    assert recall_at_k(["a"], {"a": 0}, 1) == 0.0


def test_ndcg_uses_grade_as_gain_and_log2_discount() -> None:
    # Relevant at ranks 1 and 3 of two relevant documents.
    assert ndcg_at_k(["a", "x", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(
        (1 / log2(2) + 1 / log2(4)) / (1 / log2(2) + 1 / log2(3))
    )
    # Graded: the ideal ranking puts the grade-2 document first; the cutoff applies to both.
    assert ndcg_at_k(["a", "x", "b", "d"], QRELS, 3) == pytest.approx(
        (1 / log2(2) + 1 / log2(4)) / (2 / log2(2) + 1 / log2(3) + 1 / log2(4))
    )
    assert ndcg_at_k(["a", "x", "b", "d"], QRELS, 10) == pytest.approx(
        (1 / log2(2) + 1 / log2(4) + 2 / log2(5)) / (2 / log2(2) + 1 / log2(3) + 1 / log2(4))
    )
    assert ndcg_at_k(["d", "a", "b"], QRELS, 10) == pytest.approx(1.0)
    assert ndcg_at_k([], QRELS, 10) == 0.0
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0


def test_reciprocal_rank_has_no_cutoff() -> None:
    assert reciprocal_rank(["x", "y", "b"], QRELS) == pytest.approx(1 / 3)
    assert reciprocal_rank(["c", "x"], QRELS) == 0.0
    assert mean([reciprocal_rank(["a"], QRELS), reciprocal_rank(["x", "d"], QRELS)]) == pytest.approx(
        (1 / 1 + 1 / 2) / 2
    )
    assert mean([]) == 0.0


@pytest.mark.parametrize("k", [0, -3, 2.5, True])
def test_bad_cutoff_is_an_input_error(k: object) -> None:
    with pytest.raises(InputError, match="cutoff k must be a positive integer"):
        recall_at_k(["a"], QRELS, k)  # type: ignore[arg-type]


def test_duplicate_documents_are_an_input_error() -> None:
    with pytest.raises(InputError) as exc:
        ndcg_at_k(["a", "b", "a"], QRELS, 10)
    assert str(exc.value) == "ranking lists document(s) a more than once; a ranking holds each document once."


def test_jaccard() -> None:
    assert jaccard(["a", "b", "c"], ["c", "b", "a"]) == 1.0
    assert jaccard(["a", "b", "c"], ["a", "b", "d"]) == pytest.approx(2 / 4)
    assert jaccard([], []) == 1.0
    assert jaccard(["a"], []) == 0.0


def test_rank_biased_overlap() -> None:
    p = 0.9
    assert rank_biased_overlap(["a", "b", "c"], ["a", "b", "c"], p) == pytest.approx(1.0)
    assert rank_biased_overlap(["a", "b"], ["c", "d"], p) == 0.0
    assert rank_biased_overlap([], [], p) == 1.0
    # Swapped pair, equal lengths k = 2: X_1 = 0, X_2 = 2.
    # RBO_ext = (1-p)/p * (0/1 p + 2/2 p^2) + 2/2 p^2
    assert rank_biased_overlap(["a", "b"], ["b", "a"], p) == pytest.approx((1 - p) / p * (p**2) + p**2)
    # Uneven lengths s = 1, l = 2, X_1 = 1, X_2 = 1 (eq. 32 of Webber et al.):
    # (1-p)/p * (1/1 p + 1/2 p^2 + 1*(2-1)/(1*2) p^2) + ((1-1)/2 + 1/1) p^2
    assert rank_biased_overlap(["a"], ["a", "b"], p) == pytest.approx((1 - p) / p * (p + p**2 / 2 + p**2 / 2) + p**2)
    # Position-aware: disagreement at the top costs more than at the bottom.
    top = rank_biased_overlap(["a", "b", "c", "d"], ["b", "a", "c", "d"], p)
    bottom = rank_biased_overlap(["a", "b", "c", "d"], ["a", "b", "d", "c"], p)
    assert top < bottom < 1.0
    with pytest.raises(InputError, match="RBO persistence p"):
        rank_biased_overlap(["a"], ["a"], 1.0)


def test_stability_of_runs_is_mean_pairwise_jaccard() -> None:
    runs = [{"q1": ["a", "b"], "q2": ["x"]}, {"q1": ["b", "c"], "q2": ["x"]}, {"q1": ["a", "b"], "q2": ["x"]}]
    out = stability_of_runs(runs, k=2)
    # q1 pairs: (1,2) = 1/3, (1,3) = 1, (2,3) = 1/3; q2: all 1.
    assert out["rsi"] == pytest.approx(((1 / 3 + 1 + 1 / 3) / 3 + 1) / 2)
    assert out["identical_share"] == pytest.approx(1 / 2)
    with pytest.raises(InputError, match="at least 2 runs"):
        stability_of_runs(runs[:1], k=2)
