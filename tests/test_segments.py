"""Segments (issue 24): a write costs what it changes, and results never depend on how the corpus was cut.

The same final documents, built in one go and built by many small ingests,
changes and deletes (then merged, or not), must give byte-identical hits in
every exact mode: lexical (every BM25 plan), exact semantic, and hybrid.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from fakes import use_hash_embedder
from lexical_helpers import reference_bm25
from ranklock import Document, Engine, IngestError
from ranklock.settings import ChunkerParams
from ranklock.snapshot.merge import SegmentSize, plan_merge
from test_bm25 import VOCAB

QUERIES = [
    "alpha bravo",
    "zephyr dune cobalt",
    "alpha canyon yonder umber",
    "river",
    "kettle alpha alpha",
    "glacier bravo delta echo foxtrot",
]


def zipf_corpus(n: int, seed: int) -> list[Document]:
    """Documents of Zipf-distributed words, several chunks each (24-token windows), typed ``bucket``."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(VOCAB) + 1)
    weights /= weights.sum()
    docs = []
    for i in range(n):
        words = rng.choice(VOCAB, size=int(rng.integers(8, 70)), p=weights)
        docs.append(Document(f"d{i:04d}", f"T{i % 7}", " ".join(words), {"bucket": i % 10}))
    return docs


def create(engine: Engine) -> dict[str, Any]:
    return {
        "embedder": use_hash_embedder(engine),
        "index": "exact",
        "chunker": ChunkerParams(window=24, overlap=4),
        "fields": ["bucket:int"],
    }


def hits(engine: Engine, name: str, query: str, **kw: Any) -> list[dict[str, Any]]:
    res = engine.search(name, query, k=20, depth=30, **kw)
    return json.loads(res.to_json())["hits"]


def every_result(engine: Engine, name: str) -> list[Any]:
    out = []
    for q in QUERIES:
        for mode in ("lexical", "semantic", "hybrid"):
            out.append(hits(engine, name, q, mode=mode))
            out.append(hits(engine, name, q, mode=mode, filter="bucket < 4"))
    return out


@pytest.fixture(scope="module")
def corpora(engine: Engine) -> tuple[str, str, list[Document]]:
    """``once``: the final documents built in one go; ``cut``: the same reached by 12 writes."""
    base = zipf_corpus(160, seed=21)
    changed = {d.doc_id: Document(d.doc_id, d.title, d.body + " kettle glacier", d.metadata) for d in base[::9]}
    deleted = {d.doc_id for d in base[5::13]}
    final = [changed.get(d.doc_id, d) for d in base if d.doc_id not in deleted]
    engine.ingest("t_seg_once", final, replace=True, create=create(engine))
    for i in range(0, len(base), 20):  # 8 ingests of 20 new documents
        engine.ingest("t_seg_cut", base[i : i + 20], create=create(engine))
    engine.ingest("t_seg_cut", list(changed.values())[:10])  # changes, in two writes
    engine.ingest("t_seg_cut", list(changed.values())[10:])
    engine.delete("t_seg_cut", sorted(deleted)[:6])  # deletes, in two writes
    engine.delete("t_seg_cut", sorted(deleted)[6:])
    return "t_seg_once", "t_seg_cut", final


def test_many_writes_give_the_hits_of_one_build(engine: Engine, corpora: tuple[str, str, list[Document]]) -> None:
    once, cut, final = corpora
    layout = engine.db.fetchall(
        "SELECT segment_id FROM ranklock.snapshot_segments WHERE snapshot_id = %s",
        [engine.collection(cut).active_snapshot_id],
    )
    assert len(layout) > 1  # the premise: the incremental snapshot really is cut into segments
    a, b = engine.collection(once), engine.collection(cut)
    sa = engine.snapshot_info(once)
    sb = engine.snapshot_info(cut)
    assert (sa.documents, sa.chunks) == (sb.documents, sb.chunks) == (len(final), sa.chunks)
    assert sa.corpus_digest == sb.corpus_digest
    assert sa.manifest and sb.manifest
    assert sa.manifest["embedder"]["vectors_digest"] == sb.manifest["embedder"]["vectors_digest"]
    assert a.name != b.name
    assert every_result(engine, once) == every_result(engine, cut)


