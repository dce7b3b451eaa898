"""The ranking rules a snapshot is pinned to (issue 22): query-term frequency and tie blocks in RRF."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fakes import use_hash_embedder
from lexical_helpers import lexical, reference_bm25
from ranklock import Document, Engine, SnapshotError
from test_bm25 import assert_same

K = 60

# Five identical notes (a tie block in both branches) and distinct ones after them.
SAME = "Flew to Lisbon for the conference and stayed two nights near the harbour."
DOCS = [Document(f"same-{i}", "Trip", SAME) for i in range(5)] + [
    Document("bike", "Theft", "Somebody stole my bicycle outside the library; two nights of rain since."),
    Document("flight", "Trip", "Flew home after two nights."),
    Document("other", "Garden", "Planted garlic and two rows of broad beans."),
]


@pytest.fixture(scope="module")
def tied(engine: Engine) -> str:
    engine.ingest("t_rules_tied", DOCS, replace=True, create={"embedder": use_hash_embedder(engine), "index": "exact"})
    return "t_rules_tied"


def _strip_rules(engine: Engine, name: str, ranking: dict[str, str] | None) -> None:
    """Make the active snapshot look as if built before issue 22 (no rules), or under ``ranking``."""
    sid = engine.collection(name).active_snapshot_id
    if ranking is None:
        engine.db.execute("UPDATE ranklock.snapshots SET manifest = manifest - 'ranking' WHERE id = %s", [sid])
    else:
        engine.db.execute(
            "UPDATE ranklock.snapshots SET manifest = jsonb_set(manifest, '{ranking}', %s::jsonb) WHERE id = %s",
            [json.dumps(ranking), sid],
        )


def test_new_snapshots_record_their_rules(engine: Engine, tied: str) -> None:
    assert engine.manifest(tied)["ranking"] == {"bm25": "bm25/2", "fusion": "rrf/2"}


def test_a_tie_block_shares_the_weights_of_the_positions_it_spans(engine: Engine, tied: str) -> None:
    res = engine.search(tied, "flew two nights lisbon", k=8, mode="lexical")
    block = [h for h in res.hits if h.doc_id.startswith("same-")]
    assert [h.lexical_rank for h in block] == [1] * 5  # a tie is still reported as a tie ...
    assert len({h.score for h in block}) == 1 and len({h.tie_group for h in block}) == 1
    # ... and the five share positions 1..5: together they weigh what five ranks weigh, not five first places.
    shared = (1 / (K + 1) + 1 / (K + 2) + 1 / (K + 3) + 1 / (K + 4) + 1 / (K + 5)) / 5
    assert block[0].score == shared
    nxt = res.hits[5]
    assert nxt.lexical_rank == 6 and nxt.score == 1 / (K + 6)


def test_hybrid_adds_the_shared_weights_of_both_branches(engine: Engine, tied: str) -> None:
    q = "flew two nights lisbon"
    hyb = engine.search(tied, q, k=8)
    block = [h for h in hyb.hits if h.doc_id.startswith("same-")]
    # Identical texts: identical vectors too, so the block ties in both branches.
    assert len({h.semantic_rank for h in block}) == 1
    r = block[0].semantic_rank
    assert r is not None
    lex = (1 / (K + 1) + 1 / (K + 2) + 1 / (K + 3) + 1 / (K + 4) + 1 / (K + 5)) / 5
    sem = sum(1 / (K + p) for p in range(r, r + 5)) / 5
    assert block[0].score == lex + sem


def test_a_repeated_query_term_counts_once_per_occurrence(engine: Engine, tied: str) -> None:
    once = lexical(engine, tied, "nights bicycle")
    twice = lexical(engine, tied, "nights bicycle bicycle")
    assert_same(twice, reference_bm25(engine, tied, "nights bicycle bicycle"))
    by_doc = {d: s for d, _, s in once}
    again = {d: s for d, _, s in twice}
    # "bike" holds both terms: its bicycle weight is added twice; a note without "bicycle" scores as before.
    assert again["bike"] > by_doc["bike"]
    assert again["flight"] == by_doc["flight"]


def test_a_snapshot_without_rules_keeps_the_first_rules(engine: Engine, cname: str) -> None:
    engine.ingest(cname, DOCS, replace=True, create={"embedder": use_hash_embedder(engine), "index": "exact"})
    _strip_rules(engine, cname, None)
    res = engine.search(cname, "flew two nights lisbon", k=8, mode="lexical")
    # rrf/1: competition ranks, each tied document weighs the first place.
    assert [h.score for h in res.hits[:5]] == [1 / (K + 1)] * 5
    # bm25/1: each distinct query term once.
    q = "nights bicycle bicycle"
    assert_same(lexical(engine, cname, q), reference_bm25(engine, cname, q, query_tf=False))
    assert_same(lexical(engine, cname, q), lexical(engine, cname, "nights bicycle"))


def test_an_unknown_rule_is_refused_not_guessed(engine: Engine, cname: str) -> None:
    engine.ingest(cname, DOCS, replace=True, create={"embedder": use_hash_embedder(engine), "index": "exact"})
    _strip_rules(engine, cname, {"bm25": "bm25/9", "fusion": "rrf/2"})
    with pytest.raises(SnapshotError) as exc:
        engine.search(cname, "bicycle")
    assert str(exc.value) == (
        "the snapshot was built under ranking rule bm25 = 'bm25/9', which this version of ranklock does not know "
        "(it knows bm25/1, bm25/2); upgrade ranklock to search it."
    )


@pytest.mark.slow
def test_demo_journal_two_wheeler_question_finds_the_bicycle_note(engine: Engine, tmp_path: Path) -> None:
    """The demo's own case (issue 22): 35 "Flew to X ... stayed two nights" notes tie at lexical rank 1 for
    "two-wheeler"; under rrf/1 they outvoted the bicycle note (semantic rank 1), hybrid 31st.  Real model."""
    from ranklock.domains.journal import JOURNAL_CREATE, generate_journal

    # The notes holding a query word ("two", or the bicycle note), and every tenth other one for the statistics.
    notes = [
        n for i, n in enumerate(generate_journal().notes) if i % 10 == 0 or re.search(r"\btwo\b|bicycle", n.text, re.I)
    ]
    path = tmp_path / "journal.jsonl"
    path.write_text("".join(json.dumps(n.record()) + "\n" for n in notes), encoding="utf-8")
    engine.ingest("t_rules_journal", path, replace=True, create=dict(JOURNAL_CREATE))
    q = "Where was my two-wheeler pinched?"
    lex = engine.search("t_rules_journal", q, k=40, mode="lexical")
    assert sum(h.lexical_rank == 1 for h in lex.hits) >= 30  # the tie block is there
    res = engine.search("t_rules_journal", q, k=3)
    assert any("stole my bicycle" in h.text for h in res.hits), [h.text for h in res.hits]
