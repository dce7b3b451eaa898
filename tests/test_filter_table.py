"""A segment's filter table: each chunk's typed fields alone, where the lexical plans and the count check a constraint.

Built with the segment; an older segment without one is read through its chunk table (the same
columns by the same names), and ``Engine.lexical_stats`` gives it one: answers and counts identical
before and after, bit for bit, under every plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from psycopg import sql

from lexical_helpers import ingest_bucketed, lexical, reference_bm25
from ranklock import Document, Engine
from ranklock.search.bm25 import costs as bm25_module
from ranklock.snapshot.segments import read_layout
from test_bm25 import QUERIES, assert_same, bucket_docs

#: Each filter, and what it admits of a document's bucket (its number mod 10: test_bm25.bucket_docs).
FILTERS: dict[str, Callable[[int], bool]] = {
    "bucket < 1": lambda b: b < 1,
    "bucket < 4": lambda b: b < 4,
    "bucket between 2 and 8": lambda b: 2 <= b <= 8,
    "bucket = 5 or bucket is null": lambda b: b == 5,
    "bucket >= 9": lambda b: b >= 9,
}


def reference(engine: Engine, name: str, query: str, flt: str, depth: int = 20) -> list[tuple[str, int, float]]:
    """The exhaustive reference's ranking, filtered in Python."""
    everything = reference_bm25(engine, name, query, depth=1000)
    return [h for h in everything if FILTERS[flt](int(h[0][3:]) % 10)][:depth]


@pytest.fixture(scope="module")
def buckets(engine: Engine) -> str:
    name = "t_filter_table"
    ingest_bucketed(engine, name, bucket_docs())
    return name


def fields_table(engine: Engine, sid: int) -> str | None:
    row = engine.db.fetchone("SELECT to_regclass(%s)::text AS t", [f"ranklock_data.fields_{sid}"])
    assert row is not None
    return row["t"]


def answers(engine: Engine, name: str) -> list[Any]:
    out: list[Any] = []
    for flt in FILTERS:
        for q in QUERIES:
            res = engine.search(name, q, k=20, mode="lexical", depth=20, filter=flt)
            out.append((flt, q, res.matching_count, res.params["matching_chunks"], [h.model_dump() for h in res.hits]))
    return out


def test_a_segment_is_built_with_its_filter_table(engine: Engine, buckets: str) -> None:
    sid = int(engine.collection(buckets).active_snapshot_id or 0)
    assert fields_table(engine, sid) == f"ranklock_data.fields_{sid}"
    cols = engine.db.fetchall(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 ORDER BY attnum",
        [f"ranklock_data.fields_{sid}"],
    )
    assert [c["attname"] for c in cols] == ["row_id", "doc_id", "chunk", "effective_from", "effective_to", "bucket"]
    (g,) = read_layout(engine.db, sid).segments
    n = engine.db.fetchone(
        sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier("ranklock_data", f"chunks_{sid}"))
    )
    assert g.filter == {"version": 1, "rows": n and n["n"]}
    # The plans and the count read it, not the chunk table, to check the constraint.
    text, _ = engine.search_sql(buckets, "alpha bravo", mode="lexical", filter="bucket < 4")
    assert f'"ranklock_data"."fields_{sid}"' in text


@pytest.mark.parametrize(
    ("plan", "admit"),
    [("full", None), ("impact", "probe"), ("impact", "set"), ("dense", "probe"), ("dense", "set"), ("admitted", None)],
)
def test_every_plan_checks_constraints_on_it_and_matches_the_reference(
    engine: Engine, buckets: str, plan: str, admit: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if plan != "full":
        monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    if plan == "impact":
        monkeypatch.setattr(bm25_module, "DENSE_MAX_TERMS", 0)
    if plan in ("impact", "dense"):
        monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", ("set", "probe"))
        # The admitted set listed once (set), or each candidate's row probed (probe).
        monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", (admit,))
    if plan == "admitted":
        monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", ("admitted",))
    taken = set()
    for flt in FILTERS:
        for q in QUERIES:
            text, params = engine.search_sql(buckets, q, mode="lexical", filter=flt)
            taken.add((params["bm25_plan"], params.get("bm25_admit")))
            assert ("adm AS MATERIALIZED" in text) == (params.get("bm25_admit") == "set" or plan == "admitted")
            assert_same(lexical(engine, buckets, q, depth=20, filter=flt), reference(engine, buckets, q, flt))
    assert (plan, admit) in taken


def test_an_older_segment_is_read_through_its_chunks_then_given_one(engine: Engine, cname: str) -> None:
    sid = ingest_bucketed(engine, cname, bucket_docs()[:120])
    before = answers(engine, cname)
    # As a segment built before filter tables: none, and nothing in its stats.
    with engine.db.connection() as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier("ranklock_data", f"fields_{sid}")))
        conn.execute("UPDATE ranklock.segments SET stats = stats - 'filter' WHERE id = %s", [sid])
    text, _ = engine.search_sql(cname, "alpha bravo", mode="lexical", filter="bucket < 4")
    assert "fields_" not in text and f'"ranklock_data"."chunks_{sid}"' in text
    assert answers(engine, cname) == before
    engine.lexical_stats(cname)
    assert fields_table(engine, sid) is not None
    assert answers(engine, cname) == before
    engine.lexical_stats(cname)  # idempotent


def test_a_purge_deletes_its_rows(engine: Engine, cname: str) -> None:
    sid = ingest_bucketed(engine, cname, bucket_docs()[:60])
    gone = engine.search(cname, "alpha", k=1, mode="lexical").hits[0].doc_id
    engine.purge(cname, [gone])
    table = sql.Identifier("ranklock_data", f"fields_{sid}")
    assert engine.db.fetchone(sql.SQL("SELECT count(*) AS n FROM {} WHERE doc_id = %s").format(table), [gone]) == {
        "n": 0
    }
    chunks = sql.Identifier("ranklock_data", f"chunks_{sid}")
    left = engine.db.fetchone(
        sql.SQL("SELECT (SELECT count(*) FROM {}) - (SELECT count(*) FROM {}) AS d").format(table, chunks)
    )
    assert left == {"d": 0}
    assert all(h.doc_id != gone for h in engine.search(cname, "alpha", k=60, mode="lexical", filter="bucket < 9").hits)


def test_a_later_write_gets_its_own_and_searches_as_one_segment_does(engine: Engine, cname: str) -> None:
    docs = bucket_docs()[:200]
    changed = [Document(d.doc_id, d.title, d.body + " alpha", d.metadata) for d in docs[150:]]
    ingest_bucketed(engine, cname, docs[:150])
    engine.ingest(cname, changed)
    layout = read_layout(engine.db, int(engine.collection(cname).active_snapshot_id or 0))
    assert len(layout.segments) == 2 and all(g.filter for g in layout.segments)
    whole = cname[:50] + "_one"
    ingest_bucketed(engine, whole, docs[:150] + changed)
    for flt in FILTERS:
        for q in QUERIES:
            got = engine.search(cname, q, k=20, mode="lexical", depth=20, filter=flt)
            want = engine.search(whole, q, k=20, mode="lexical", depth=20, filter=flt)
            assert [(h.doc_id, h.chunk, h.lexical_score) for h in got.hits] == [
                (h.doc_id, h.chunk, h.lexical_score) for h in want.hits
            ]
            assert got.matching_count == want.matching_count
