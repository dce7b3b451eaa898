"""No metadata key can collide with a name ranklock's SQL uses (issue 48, finding 7).

The issue: a note whose front matter said ``seg: x`` got a typed field ``seg`` at the collection's first
ingest, and from then on every lexical and hybrid search failed (``AmbiguousColumn: column reference "seg"
is ambiguous``): the union over a snapshot's segments is ``SELECT <id> AS seg, t.*``.  Two long keys that
share their first fifty characters failed the ingest itself (their index names, cut to 63 bytes, were one).

The names tried here are not a list copied into the test: they are every identifier of the SQL the search
shapes send (traced, comments and string literals set aside, PostgreSQL's reserved words dropped) and every
column of the tables those statements read, so a column or an alias added to the SQL later is tried too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql
from typer.testing import CliRunner

from fakes import HashEmbedder, resolve_hash_embedder_by_id, use_hash_embedder
from ranklock import ConfigError, Document, Engine
from ranklock.cli import app
from ranklock.collection import RESERVED_COLUMNS, reserved_kind
from ranklock.search.bm25 import costs
from ranklock.settings import ChunkerParams
from ranklock.store.tables import ADDED_COLUMNS, SCHEMA, segment_table

#: Every shape of search whose SQL differs: each mode, filtered, as_of, both lexical rankers, websearch
#: syntax, the exact and the index vector scans, a later page, and each BM25 plan (forced below).
SHAPES: list[tuple[str, dict[str, Any]]] = [
    *[(mode, {"mode": mode}) for mode in ("lexical", "semantic", "hybrid")],
    *[(f"{mode}+filter", {"mode": mode, "filter": "bucket >= 3"}) for mode in ("lexical", "semantic", "hybrid")],
    *[(f"{mode}+as_of", {"mode": mode, "as_of": "2020-06-01T00:00:00Z"}) for mode in ("lexical", "hybrid")],
    ("ts_rank_cd", {"lexical_ranker": "ts_rank_cd", "filter": "bucket = 1"}),
    ("websearch", {"query_syntax": "websearch", "query": 'alpha -bravo "canyon delta"'}),
    ("exact", {"exact_threshold": 10**9, "filter": "bucket = 1"}),
    ("index", {"exact_threshold": 0, "filter": "bucket = 1"}),
    ("offset", {"offset": 3}),
]
#: (FULL_SCAN_POSTINGS, DENSE_MAX_TERMS, CONSTRAINED_WAYS): the impact and dense plans, and under a filter
#: each way of meeting it (ranklock.search.bm25.choose_admitted_plan).
PLANS: list[tuple[int, int, tuple[str, ...]]] = [
    (0, 0, ("admitted", "set", "probe")),
    (0, 64, ("admitted", "set", "probe")),
    (0, 0, ("admitted",)),
    (0, 0, ("set",)),
    (0, 0, ("probe",)),
    (0, 64, ("set",)),
    (0, 64, ("probe",)),
]
WORDS = ["alpha", "bravo", "canyon", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]


def corpus(keys: list[str]) -> list[Document]:
    """60 documents of a few words each (chunks of 24 tokens), ``bucket`` 0-9, and a string under each key."""
    docs = []
    for i in range(60):
        words = [WORDS[(i * 7 + j * j) % len(WORDS)] for j in range(4 + i % 30)]
        meta: dict[str, Any] = {"bucket": i % 10, **{k: f"v{i % 3}" for k in keys}}
        if i % 7 == 0:
            meta["effective_to"] = "2021-01-01T00:00:00Z"
        docs.append(Document(f"doc{i:03d}", "", " ".join(words), meta))
    return docs


def ingest(engine: Engine, name: str, keys: list[str]) -> None:
    create = {"embedder": use_hash_embedder(engine), "chunker": ChunkerParams(window=24, overlap=4)}
    docs = corpus(keys)
    engine.ingest(name, docs, replace=True, create=create)
    engine.ingest(name, docs[:5])  # a second segment, and dead rows in the first


def run_shapes(engine: Engine, name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Each shape's hit ids, then each plan's (lexical, unfiltered and filtered)."""
    out: dict[str, list[str]] = {}
    for label, kw in SHAPES:
        kw = dict(kw)
        query = kw.pop("query", "alpha bravo")
        out[label] = [h.doc_id for h in engine.search(name, query, k=10, **kw).hits]
    for full, dense, ways in PLANS:
        with monkeypatch.context() as m:
            m.setattr(costs, "FULL_SCAN_POSTINGS", full)
            m.setattr(costs, "DENSE_MAX_TERMS", dense)
            m.setattr(costs, "CONSTRAINED_WAYS", ways)
            for flt in (None, "bucket >= 3"):
                res = engine.search(name, "alpha bravo", k=10, mode="lexical", filter=flt)
                out[f"plan {dense} {ways} {flt}"] = [h.doc_id for h in res.hits]
    return out