def test_scores_equal_the_exhaustive_reference_over_segments(
    engine: Engine, corpora: tuple[str, str, list[Document]]
) -> None:
    _, cut, _ = corpora
    for q in QUERIES:
        res = engine.search(cut, q, k=30, mode="lexical", depth=30)
        got = [(h.doc_id, h.chunk, float(h.lexical_score or 0.0)) for h in res.hits]
        want = reference_bm25(engine, "t_seg_once", q, depth=30)
        assert [(d, c) for d, c, _ in got] == [(d, c) for d, c, _ in want]
        assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], rel=1e-12)


@pytest.mark.parametrize(
    ("plan", "knobs"),
    [
        ("impact", {"SEED_PER_TERM": 60, "PROBE": 0, "DEEPER": 0, "SKIP_LEVEL": 0}),
        ("impact", {"SEED_PER_TERM": 15, "PROBE": 1, "DEEPER": 0, "SKIP_LEVEL": 1}),
        ("impact", {"SEED_PER_TERM": 100, "PROBE": 5, "DEEPER": 3, "SKIP_LEVEL": 0}),
        ("dense", {"DENSE_SEEDS": 40, "DENSE_PROBE": 0}),
        ("dense", {"DENSE_SEEDS": 1024, "DENSE_PROBE": 250}),
        # The filter's admitted chunks listed once and looked up (not probed row by row).
        ("impact", {"SEED_PER_TERM": 15, "PROBE": 1, "DEEPER": 0, "SKIP_LEVEL": 1, "CONSTRAINED_WAYS": ("set",)}),
        ("dense", {"DENSE_SEEDS": 40, "DENSE_PROBE": 5, "CONSTRAINED_WAYS": ("set",)}),
    ],
)
def test_every_bm25_plan_is_exact_over_segments(
    engine: Engine,
    corpora: tuple[str, str, list[Document]],
    monkeypatch: pytest.MonkeyPatch,
    plan: str,
    knobs: dict[str, int],
) -> None:
    """The pruning plans bound weights of a segment's own statistics under the snapshot's: still exact."""
    import ranklock.search.bm25.costs as bm25_module

    once, cut, _ = corpora
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", ("set", "probe"))
    if plan == "impact":
        monkeypatch.setattr(bm25_module, "DENSE_MAX_TERMS", 0)
    for name, value in knobs.items():
        monkeypatch.setattr(bm25_module, name, value)
    for q in QUERIES:
        for depth in (1, 7, 30):
            for flt in (None, "bucket < 4"):
                _, params = engine.search_sql(cut, q, mode="lexical", depth=depth, filter=flt)
                assert params["bm25_plan"] == plan, (q, params["bm25_plan"])
                a = json.loads(engine.search(once, q, k=depth, mode="lexical", depth=depth, filter=flt).to_json())
                b = json.loads(engine.search(cut, q, k=depth, mode="lexical", depth=depth, filter=flt).to_json())
                assert a["hits"] == b["hits"], (q, depth, flt)


