"""Typed fields inferred from a new collection's first ingest (ranklock.ingest.infer), as sqlite-utils
types a new table's columns from the JSON it is given: filters work on a plain `ingest`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, resolve_hash_embedder_by_id, use_hash_embedder
from ranklock import Document, Engine, FilterError, IngestError
from ranklock.cli import app
from ranklock.ingest.infer import infer_fields
from ranklock.limits import MAX_INFERRED_FIELDS, MAX_KEYWORD_CHARS


def _docs(*metas: dict[str, object]) -> list[Document]:
    return [Document(f"d{i}", "", f"document number {i} about pumps", dict(m)) for i, m in enumerate(metas)]


def test_each_json_type_becomes_its_field_type() -> None:
    inf = infer_fields(
        _docs(
            {"year": 2021, "score": 1, "ok": True, "day": "2024-03-04", "at": "2024-03-04T10:00:00Z", "tags": ["a"]},
            {"year": 2023, "score": 2.5, "ok": False, "day": "2024-03-05", "at": "2024-03-04T12:00:00+01:00"},
            {"year": None, "label": "pump", "tags": []},
        )
    )
    assert inf.record() == {
        "documents": 3,
        "fields": ["at:timestamp", "day:date", "label:keyword", "ok:bool", "score:float", "tags:keyword[]", "year:int"],
        "untyped": {},
    }
    assert not any(f.required for f in inf.fields)


def test_keys_that_disagree_or_cannot_be_columns_are_left_untyped_with_the_reason() -> None:
    inf = infer_fields(
        _docs(
            {"year": 2021, "Author": "x", "nested": {"a": 1}, "refs": [1, 2], "none": None, "title": "t"},
            {"year": "n/a", "mix": "2024-01-01", "long": "x" * (MAX_KEYWORD_CHARS + 1), "big": 2**63},
            {"mix": "soon", "when": "2024-01-01", "effective_from": "2024-01-01T00:00:00Z"},
            {"when": "2024-01-01T00:00:00Z"},
        )
    )
    # Dates and other strings mixed are strings; a date and a timestamp mixed are strings too.
    assert [(f.name, f.type) for f in inf.fields] == [("mix", "keyword"), ("when", "keyword")]
    assert inf.untyped == {
        "Author": "not a field name (lowercase letters, digits and _, starting with a letter)",
        "big": "an integer beyond 64 bits",
        "long": f"a string over {MAX_KEYWORD_CHARS} characters (text, not a label)",
        "nested": "a nested object",
        "none": "null in every document",
        "refs": "a list of other things than short strings",
        "title": "a name ranklock reserves, a document's own title; rename the key to filter on it",
        "year": "mixed types: a string in 1 document, an integer in 1 document",
    }


def test_at_most_max_inferred_fields_the_most_common_keys_first() -> None:
    many = {f"k{i:03d}": i for i in range(MAX_INFERRED_FIELDS + 2)}
    docs = _docs(many, {"k033": 1, "k000": 1})  # k033 is in two documents: it is typed, k031 and k032 are not
    inf = infer_fields(docs)
    assert len(inf.fields) == MAX_INFERRED_FIELDS
    assert {"k000", "k033"} <= {f.name for f in inf.fields}
    more = f"more than {MAX_INFERRED_FIELDS} keys (MAX_INFERRED_FIELDS); declare it with --field"
    assert inf.untyped == {"k031": more, "k032": more}


def test_a_plain_ingest_makes_filters_work_and_records_how(engine: Engine, cname: str) -> None:
    docs = _docs({"year": 2019, "tags": ["parts"], "n": "a"}, {"year": 2021, "tags": ["pumps"], "n": 1})
    report = engine.ingest(cname, docs, create={"embedder": use_hash_embedder(engine)})
    record = {
        "documents": 2,
        "fields": ["tags:keyword[]", "year:int"],
        "untyped": {"n": ("mixed types: a string in 1 document, an integer in 1 document")},
    }
    assert report.field_inference == record
    assert engine.manifest(cname)["field_inference"] == record
    assert engine.collection(cname).field_inference == record
    res = engine.search(cname, "pumps", mode="lexical", filter="year >= 2020")
    assert [h.doc_id for h in res.hits] == ["d1"]
    with pytest.raises(FilterError) as fe:
        engine.search(cname, "pumps", mode="lexical", filter="n = 'a'")
    assert str(fe.value) == (
        f"field 'n' is no typed field of collection {cname!r}: its first ingest left the metadata key untyped "
        "(mixed types: a string in 1 document, an integer in 1 document); valid fields: tags (keyword[]), year (int)."
    )
    # The fields are the collection's from now on: a later document that breaks one is refused, by name.
    with pytest.raises(IngestError) as e:
        engine.ingest(cname, _docs({"year": "soon"}))
    assert (
        str(e.value) == "document 'd0': field 'year' must be an integer, got 'soon' (str); fix the document's metadata."
    )
    later = engine.ingest(cname, _docs({"year": 2024}))
    assert later.field_inference is None and engine.manifest(cname)["field_inference"] == record


def test_declared_fields_are_never_inferred(engine: Engine, cname: str) -> None:
    report = engine.ingest(cname, _docs({"year": 2021}), create={"embedder": use_hash_embedder(engine), "fields": []})
    assert report.field_inference is None and engine.collection(cname).fields == []
    assert "field_inference" not in engine.manifest(cname)


@pytest.fixture
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    resolve_hash_embedder_by_id(monkeypatch)


@pytest.mark.usefixtures("cli_hash_embedder", "engine")
def test_cli_ingest_prints_what_it_inferred(cname: str, rl_home: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "parts.jsonl"
    rows = [
        {"id": "p1", "text": "pump seals", "metadata": {"year": 2021, "tags": ["parts"], "Note": "x"}},
        {"id": "p2", "text": "valve seats", "metadata": {"year": 2019, "tags": ["parts"], "Note": "y"}},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    base = ["--home", str(rl_home), "--embedder", HashEmbedder.id]
    r = CliRunner().invoke(app, ["ingest", cname, str(corpus), *base])
    assert r.exit_code == 0, r.output
    assert r.stdout.endswith(
        "typed fields inferred from the metadata of 2 documents: tags:keyword[], year:int\n"
        "  left untyped (no filter on it): Note: not a field name (lowercase letters, digits and _, starting with "
        "a letter)\n"
    )
    r = CliRunner().invoke(app, ["search", cname, "pump", "--filter", "year >= 2020", "--json", "--home", str(rl_home)])
    assert r.exit_code == 0, r.output
    assert [h["doc_id"] for h in json.loads(r.stdout)["hits"]] == ["p1"]