def sql_names(engine: Engine, statements: list[str]) -> set[str]:
    """Every identifier of ``statements`` that could be a field name, and every column of the tables they read."""
    text = "\n".join(statements)
    text = re.sub(r"--[^\n]*", " ", text)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"'(?:[^']|'')*'", "''", text)
    words = set(re.findall(r'"([^"]+)"', text)) | set(re.findall(r"\b([a-z][a-z0-9_]*)\b", text))
    keywords = {r["word"] for r in engine.db.fetchall("SELECT word FROM pg_get_keywords() WHERE catcode = 'R'")}
    tables = {w for w in words if re.fullmatch(r"[a-z]+_\d+", w)} | {
        r["relname"]
        for r in engine.db.fetchall(
            "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'ranklock' AND c.relkind IN ('r', 'p', 'v')"
        )
    }
    columns = {
        r["attname"]
        for r in engine.db.fetchall(
            "SELECT a.attname FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname IN ('ranklock', %s) AND c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped",
            [SCHEMA, sorted(tables)],
        )
    }
    # The column a Citus cluster adds (not on this one-node server) is named by the code that adds it.
    names = (words - keywords - tables) | columns | set(ADDED_COLUMNS)
    return {n for n in names if re.fullmatch(r"[a-z][a-z0-9_]{0,62}", n)}