def test_segments_with_blocks_stored_as_vectors_search_alike(
    engine: Engine, corpora: tuple[str, str, list[Document]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Segments built before issue 22 hold their dense blocks as vectors: next to sparsevec ones, the same hits."""
    import ranklock.search.bm25.costs as bm25_module

    once, cut, _ = corpora
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", ("set", "probe"))
    sid = engine.collection(cut).active_snapshot_id
    segs = [
        int(r["segment_id"])
        for r in engine.db.fetchall(
            "SELECT segment_id FROM ranklock.snapshot_segments WHERE snapshot_id = %s ORDER BY segment_id", [sid]
        )
    ]
    assert len(segs) > 1
    older = segs[::2]  # every other segment, so the snapshot mixes both kinds

    def retype(to: str) -> None:
        for g in older:
            engine.db.execute(f"ALTER TABLE ranklock_data.dense_{g} ALTER COLUMN v TYPE {to} USING v::{to}")

    retype("vector")
    try:
        kinds = {
            r["t"]
            for r in engine.db.fetchall(
                "SELECT format_type(a.atttypid, a.atttypmod) AS t FROM pg_attribute AS a "
                "WHERE a.attname = 'v' AND a.attrelid = ANY (%s::regclass[])",
                [[f"ranklock_data.dense_{g}" for g in segs]],
            )
        }
        assert kinds == {"vector", "sparsevec"}
        for q in QUERIES:
            for depth in (1, 30):
                _, params = engine.search_sql(cut, q, mode="lexical", depth=depth)
                assert params["bm25_plan"] == "dense", q
                a = json.loads(engine.search(once, q, k=depth, mode="lexical", depth=depth).to_json())
                b = json.loads(engine.search(cut, q, k=depth, mode="lexical", depth=depth).to_json())
                assert a["hits"] == b["hits"], (q, depth)
    finally:
        retype("sparsevec")


def test_the_admitted_plan_is_exact_over_segments(
    engine: Engine, corpora: tuple[str, str, list[Document]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ranklock.search.bm25.costs as bm25_module

    once, cut, _ = corpora
    monkeypatch.setattr(bm25_module, "FULL_SCAN_POSTINGS", 0)
    monkeypatch.setattr(bm25_module, "CONSTRAINED_WAYS", ("admitted",))  # the admitted plan under any constraint
    for q in QUERIES:
        _, params = engine.search_sql(cut, q, mode="lexical", filter="bucket = 3")
        assert params["bm25_plan"] == "admitted"
        assert hits(engine, once, q, mode="lexical", filter="bucket = 3") == hits(
            engine, cut, q, mode="lexical", filter="bucket = 3"
        )


def test_a_merge_changes_no_exact_result(engine: Engine, corpora: tuple[str, str, list[Document]]) -> None:
    once, cut, _ = corpora
    before = every_result(engine, cut)
    out = engine.merge(cut, everything=True)
    assert out.snapshot_id is not None and len(out.segments) > 1
    segs = engine.db.fetchall(
        "SELECT segment_id FROM ranklock.snapshot_segments WHERE snapshot_id = %s", [out.snapshot_id]
    )
    assert len(segs) == 1
    assert engine.snapshot_info(cut).stats["dead_rows"] == 0  # the merge dropped the dead rows
    assert every_result(engine, cut) == before == every_result(engine, once)
    assert engine.merge(cut, everything=True).snapshot_id is None  # one segment: nothing to merge


def test_delete_masks_and_names_what_it_cannot_find(engine: Engine, cname: str) -> None:
    docs = zipf_corpus(12, seed=3)
    engine.ingest(cname, docs, create=create(engine))
    first = engine.collection(cname).active_snapshot_id
    out = engine.delete(cname, ["d0003"])
    assert out.deleted == ("d0003",) and out.parent_id == first
    assert all(h.doc_id != "d0003" for h in engine.search(cname, "alpha", k=50, mode="lexical").hits)
    assert any(h.doc_id == "d0003" for h in engine.search(cname, "alpha", k=50, mode="lexical", snapshot=first).hits)
    with pytest.raises(IngestError) as exc:
        engine.delete(cname, ["d0004", "nope", "d0003"])
    assert str(exc.value) == (
        f"snapshot {out.snapshot_id} of {cname!r} holds no 2 documents ('d0003', 'nope'); nothing was deleted. "
        "Check the ids (a search hit's doc_id), or pass --missing-ok to delete the others."
    )
    again = engine.delete(cname, ["d0004", "nope"], missing_ok=True)
    assert (again.deleted, again.missing) == (("d0004",), ("nope",))


def test_the_merge_policy_folds_small_segments_and_tiers() -> None:
    big = [SegmentSize(1, 2_000_000, 0)]
    assert plan_merge(big + [SegmentSize(i, 5, 0) for i in range(2, 6)]) == []  # 4 small: left alone
    assert plan_merge(big + [SegmentSize(i, 5, 0) for i in range(2, 7)]) == [2, 3, 4, 5, 6]
    tier = [SegmentSize(i, 50_000, 0) for i in range(10, 20)]
    assert plan_merge(big + tier) == list(range(10, 20))
    assert plan_merge(big + tier[:9]) == []
    assert plan_merge([SegmentSize(1, 100_000, 60_000)]) == [1]  # mostly dead: rewritten
    # A small collection fed one document at a time: its 9,000-chunk segment is left out of the merge.
    base = [SegmentSize(1, 9_000, 0)]
    assert plan_merge(base + [SegmentSize(i, 1, 0) for i in range(2, 7)]) == [2, 3, 4, 5, 6]
    four = [*base, SegmentSize(2, 5, 0), *(SegmentSize(i, 1, 0) for i in range(3, 7))]
    assert plan_merge(four) == []  # leaving out the 5 too would leave 4 to merge: not yet
    assert plan_merge([*four, SegmentSize(7, 1, 0)]) == [2, 3, 4, 5, 6, 7]  # 5 <= 1 + 1 + 1 + 1 + 1
    # Fed 20,000 one-chunk documents, the small segments stay few and every document is rewritten a few times.
    segs, rewritten, most = [*base], 0, 0
    for i in range(2, 20_002):
        segs.append(SegmentSize(i, 1, 0))
        picked = plan_merge(segs)
        if picked:
            merged = sum(g.chunks for g in segs if g.id in picked)
            rewritten += merged
            segs = [g for g in segs if g.id not in picked] + [SegmentSize(100_000 + i, merged, 0)]
        most = max(most, len(segs))
    print(f"20,000 one-chunk writes: at most {most} segments, {rewritten / 20_000:.1f} chunks rewritten per write")
    assert most <= 2 * 14 and rewritten / 20_000 <= 14  # log2(SMALL_CHUNKS) ~ 13.3


def month_docs(months: int = 24, per_month: int = 6) -> list[Document]:
    docs = []
    rng = np.random.default_rng(5)
    for m in range(months):
        year, month = 2023 + m // 12, m % 12 + 1
        for i in range(per_month):
            words = " ".join(rng.choice(VOCAB, size=20))
            docs.append(
                Document(
                    f"n{m:02d}-{i}",
                    "",
                    words,
                    {"published": f"{year}-{month:02d}-{1 + 4 * i:02d}", "tenant": f"t{i % 3}"},
                )
            )
    return docs


def test_a_month_window_routes_a_filter_to_its_segment(engine: Engine) -> None:
    """24 months, one segment each; a filter on one month reads one segment, with the scores of the whole."""
    create_win = {**create(engine), "fields": ["published:date!", "tenant:keyword"], "window": "published:month"}
    create_flat = {**create(engine), "fields": ["published:date!", "tenant:keyword"]}
    docs = month_docs()
    engine.ingest("t_seg_window", docs, replace=True, create=create_win)
    engine.ingest("t_seg_flat", docs, replace=True, create=create_flat)
    sid = engine.collection("t_seg_window").active_snapshot_id
    segs = engine.db.fetchall(
        "SELECT g.window_start, g.window_end FROM ranklock.snapshot_segments AS ss "
        "JOIN ranklock.segments AS g ON g.id = ss.segment_id WHERE ss.snapshot_id = %s ORDER BY 1",
        [sid],
    )
    assert len(segs) == 24 and str(segs[0]["window_start"].date()) == "2023-01-01"
    month = 'published >= "2024-03-01" and published < "2024-04-01"'
    for mode in ("lexical", "semantic", "hybrid"):
        one = engine.search("t_seg_window", "alpha bravo", k=10, mode=mode, filter=month)
        assert len(one.snapshot.segments) == 1, one.snapshot.segments
        assert one.params["segments"] == {"read": 1, "of": 24}
        flat = engine.search("t_seg_flat", "alpha bravo", k=10, mode=mode, filter=month)
        assert json.loads(one.to_json())["hits"] == json.loads(flat.to_json())["hits"]
        assert one.matching_count == flat.matching_count == 6
    # A filter the window cannot route (another field, an or) reads them all, and still agrees.
    for flt in ('tenant = "t1"', 'published < "2023-02-01" or tenant = "t2"'):
        wide = engine.search("t_seg_window", "alpha", k=10, filter=flt)
        assert len(wide.snapshot.segments) == 24
        assert (
            json.loads(wide.to_json())["hits"]
            == json.loads(engine.search("t_seg_flat", "alpha", k=10, filter=flt).to_json())["hits"]
        )
    # A later ingest into one month adds a segment of that month; the merge policy keeps keys apart.
    engine.ingest(
        "t_seg_window", [Document("late", "", "alpha late note", {"published": "2024-03-20", "tenant": "t0"})]
    )
    again = engine.search("t_seg_window", "alpha", k=10, filter=month)
    assert len(again.snapshot.segments) == 2 and any(h.doc_id == "late" for h in again.hits)
    out = engine.merge("t_seg_window", everything=True)
    assert out.snapshot_id is not None
    merged = engine.search("t_seg_window", "alpha", k=10, filter=month)
    assert len(merged.snapshot.segments) == 1
    assert [h.doc_id for h in merged.hits] == [h.doc_id for h in again.hits]


def test_a_window_needs_a_date_field(engine: Engine, cname: str) -> None:
    from ranklock import ConfigError

    with pytest.raises(ConfigError) as exc:
        engine.create_collection(cname, fields=["n:int"], window="n:month", embedder=use_hash_embedder(engine))
    assert str(exc.value) == (
        "window field 'n' is a int field; a window needs a date or timestamp field, e.g. --field n:date! --window n:month."
    )
    with pytest.raises(ConfigError, match="write FIELD:UNIT with a unit of day, week, month, year"):
        engine.create_collection(cname, fields=["d:date"], window="d:fortnight", embedder=use_hash_embedder(engine))


def every_text_in_the_database(engine: Engine) -> str:
    """Every text-like value of every table of the database, as one string (the purge check's haystack)."""
    from psycopg import sql as psql

    out = []
    tables = engine.db.fetchall(
        "SELECT table_schema AS s, table_name AS t FROM information_schema.tables "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'"
    )
    for r in tables:
        rows = engine.db.fetchall(psql.SQL("SELECT t::text AS x FROM {} AS t").format(psql.Identifier(r["s"], r["t"])))
        out += [row["x"] for row in rows]
    return "\n".join(out)


def test_purge_erases_a_document_from_every_table_and_replay_names_it(engine: Engine, cname: str) -> None:
    secret = "Quintelabrakeworthy ulterior zebrafinch"
    docs = [*zipf_corpus(20, seed=8), Document("victim", "Confidential", f"{secret} alpha bravo", {"bucket": 1})]
    engine.ingest(cname, docs, create=create(engine))
    first = engine.collection(cname).active_snapshot_id
    hit = engine.search(cname, "zebrafinch alpha", k=5)
    other = engine.search(cname, "glacier river", k=5, mode="lexical")  # the victim is in none of its lists
    assert any(h.doc_id == "victim" for h in hit.hits) and all(h.doc_id != "victim" for h in other.hits)
    engine.ingest(cname, [Document("victim", "Confidential", f"{secret} changed", {"bucket": 2})])  # a second version
    engine.ask(cname, "what is the zebrafinch?")
    assert "zebrafinch" in every_text_in_the_database(engine).lower()
    out = engine.purge(cname, ["victim"])
    assert out.documents == 1 and first in out.snapshots and out.log_entries_removed >= 1
    haystack = every_text_in_the_database(engine)
    for needle in ("victim", "zebrafinch", "Quintelabrakeworthy", "ulterior"):
        assert needle.lower() not in haystack.lower(), needle
    # Searches of every snapshot still run, and agree with a build of what is left.
    left = [d for d in docs if d.doc_id != "victim"]
    engine.ingest("t_seg_purge_ref", left, replace=True, create=create(engine))
    for sid in (first, engine.collection(cname).active_snapshot_id):
        got = engine.search(cname, "alpha bravo", k=10, mode="lexical", snapshot=sid)
        ref = engine.search("t_seg_purge_ref", "alpha bravo", k=10, mode="lexical")
        assert json.loads(got.to_json())["hits"] == json.loads(ref.to_json())["hits"]
    from ranklock import NotFound

    with pytest.raises(NotFound, match=f"query {hit.query_id} touched a document that purge {out.purge_id} erased"):
        engine.replay(hit.query_id)
    report = engine.replay(other.query_id)
    assert not report.identical and any(d["where"] == "purge" for d in report.differences)
