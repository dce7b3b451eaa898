"""The filter language: parsing, validation errors, compilation, injection, and filtered search end to end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import pytest
from psycopg import sql
from typer.testing import CliRunner

from fakes import HashEmbedder
from fakes import use_hash_embedder as _use_hash_embedder
from ranklock import Document, Engine, FilterError, IngestError
from ranklock.collection import CollectionInfo, FieldSpec
from ranklock.search.filters import compile_filter, format_filter, parse_filter


def use_hash_embedder(engine: Engine) -> str:
    return _use_hash_embedder(engine, "test:hash-8")


FIELDS = ["years_exp:int!", "rate:float", "remote:bool", "location:keyword", "skills:keyword[]", "start:date"]


def coll_info(fields: Sequence[str] = FIELDS) -> CollectionInfo:
    from ranklock.collection import parse_field_spec
    from ranklock.settings import ChunkerParams

    return CollectionInfo(
        id=1,
        name="people",
        language="english",
        accent="sensitive",
        embedder_id="x",
        embedder_sha256="x",
        dim=8,
        fields=[parse_field_spec(f) for f in fields],
        chunker=ChunkerParams(),
        normalization="NFKC",
    )


# -- parsing ------------------------------------------------------------------------------


def test_parse_examples() -> None:
    assert parse_filter('years_exp >= 5 and skills has "python"') == {
        "and": [
            {"field": "years_exp", "op": ">=", "value": 5},
            {"field": "skills", "op": "has", "value": "python"},
        ]
    }
    assert parse_filter("location in (\"Berlin\", 'Lisbon')") == {
        "field": "location",
        "op": "in",
        "value": ["Berlin", "Lisbon"],
    }
    assert parse_filter("years_exp between 3 and 7") == {"field": "years_exp", "op": "between", "value": [3, 7]}
    assert parse_filter('skills has all ("python", "sql")')["op"] == "has_all"
    assert parse_filter('skills HAS ANY ("go")')["op"] == "has_any"
    assert parse_filter("not (remote = true) or rate < -1.5") == {
        "or": [{"not": {"field": "remote", "op": "=", "value": True}}, {"field": "rate", "op": "<", "value": -1.5}]
    }
    assert parse_filter("start is null") == {"field": "start", "op": "is_null"}
    assert parse_filter("start is not null") == {"field": "start", "op": "is_not_null"}
    # and binds tighter than or; parentheses override
    assert parse_filter("a = 1 or b = 2 and c = 3") == {
        "or": [
            {"field": "a", "op": "=", "value": 1},
            {"and": [{"field": "b", "op": "=", "value": 2}, {"field": "c", "op": "=", "value": 3}]},
        ]
    }
    assert parse_filter('location = "say \\"hi\\""')["value"] == 'say "hi"'


def test_format_round_trip() -> None:
    text = 'not (years_exp between 3 and 7) and (skills has any ("a", "b\\"c") or location != "x")'
    spec = parse_filter(text)
    assert parse_filter(format_filter(spec)) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "years_exp >=",
            "filter syntax error at position 12: expected a value (a number, a quoted string, true or false), "
            'found end of input; e.g. years_exp >= 5 and skills has "python".',
        ),
        (
            "years_exp >= 5 skills",
            "filter syntax error at position 15: expected 'and', 'or' or the end of the filter, found 'skills'; "
            'e.g. years_exp >= 5 and skills has "python".',
        ),
        (
            "(years_exp >= 5",
            "filter syntax error at position 15: expected ')', found end of input; "
            'e.g. years_exp >= 5 and skills has "python".',
        ),
        (
            'location = "Berl',
            'filter syntax error at position 11: string starting here has no closing "; close it with ".',
        ),
        (
            "years_exp ~ 5",
            "filter syntax error at position 10: unexpected character '~'; "
            'e.g. years_exp >= 5 and skills has "python".',
        ),
        (
            "years_exp = null",
            "filter syntax error at position 12: null is not a value to compare with; "
            "write 'FIELD is null' or 'FIELD is not null'.",
        ),
        (
            "years_exp like 5",
            "filter syntax error at position 10: expected an operator after 'years_exp' (=, !=, <, <=, >, >=, in, "
            "between, has, has all, has any, is null, is not null), found 'like'; e.g. years_exp >= 5 and skills has "
            '"python".',
        ),
        (
            # The structured form's name in an expression (issue 45): the message says how to write it.
            'skills has_all ("python")',
            "filter syntax error at position 7: expected an operator after 'skills' (=, !=, <, <=, >, >=, in, between, "
            "has, has all, has any, is null, is not null), found 'has_all' (the structured form's name; a filter "
            "expression writes it 'has all'); e.g. years_exp >= 5 and skills has \"python\".",
        ),
        (
            "start is 5",
            "filter syntax error at position 6: expected 'is null' or 'is not null' after 'start', found 'is 5'; "
            'e.g. years_exp >= 5 and skills has "python".',
        ),
        ("   ", 'the filter is empty; write a condition, e.g. years_exp >= 5 and skills has "python".'),
    ],
)
def test_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(FilterError) as exc:
        parse_filter(text)
    assert str(exc.value) == message


# -- validation against the collection ---------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "salary > 5",
            "unknown field 'salary'; valid fields: location (keyword), rate (float), remote (bool), "
            "skills (keyword[]), start (date), years_exp (int). Filter on one of these, or declare the field "
            "when creating the collection.",
        ),
        (
            'years_exp >= "five"',
            "field 'years_exp' is int: value 'five' (str) is not an integer; fix the value.",
        ),
        ("years_exp >= 4.5", "field 'years_exp' is int: value 4.5 (float) is not an integer; fix the value."),
        ("remote = 1", "field 'remote' is bool: value 1 (int) is not true or false; fix the value."),
        (
            'start >= "31/01/2024"',
            "field 'start' is date: value '31/01/2024' (str) is not an ISO date (YYYY-MM-DD); fix the value.",
        ),
        (
            # A filter expression: the operators as the expression writes them, every one of them parses.
            'skills > "python"',
            "operator '>' does not apply to field 'skills' (keyword[]); valid operators for keyword[]: has, "
            "has all, has any, is null, is not null.",
        ),
        (
            'location has all ("Berlin")',
            "operator 'has all' does not apply to field 'location' (keyword); valid operators for keyword: =, !=, "
            "in, is null, is not null.",
        ),
        (
            # The structured form: its own names.
            {"field": "skills", "op": ">", "value": "python"},
            "operator '>' does not apply to field 'skills' (keyword[]); valid operators for keyword[]: has, "
            "has_all, has_any, is_null, is_not_null.",
        ),
        (
            {"field": "years_exp", "op": "like", "value": 5},
            "unknown filter operator 'like'; valid operators: !=, <, <=, =, >, >=, between, has, has_all, has_any, "
            "in, is_not_null, is_null.",
        ),
        (
            {"field": "location", "op": "in", "value": []},
            "operator 'in' on field 'location' needs a non-empty list of values, got [].",
        ),
        (
            {"field": "years_exp", "op": "between", "value": [1]},
            "operator 'between' on field 'years_exp' needs a list [low, high] (both inclusive), got [1].",
        ),
        (
            {"field": "years_exp", "op": "=", "value": [1, 2]},
            "operator '=' on field 'years_exp' takes one value, got the list [1, 2]; use 'in' (or has_any / "
            "has_all for keyword lists) to match several.",
        ),
        ({"field": "start", "op": "is_null", "value": 3}, "operator 'is_null' takes no value, got 3; drop the value."),
        (
            {"and": [], "or": []},
            "a 'and' filter node has only the key 'and', got keys and, or; nest the other conditions inside it.",
        ),
        ({"or": []}, "'or' needs a non-empty list of filters, got []."),
        (
            {"fld": "x"},
            'a filter node is {"and": [...]}, {"or": [...]}, {"not": ...} or {"field": ..., "op": ..., '
            '"value": ...}; got keys fld.',
        ),
        ([], 'the filter is an empty list; give at least one condition, e.g. years_exp >= 5 and skills has "python".'),
    ],
)
def test_validation_errors(spec: object, message: str) -> None:
    with pytest.raises(FilterError) as exc:
        compile_filter(coll_info(), spec)
    assert str(exc.value) == message


def test_no_fields_declared() -> None:
    with pytest.raises(FilterError) as exc:
        compile_filter(coll_info([]), "years_exp > 1")
    assert str(exc.value) == (
        "unknown field 'years_exp': collection 'people' declares no typed fields; create the collection with "
        "--field NAME:TYPE to filter on document metadata."
    )


def test_compiled_sql_binds_every_value() -> None:
    f = compile_filter(
        coll_info(),
        'years_exp >= 5 and (skills has "python" or location in ("Berlin", "Lisbon")) and not (start is null)',
    )
    text = f.sql.as_string(None)
    assert text == (
        '(("c"."years_exp" >= %(f0)s::bigint) AND (("c"."skills" @> %(f1)s::text[]) OR '
        '("c"."location" = ANY(%(f2)s::text[]))) AND ((("c"."start" IS NULL)) IS NOT TRUE))'
    )
    assert f.params == {"f0": 5, "f1": ["python"], "f2": ["Berlin", "Lisbon"]}
    # structured and string forms compile identically; a list is an implicit and
    g = compile_filter(coll_info(), [{"field": "years_exp", "op": ">=", "value": 5}])
    assert g.sql.as_string(None) == '(("c"."years_exp" >= %(f0)s::bigint))'
    h = compile_filter(coll_info(), {"field": "start", "op": "between", "value": ["2024-01-01", "2024-12-31"]})
    assert h.params == {"f0": date(2024, 1, 1), "f1": date(2024, 12, 31)}


def test_injection_through_field_name_is_rejected() -> None:
    with pytest.raises(FilterError, match=r"^unknown field 'a; drop table x'"):
        compile_filter(coll_info(), {"field": "a; drop table x", "op": "=", "value": 1})
    with pytest.raises(FilterError, match=r"^unknown field 'years_exp\" OR 1=1 --'"):
        compile_filter(coll_info(), {"field": 'years_exp" OR 1=1 --', "op": "=", "value": 1})


# -- end to end ------------------------------------------------------------------------------

PEOPLE = [
    (
        "p1",
        "python developer in berlin",
        {
            "years_exp": 7,
            "rate": 80.5,
            "remote": True,
            "location": "Berlin",
            "skills": ["python", "sql"],
            "start": "2024-03-01",
        },
    ),
    (
        "p2",
        "java engineer in lisbon",
        {
            "years_exp": 3,
            "rate": 60.0,
            "remote": False,
            "location": "Lisbon",
            "skills": ["java", "sql"],
            "start": "2023-01-15",
        },
    ),
    ("p3", "python data scientist", {"years_exp": 5, "location": "Paris", "skills": ["Python", "r"]}),
    (
        "p4",
        "go backend developer",
        {"years_exp": 10, "rate": 95.0, "remote": True, "location": "Berlin", "skills": ["go", "python"]},
    ),
    (
        "p5",
        "junior web developer",
        {"years_exp": 1, "location": "x'); DROP TABLE ranklock.collections; --", "skills": []},
    ),
]


@pytest.fixture
def people(engine: Engine, cname: str) -> str:
    emb = use_hash_embedder(engine)
    engine.create_collection(cname, fields=FIELDS, embedder=emb)
    engine.ingest(cname, [Document(d, "", body, meta) for d, body, meta in PEOPLE])
    return cname


def ids(engine: Engine, name: str, flt: object, k: int = 10, mode: str = "hybrid", **params: object) -> list[str]:
    return sorted(h.doc_id for h in engine.search(name, "developer", k=k, mode=mode, filter=flt, **params).hits)


def test_filtered_search_end_to_end(engine: Engine, people: str) -> None:
    assert ids(engine, people, 'years_exp >= 5 and skills has "python"') == ["p1", "p4"]
    assert ids(engine, people, "location in (\"Berlin\", 'Lisbon')") == ["p1", "p2", "p4"]
    assert ids(engine, people, "years_exp between 3 and 7") == ["p1", "p2", "p3"]
    assert ids(engine, people, 'skills has all ("python", "sql")') == ["p1"]
    assert ids(engine, people, 'skills has any ("go", "java")') == ["p2", "p4"]
    # case-sensitive keyword lists: p3 has "Python", not "python"
    assert ids(engine, people, 'skills has "Python"') == ["p3"]
    # null semantics: a comparison on a missing value is false, not(...) its complement
    assert ids(engine, people, "remote != true") == ["p2"]
    assert ids(engine, people, "not (remote = true)") == ["p2", "p3", "p5"]
    assert ids(engine, people, "rate is null") == ["p3", "p5"]
    assert ids(engine, people, "start >= '2024-01-01' or rate > 90") == ["p1", "p4"]
    # an empty list is a value, not null
    assert ids(engine, people, "skills is null") == []
    structured = {
        "and": [{"field": "years_exp", "op": ">=", "value": 5}, {"field": "skills", "op": "has", "value": "python"}]
    }
    for mode in ("hybrid", "semantic", "lexical"):
        assert ids(engine, people, structured, mode=mode) == ids(engine, people, format_filter(structured), mode=mode)


def test_injection_through_values_is_inert(engine: Engine, people: str) -> None:
    evil = "x'); DROP TABLE ranklock.collections; --"
    assert ids(engine, people, {"field": "location", "op": "=", "value": evil}) == ["p5"]
    assert ids(engine, people, f'location = "{evil}"') == ["p5"]
    assert ids(engine, people, {"field": "skills", "op": "has", "value": "a'}; DROP TABLE x; --"}) == []
    assert engine.collection(people).name == people  # the catalogue is still there
    with pytest.raises(FilterError, match=r"^unknown field 'a; drop'"):
        engine.search(people, "developer", filter={"field": "a; drop", "op": "=", "value": 1})


def test_matching_count_and_complete(engine: Engine, people: str) -> None:
    res = engine.search(people, "developer", k=2, filter='location = "Berlin"')
    assert (res.matching_count, res.complete, res.truncation, len(res.hits)) == (2, True, None, 2)
    res = engine.search(people, "developer", k=10, mode="semantic", filter="years_exp >= 3")
    assert (res.matching_count, res.complete, len(res.hits)) == (4, True, 4)
    res = engine.search(people, "developer", k=3)
    assert (res.matching_count, res.complete) == (5, True)
    payload = json.loads(res.to_json())
    assert payload["matching_count"] == 5 and payload["complete"] is True and payload["truncation"] is None
    assert payload["params"]["vector_strategy"] == "exact"  # 5 chunks, below exact_threshold
    # lexical mode ranks only documents containing the words: complete, with a note
    res = engine.search(people, "python", k=10, mode="lexical", filter="years_exp >= 0")
    assert res.matching_count == 5 and res.complete is True
    assert any("contain the query's words" in w for w in res.warnings)


def test_ingest_validation_does_not_half_apply(engine: Engine, people: str) -> None:
    before = engine.collection(people).active_snapshot_id
    n_snaps = engine.db.fetchone(
        "SELECT count(*) AS n FROM ranklock.snapshots s JOIN ranklock.collections c ON c.id = s.collection_id "
        "WHERE c.name = %s",
        [people],
    )
    good = Document("p6", "", "rust developer", {"years_exp": 2})
    bad = Document("p7", "", "c developer", {"years_exp": "two"})
    with pytest.raises(IngestError) as exc:
        engine.ingest(people, [good, bad])
    assert str(exc.value) == (
        "document 'p7': field 'years_exp' must be an integer, got 'two' (str); fix the document's metadata."
    )
    missing = Document("p8", "", "c developer", {"rate": 1.0})
    with pytest.raises(IngestError) as exc:
        engine.ingest(people, [good, missing])
    assert str(exc.value) == (
        "document 'p8': required field 'years_exp' (int) is missing from its metadata; add it, or declare the "
        "field optional."
    )
    assert engine.collection(people).active_snapshot_id == before
    after = engine.db.fetchone(
        "SELECT count(*) AS n FROM ranklock.snapshots s JOIN ranklock.collections c ON c.id = s.collection_id "
        "WHERE c.name = %s",
        [people],
    )
    assert after == n_snaps
    stored = engine.db.fetchone(
        "SELECT count(*) AS n FROM ranklock.documents d JOIN ranklock.collections c ON c.id = d.collection_id "
        "WHERE c.name = %s AND d.doc_id IN ('p6', 'p7', 'p8')",
        [people],
    )
    assert stored == {"n": 0}
    assert ids(engine, people, "years_exp >= 0") == ["p1", "p2", "p3", "p4", "p5"]


def test_cli_collection_create_and_filtered_search(
    cname: str, rl_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ranklock.embed.loaded
    from ranklock.cli import app

    # The CLI builds its own Engine; let it resolve the small test embedder by id.
    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )
    runner = CliRunner()
    home = str(rl_home)
    r = runner.invoke(
        app,
        [
            "collection",
            "create",
            cname,
            "--field",
            "years_exp:int!",
            "--field",
            "skills:keyword[]",
            "--index",
            "hnsw",
            "--m",
            "8",
            "--ef-construction",
            "32",
            "--language",
            "english",
            "--embedder",
            HashEmbedder.id,
            "--home",
            home,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["fields"] == [
        {"name": "years_exp", "type": "int", "required": True},
        {"name": "skills", "type": "keyword[]", "required": False},
    ]
    assert (out["index"], out["index_params"]) == ("hnsw", {"m": 8, "ef_construction": 32})
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps(
                {
                    "_id": f"d{i}",
                    "text": f"developer number {i}",
                    "metadata": {"years_exp": i, "skills": ["python"] if i % 2 else ["go"]},
                }
            )
            for i in range(8)
        )
    )
    r = runner.invoke(app, ["ingest", cname, str(corpus), "--home", home, "--json"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        ["search", cname, "developer", "--filter", 'years_exp >= 5 and skills has "python"', "--home", home, "--json"],
    )
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert sorted(h["doc_id"] for h in res["hits"]) == ["d5", "d7"]
    assert (res["matching_count"], res["complete"], res["truncation"]) == (2, True, None)
    r = runner.invoke(app, ["search", cname, "developer", "--filter", "salary > 5", "--home", home])
    assert r.exit_code == 2
    assert "unknown field 'salary'; valid fields: skills (keyword[]), years_exp (int)." in r.output.replace("\n", "")

    r = runner.invoke(app, ["collection", "create", cname + "_x", "--index", "hnsw", "--lists", "10", "--home", home])
    assert r.exit_code == 2
    assert "index parameter(s) lists do not apply to hnsw; valid: ef_construction, m." in r.output.replace("\n", "")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"fields": ["years_exp:int!"], "index": "ivfflat", "index_params": {"lists": 4}}))
    r = runner.invoke(
        app,
        [
            "collection",
            "create",
            cname + "_y",
            "--schema",
            str(schema),
            "--probes",
            "3",
            "--embedder",
            HashEmbedder.id,
            "--home",
            home,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["index"], out["index_params"], out["search_defaults"]) == ("ivfflat", {"lists": 4}, {"probes": 3})
    schema.write_text(json.dumps({"fields": ["years_exp:int!"], "colour": 1}))
    r = runner.invoke(app, ["collection", "create", cname + "_z", "--schema", str(schema), "--home", home])
    assert r.exit_code == 2
    assert "has unknown key(s) colour; valid keys:" in r.output.replace("\n", "")


def test_index_options_are_recorded(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    info = engine.create_collection(
        cname, fields=["n:int"], index="ivfflat", index_params={"lists": 2}, embedder=emb, search_defaults={"probes": 2}
    )
    assert (info.index_kind, info.index_params, info.search_defaults) == ("ivfflat", {"lists": 2}, {"probes": 2})
    engine.ingest(cname, [Document(f"d{i}", "", f"text number {i}", {"n": i}) for i in range(30)])
    res = engine.search(cname, "text", k=5, mode="semantic", filter="n < 20", exact_threshold=0)
    assert res.params["vector_strategy"] in ("ivfflat", "exact")
    assert res.matching_count == 20 and len(res.hits) == 5
    if res.params["vector_strategy"] == "ivfflat":
        assert (res.complete, res.truncation) == (False, "approximate_index")
    else:
        assert (res.complete, res.truncation) == (True, None)
    exact = engine.create_collection(cname + "_e", fields=["n:int"], index="exact", embedder=emb)
    assert exact.index_kind == "exact"


def test_field_spec_model() -> None:
    assert FieldSpec(name="a", type="keyword[]").sql_type() == "text[]"
    assert isinstance(sql.Identifier("c", "a"), sql.Composable)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("date >= 2024-01-01", 'a date or time is a quoted string: date >= "2024-01-01".'),
        (
            "published < 2024-01-01T10:00Z and x = 1",
            'a date or time is a quoted string: published < "2024-01-01T10:00Z".',
        ),
    ],
)
def test_an_unquoted_date_is_answered_with_a_quoted_date_not_an_unrelated_example(text: str, hint: str) -> None:
    """Issue 41: the error of `date >= 2024-01-01` gave an example about years_exp."""
    from ranklock.search.filters.parse import parse_filter

    with pytest.raises(FilterError) as exc:
        parse_filter(text)
    assert str(exc.value).endswith(hint) and "years_exp" not in str(exc.value)


def test_every_operator_a_message_lists_parses_as_it_is_listed() -> None:
    # One declaration (parse.SYNTAX): the parser reads each spelling, and format_filter writes it back.
    from ranklock.search.filters import SYNTAX, format_filter

    for op, written in SYNTAX.items():
        value = (
            ""
            if op in ("is_null", "is_not_null")
            else ' ("a", "b")'
            if op in ("in", "has_all", "has_any")
            else (" 1 and 2" if op == "between" else ' "a"')
        )
        parsed = parse_filter(f"f {written}{value}")
        assert parsed["op"] == op
        assert parse_filter(format_filter(parsed)) == parsed