@pytest.fixture
def traced_names(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the search SQL, traced over every shape on a collection with a typed ``bucket``."""
    heard: list[str] = []
    traced = Engine(dsn=engine.db.dsn, embedder=HashEmbedder(), log_queries=True, tracer=lambda q, _p: heard.append(q))
    try:
        ingest(traced, "t_reserved_trace", [])
        heard.clear()
        run_shapes(traced, "t_reserved_trace", monkeypatch)
        names = sql_names(traced, heard)
    finally:
        traced.drop_collection("t_reserved_trace")
        traced.close()
    yield sorted(names - {"bucket", "effective_from", "effective_to"})


def test_every_name_the_search_sql_uses_is_a_key_that_breaks_no_search(
    engine: Engine, traced_names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    names = traced_names
    # The derivation found the names that broke searches and the chunk table's own columns, and many more.
    assert {"seg", "shard_key", "row_id", "doc_id", "tsv", "embedding", "chunk", "score", "rank"} <= set(names)
    assert len(names) > 150, names
    ingest(engine, "t_reserved_base", [])
    expected = run_shapes(engine, "t_reserved_base", monkeypatch)
    batch = 30  # with `bucket`, 31 keys: within MAX_INFERRED_FIELDS, so every key that may be typed is
    for start in range(0, len(names), batch):
        keys = names[start : start + batch]
        name = f"t_reserved_{start}"
        ingest(engine, name, keys)
        coll = engine.collection(name)
        typed = {f.name for f in coll.fields}
        untyped = (coll.field_inference or {})["untyped"]
        for key in keys:
            if key in RESERVED_COLUMNS:
                assert key not in typed
                assert untyped[key] == (
                    f"a name ranklock reserves, {reserved_kind(key)}; rename the key to filter on it"
                ), key
            else:
                assert key in typed, (key, untyped.get(key))
        # The same documents, text and vectors: every shape answers as on the collection without the keys.
        assert run_shapes(engine, name, monkeypatch) == expected, keys
        for key in sorted(typed - {"bucket"}):
            hits = engine.search(name, "alpha bravo", k=60, filter=f"{key} = 'v1'").hits
            assert hits and all(int(h.doc_id[3:]) % 3 == 1 for h in hits), key
        engine.drop_collection(name)


def test_a_note_with_seg_and_shard_key_in_its_front_matter_leaves_the_collection_searchable(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue, as found: the ingest said nothing, and every lexical and hybrid search was a traceback."""
    resolve_hash_embedder_by_id(monkeypatch)
    (tmp_path / "a.md").write_text("---\nseg: kiln\nshard_key: west\nyear: 2024\n---\nBisque firing at cone 04.\n")
    (tmp_path / "b.md").write_text("---\nseg: wheel\nyear: 2025\n---\nTrimming feet on the wheel.\n")
    home = ["--home", str(rl_home)]
    r = CliRunner().invoke(app, ["ingest", cname, str(tmp_path), *home, "--embedder", HashEmbedder.id])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "typed fields inferred from the metadata of 2 documents: year:int" in out
    assert (
        "left untyped (no filter on it): seg: a name ranklock reserves, a column ranklock's SQL adds to a "
        "segment's rows; rename the key to filter on it" in out
    )
    assert "left untyped (no filter on it): shard_key: a name ranklock reserves" in out
    for mode in ("lexical", "semantic", "hybrid"):
        r = CliRunner().invoke(app, ["search", cname, "bisque firing", "--mode", mode, "--json", *home])
        assert r.exit_code == 0 and '"doc_id":"a.md"' in r.stdout.replace(" ", ""), (mode, r.output)
    r = CliRunner().invoke(app, ["search", cname, "bisque", "--filter", "seg = 'kiln'", *home])
    assert r.exit_code == 2
    assert " ".join(r.output.split()) == (
        f"error: field 'seg' is no typed field of collection {cname!r}: its first ingest left the metadata key "
        "untyped (a name ranklock reserves, a column ranklock's SQL adds to a segment's rows; rename the key to "
        "filter on it); valid fields: year (int)."
    )
    assert engine.document(cname, "a.md").metadata["seg"] == "kiln"  # kept, as written


@pytest.mark.parametrize("name", sorted(ADDED_COLUMNS))
def test_a_declared_field_of_a_name_the_sql_adds_is_refused(engine: Engine, cname: str, name: str) -> None:
    with pytest.raises(ConfigError) as exc:
        engine.create_collection(cname, fields=[f"{name}:keyword"], embedder=use_hash_embedder(engine))
    assert str(exc.value) == (
        f"field name {name!r} is reserved (a column ranklock's SQL adds to a segment's rows); reserved names are "
        f"{', '.join(sorted(RESERVED_COLUMNS))}. Rename the field."
    )


def test_two_long_keys_sharing_their_first_fifty_characters_get_an_index_each(engine: Engine, cname: str) -> None:
    """The issue's sibling: both index names were cut to the same 63 bytes, and the ingest failed (DuplicateTable)."""
    a, b = "k" * 55 + "_alpha", "k" * 55 + "_bravo"
    docs = [Document(f"d{i}", "", f"kiln note {i}", {a: f"x{i % 2}", b: f"y{i % 3}"}) for i in range(6)]
    engine.ingest(cname, docs, create={"embedder": use_hash_embedder(engine)})
    assert {f.name for f in engine.collection(cname).fields} == {a, b}
    sid = engine.collection(cname).active_snapshot_id
    indexes = {
        r["indexname"]
        for r in engine.db.fetchall(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
            [SCHEMA, f"chunks_{sid}"],
        )
    }
    assert len([i for i in indexes if "_f_k" in i]) == 2 and all(len(i) <= 63 for i in indexes)
    hits = engine.search(cname, "kiln", k=10, filter=f"{a} = 'x1' and {b} = 'y0'").hits
    assert sorted(h.doc_id for h in hits) == ["d3"]


def test_a_collection_with_a_seg_field_from_before_is_refused_with_the_way_out(engine: Engine, cname: str) -> None:
    """A collection inferred before the name was reserved: a clear refusal, never the SQL's AmbiguousColumn."""
    engine.ingest(
        cname, [Document("d1", "", "kiln note", {"segx": "a"})], create={"embedder": use_hash_embedder(engine)}
    )
    coll = engine.collection(cname)
    # What such a collection looks like: a typed field `seg`, a column of that name in its chunk table.
    engine.db.execute(
        sql.SQL("ALTER TABLE {} RENAME COLUMN segx TO seg").format(
            segment_table("chunks", coll.active_snapshot_id or 0)
        )
    )
    engine.db.execute(
        'UPDATE ranklock.collections SET fields = \'[{"name": "seg", "type": "keyword", "required": false}]\' '
        "WHERE id = %s",
        [coll.id],
    )
    with pytest.raises(ConfigError) as exc:
        engine.search(cname, "kiln", mode="lexical")
    assert str(exc.value) == (
        f"collection {cname!r} has a typed field 'seg', a name ranklock's SQL gives a column of its own (the field "
        "was inferred from a metadata key before ranklock reserved the name), so no search of it can run; ingest its "
        "documents into a new collection, whose first ingest leaves the key untyped."
    )
