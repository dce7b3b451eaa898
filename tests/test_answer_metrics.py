"""Answer metrics as pure functions, expected values written as formulas (ranklock.eval)."""

from __future__ import annotations

import pytest

from ranklock.errors import InputError
from ranklock.eval.abstention import abstention_accuracy, false_abstention_rate
from ranklock.eval.answer_correctness import answer_correct, normalise_answer
from ranklock.eval.citations import citation_precision, citation_recall, mean_defined
from ranklock.eval.metrics import recall_at_k
from ranklock.eval.reranker_trigger import (
    GAP,
    RECALL_HIGH,
    class_verdict,
    diagnose_question,
    explain_verdict,
    trigger_fires,
)


def test_normalise_answer_folds_case_accents_punctuation_and_articles() -> None:
    assert normalise_answer("The  Root-Cause: Páramo!") == "root cause paramo"
    assert normalise_answer("XJ-900") == "xj 900"
    assert normalise_answer("An ACORDEÃO") == "acordeao"
    # ø has no decomposition: it stays, on both sides alike.
    assert normalise_answer("Tromsø") == "tromsø"


def test_answer_correct_is_containment_on_word_bounds() -> None:
    assert answer_correct("She has started lessons on the cello. [1]", "cello")
    assert not answer_correct("He plays two oboes.", "oboe")
    assert answer_correct("Reversing: from Hetzner to Linode", "Hetzner; Linode")
    assert not answer_correct("Reversing: from Hetzner", "Hetzner; Linode")
    assert answer_correct("Vai mudar-se para Macau em setembro.", "macau")
    assert not answer_correct("anything at all", "")


def test_citation_precision_and_recall_count_distinct_notes() -> None:
    assert citation_precision(["a", "b", "b", "c"], ["a", "d"]) == 1 / 3
    assert citation_recall(["a", "b", "b", "c"], ["a", "d"]) == 1 / 2
    assert citation_precision(["a"], ["a", "d"]) == 1 / 1
    assert citation_precision([], ["a"]) is None
    assert citation_recall(["a"], []) is None
    assert mean_defined([1 / 3, None, 1.0]) == ((1 / 3 + 1.0) / 2, 2)
    assert mean_defined([None]) == (None, 0)


def test_abstention_accuracy_and_false_abstention_rate() -> None:
    abstained = [True, True, False, True, False]
    answerable = [False, False, False, True, True]
    assert abstention_accuracy(abstained, answerable) == 2 / 3
    assert false_abstention_rate(abstained, answerable) == 1 / 2
    assert abstention_accuracy([False], [True]) is None
    with pytest.raises(InputError) as exc:
        abstention_accuracy([True], [True, False])
    assert str(exc.value) == (
        "abstention flags (1) and answerable flags (2) differ in length; give one of each per question."
    )


def test_recall_at_8_and_10_of_gold_notes() -> None:
    ranking = [f"n{i}" for i in range(1, 11)]
    gold = {"n3": 1, "n9": 1, "zz": 1}
    assert recall_at_k(ranking, gold, 8) == 1 / 3
    assert recall_at_k(ranking, gold, 10) == 2 / 3


def test_diagnose_question_blames_the_right_layer() -> None:
    assert diagnose_question(True, {}, ["a"], chunks=8) == "correct"
    assert diagnose_question(False, {"a": 2}, ["a", "b"], chunks=8) == "not_retrieved"
    assert diagnose_question(False, {"a": 2, "b": 9}, ["a", "b"], chunks=8) == "buried"
    assert diagnose_question(False, {"a": 2, "b": 8}, ["a", "b"], chunks=8) == "generator"


def test_trigger_and_class_verdict_thresholds() -> None:
    assert trigger_fires(0.95, 0.95 - GAP - 0.01)
    assert not trigger_fires(0.95, 0.95 - GAP + 0.01)
    assert not trigger_fires(RECALL_HIGH - 0.01, 0.0)
    assert class_verdict(RECALL_HIGH - 0.01, 0.0) == "retrieval"
    assert class_verdict(0.95, 0.95 - GAP - 0.01, buried=2, generator=2) == "ordering"
    assert class_verdict(0.95, 0.95 - GAP - 0.01, buried=1, generator=2) == "generator"
    assert class_verdict(0.95, 0.95 - GAP + 0.01, buried=5, generator=0) == "fine"


def test_verdict_messages_name_the_questions() -> None:
    assert explain_verdict("ordering", 0.9, 0.5, ["q1"], ["q2"]) == (
        "reranker trigger: recall@10 is 0.90 but correctness only 0.50; ordering buries the right chunk. "
        "Gold note ranked below the chunks handed over: q1. Gold notes all handed over, answer still wrong: q2. "
        "Turn the reranker on: `ranklock ask --rerank 40` (or eval --answers --rerank 40 to measure it), with "
        "RANKLOCK_RERANKER set to a cross-encoder directory or a /rerank endpoint."
    )
    assert explain_verdict("generator", 0.9, 0.5, [], ["q2", "q3"]) == (
        "reranker trigger: recall@10 is 0.90 but correctness only 0.50; the trigger fires but ordering is not the "
        "main cause: the generator missed notes it was given. Gold note ranked below the chunks handed over: none. "
        "Gold notes all handed over, answer still wrong: q2, q3. A reranker would not fix these: leave --rerank "
        "off and improve the generator."
    )
    assert explain_verdict("retrieval", 0.5, 0.1, [], []) == (
        "recall@10 is 0.50 (below 0.8): the right notes are not retrieved; chunking or the embedder is at "
        "fault, a reranker cannot help."
    )
