"""Bad input ends in a clear error (exit 2, a 4xx JSON error, a RanklockError), never a traceback.

Issue 11 items 9-11: each input below used to end in a traceback (exit 1) or a plain-text
HTTP 500, or was silently ignored.  One test per input, on the real embedded PostgreSQL.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import ranklock.embed.loaded
from fakes import HashEmbedder
from ranklock import Document, Engine
from ranklock.errors import FilterError, IngestError, InputError, NotFound, QueryError
from ranklock.http import create_app
from ranklock.limits import LIMITS, MAX_FILTER_DEPTH, MAX_QUERY_CHARS
from ranklock.settings import SearchParams
from ranklock.store.errors import refusals_as

COLL = "t_input_errors"
ROOT = Path(__file__).resolve().parents[1]
VALID_PARAMS = (
    "b, depth, ef_search, exact_fallback, exact_threshold, iterative_scan, k1, lexical_ranker, "
    "max_scan_tuples, probes, query_syntax, rrf_k"
)


@pytest.fixture(scope="module")
def hash_cli() -> Iterator[None]:
    """The CLI builds its own Engine; let it resolve the small test embedder by id."""
    real = ranklock.embed.loaded.resolve_embedder
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            ranklock.embed.loaded, "resolve_embedder", lambda s: HashEmbedder() if s == HashEmbedder.id else real(s)
        )
        yield


@pytest.fixture(scope="module")
def coll(engine: Engine, hash_cli: None) -> str:  # noqa: ARG001 (hash_cli: set up first)
    engine.embedders.register(HashEmbedder())
    try:
        engine.collection(COLL)
    except NotFound:
        engine.create_collection(
            COLL, fields=["year:int", "score:float", "tags:keyword[]", "day:date"], embedder=HashEmbedder.id
        )
    docs = [
        Document("p1", "Pump", "pump seals leak under pressure", {"year": 2021, "tags": ["parts"]}),
        Document("p2", "Valve", "a valve keeps the pump primed", {"year": 2019, "tags": ["parts", "old"]}),
    ]
    engine.ingest(COLL, docs, replace=True)
    return COLL


def cli(engine: Engine, rl_home: Path, *args: str) -> tuple[int, str]:
    from ranklock.cli import app

    # Options after the command and its first argument, so a trailing `-- QUERY` stays last.
    res = CliRunner().invoke(app, [*args[:2], "--dsn", engine.db.dsn, "--home", str(rl_home), *args[2:]])
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def client(engine: Engine, coll: str) -> TestClient:  # noqa: ARG001 (coll: made first)
    return TestClient(create_app(engine), raise_server_exceptions=False)


def active_state(engine: Engine) -> str:
    return engine.search(COLL, "pump", k=5).to_json()


# -- item 9: ingest -------------------------------------------------------------------


def test_cli_ingest_of_a_non_utf8_line_names_file_line_and_byte(engine: Engine, rl_home: Path, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "a", "text": "fine"}\n{"id": "b", "text": "caf\xe9"}\n')
    code, out = cli(engine, rl_home, "ingest", "t_input_never_created", str(path))
    assert code == 2
    assert out.strip() == (
        f"error: {path}:2: not UTF-8 text (byte 0xe9 at column 25); re-encode the file as UTF-8 and ingest again."
    )
    with pytest.raises(NotFound):
        engine.collection("t_input_never_created")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"id": "a", "text": "a\u0000b"}, "text holds a NUL character (\\u0000) at position 1"),
        ({"id": "a", "text": "x", "metadata": {"tags": ["ok", "\u0000"]}}, "metadata.tags[1] holds a NUL character"),
        ({"id": "a\u0000", "text": "x"}, "id holds a NUL character (\\u0000) at position 1"),
    ],
)
def test_cli_ingest_of_a_nul_byte_names_the_line_and_the_value(
    engine: Engine, rl_home: Path, tmp_path: Path, coll: str, record: dict, message: str
) -> None:
    before = active_state(engine)
    path = tmp_path / "nul.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n' + json.dumps(record) + "\n", encoding="utf-8")
    code, out = cli(engine, rl_home, "ingest", coll, str(path))
    assert code == 2, out
    assert out.strip().startswith(f"error: {path}:2: {message}")
    assert out.strip().endswith("; remove it from the record and ingest again.")
    assert active_state(engine) == before


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "text": "x", "metadata": {"w": NaN}}', "NaN is not a JSON number; write null or a finite number"),
        ('{"id": "a", "text": "x", "metadata": {"w": 1e400}}', "the number 1e400 is too large for a 64-bit float"),
        ('{"id": "a", "text": "x", "metadata": {"w": ' + "9" * 5000 + "}}", "Exceeds the limit (4300 digits)"),
        ('{"id": "a", "text": "x", "metadata": ' + "[" * 5000 + "]" * 5000 + "}", "the JSON is nested too deeply"),
    ],
)
def test_ingest_of_numbers_json_cannot_hold_is_an_ingest_error(tmp_path: Path, line: str, message: str) -> None:
    from ranklock.ingest.loaders import load_corpus

    path = tmp_path / "numbers.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(IngestError) as exc:
        load_corpus(path)
    assert str(exc.value).startswith(f"{path}:1: ")
    assert message in str(exc.value)


@pytest.mark.usefixtures("engine", "coll")
def test_python_documents_are_checked_too() -> None:
    with pytest.raises(IngestError) as exc:
        Document("d", "", "a\x00b")
    assert str(exc.value) == (
        "document 'd': text holds a NUL character (\\u0000) at position 1; remove it and ingest again."
    )
    with pytest.raises(IngestError) as exc:
        Document("d", "", "x", {"w": float("nan")})
    assert str(exc.value) == "document 'd': metadata.w is nan, not a finite number; fix the document and ingest again."
    with pytest.raises(IngestError) as exc:
        Document("x" * 600, "", "x")
    assert "the document id is 600 characters; the limit is 512 (MAX_DOC_ID_CHARS)" in str(exc.value)


def test_an_int_field_beyond_64_bits_stops_the_ingest(engine: Engine, coll: str) -> None:
    before = active_state(engine)
    with pytest.raises(IngestError) as exc:
        engine.ingest(coll, [Document("big", "", "x", {"year": 10**20})])
    assert str(exc.value) == (
        "document 'big': field 'year' must be an integer from -9223372036854775808 to 9223372036854775807 "
        "(64-bit), got 100000000000000000000 (int); fix the document's metadata."
    )
    assert active_state(engine) == before


# -- item 9: queries and filters ---------------------------------------------------------


def test_cli_query_with_a_nul_byte(engine: Engine, rl_home: Path, coll: str) -> None:
    code, out = cli(engine, rl_home, "search", coll, "pump\x00seal")
    assert (code, out.strip()) == (
        2,
        "error: the query holds a NUL character (\\u0000) at position 4; remove it from the query.",
    )


def test_http_query_with_a_nul_byte_or_a_lone_surrogate(client: TestClient, coll: str) -> None:
    r = client.post("/api/search", json={"collection": coll, "query": "pump\u0000"})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "type": "QueryError",
            "message": "the query holds a NUL character (\\u0000) at position 4; remove it from the query.",
        }
    }
    body = b'{"collection": "%s", "query": "pump \\ud800"}' % coll.encode()
    r = client.post("/api/search", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "QueryError"
    assert r.json()["error"]["message"].startswith("the query holds a lone surrogate '\\ud800' at position 5")


def test_cli_filter_literal_beyond_bigint(engine: Engine, rl_home: Path, coll: str) -> None:
    code, out = cli(engine, rl_home, "search", coll, "pump", "--filter", "year >= 99999999999999999999")
    assert (code, out.strip()) == (
        2,
        "error: field 'year' is int: value 99999999999999999999 is out of range; int fields hold "
        "-9223372036854775808 to 9223372036854775807 (64-bit). Use a value in that range.",
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"field": "score", "op": ">", "value": 10**400},
            f"field 'score' is float: value {repr(10**400)[:59]}… is not a finite 64-bit number; "
            "use a value within ±1.8e308.",
        ),
        (
            "score > 1e999",
            "field 'score' is float: value inf is not a finite 64-bit number; use a value within ±1.8e308.",
        ),
        (
            'day >= "10000-01-01"',
            "field 'day' is date: value '10000-01-01' (str) is not an ISO date (YYYY-MM-DD); fix the value.",
        ),
        ("year = " + "9" * 5000, "filter syntax error at position 7: the number has 5,000 digits; integers range"),
        ('tags has "a\x00b"', "the value for 'tags' holds a NUL character (\\u0000) at position 1; no stored value"),
    ],
)
def test_filter_literals_outside_their_type_are_filter_errors(
    engine: Engine, coll: str, spec: object, message: str
) -> None:
    with pytest.raises(FilterError) as exc:
        engine.search(coll, "pump", filter=spec)
    assert str(exc.value).startswith(message)


def test_cli_filter_nested_1000_parentheses(engine: Engine, rl_home: Path, coll: str) -> None:
    deep = "(" * 1000 + "year > 1" + ")" * 1000
    code, out = cli(engine, rl_home, "search", coll, "pump", "--filter", deep)
    assert (code, out.strip()) == (
        2,
        f"error: the filter nests parentheses 1,000 deep; the limit is {MAX_FILTER_DEPTH} (MAX_FILTER_DEPTH). "
        "Flatten it: 'a and b and c' needs no parentheses.",
    )


def test_deep_not_chains_and_structured_nesting_hit_the_depth_limit(engine: Engine, coll: str) -> None:
    with pytest.raises(FilterError, match=r"nests parentheses and 'not' more than 32 deep \(at position 128\)"):
        engine.search(coll, "pump", filter="not " * 1000 + "year > 1")
    spec: dict = {"field": "year", "op": ">", "value": 1}
    for _ in range(1000):
        spec = {"not": spec}
    with pytest.raises(FilterError) as exc:
        engine.search(coll, "pump", filter=spec)
    assert str(exc.value) == (
        "the filter nests and/or/not groups more than 32 deep; the limit is 32 (MAX_FILTER_DEPTH). "
        "Flatten it: one 'and' list holds any number of conditions."
    )
    # 32 levels are fine and mean what they say: an even number of nots is the condition itself.
    ok: dict = {"field": "year", "op": ">", "value": 2020}
    for _ in range(32):
        ok = {"not": ok}
    assert [h.doc_id for h in engine.search(coll, "pump", filter=ok).hits] == ["p1"]


def test_long_filters_and_many_values_are_refused_with_the_limit(engine: Engine, coll: str) -> None:
    with pytest.raises(FilterError) as exc:
        engine.search(coll, "pump", filter="year > 1 and " * 1000 + "year > 1")
    assert str(exc.value) == (
        "the filter is 13,008 characters; the limit is 10,000 (MAX_FILTER_CHARS). "
        "Shorten it, e.g. one 'in (...)' instead of many 'or's."
    )
    with pytest.raises(FilterError) as exc:
        engine.search(coll, "pump", filter={"field": "year", "op": "in", "value": list(range(10_001))})
    assert str(exc.value) == (
        "the filter has 10,001 values; the limit is 10,000 (MAX_FILTER_VALUES). Narrow it, or filter on a coarser field."
    )


def test_cli_query_of_1_5_mb(engine: Engine, rl_home: Path, coll: str) -> None:
    query = "pumpseal " * 166_667  # 1,500,003 characters, every word the same
    code, out = cli(engine, rl_home, "search", coll, query)
    assert (code, out.strip()) == (
        2,
        f"error: the query is 1,500,003 characters; the limit is {MAX_QUERY_CHARS:,} (MAX_QUERY_CHARS). "
        "Shorten it to the words or question that matter.",
    )


def test_a_query_at_the_limit_with_distinct_words_is_answered(engine: Engine, coll: str) -> None:
    # Distinct words are what overflowed PostgreSQL's tsvector (ProgramLimitExceeded) at 1.5 MB.
    words = [f"w{i:05d}" for i in range(MAX_QUERY_CHARS // 7)]
    query = " ".join(words)[:MAX_QUERY_CHARS]
    res = engine.search(coll, query, k=2)
    assert res.matching_count == 2


def test_data_errors_that_reach_the_database_map_to_the_error_tree(engine: Engine) -> None:
    with pytest.raises(InputError) as exc:
        engine.db.fetchone("SELECT %s::bigint AS n", [10**20])
    assert type(exc.value) is InputError
    assert str(exc.value) == (
        "a number is out of range for its database type (PostgreSQL 22003: bigint out of range); use a smaller "
        "value (integers are 64-bit: -9223372036854775808 to 9223372036854775807)."
    )
    with refusals_as(QueryError), pytest.raises(QueryError) as qexc:
        engine.db.fetchone("SELECT %s::text AS t", ["a\x00b"])
    assert str(qexc.value) == (
        "a text value contains a NUL byte (\\u0000), which PostgreSQL cannot store; "
        "remove the NUL characters from the input."
    )
    with refusals_as(IngestError), pytest.raises(IngestError) as iexc:
        engine.db.fetchone(
            "SELECT to_tsvector('simple', string_agg(md5(i::text), ' ')) FROM generate_series(1, 40000) i"
        )
    assert str(iexc.value).startswith(
        "the input is too large or too complex for the database (PostgreSQL 54000: string is too long for tsvector"
    )
    with pytest.raises(InputError) as jexc:
        engine.db.fetchone('SELECT \'{"a": "\\u0000"}\'::jsonb')
    assert str(jexc.value) == (
        "a text value holds a character PostgreSQL cannot store (a NUL byte, \\u0000) (PostgreSQL 22P05: "
        "unsupported Unicode escape sequence); remove the NUL characters from the input."
    )


def test_k_true_and_other_loose_values_are_refused_by_the_engine(engine: Engine, coll: str) -> None:
    with pytest.raises(QueryError, match=r"^k must be an integer from 1 to 10000, got True\.$"):
        engine.search(coll, "pump", k=True)  # type: ignore[arg-type]
    with pytest.raises(QueryError, match=r"^snapshot 100000000000000000000 is not a snapshot id \(ids start at 1\)"):
        engine.search(coll, "pump", snapshot=10**20)


# -- item 10: unknown keys and strict types ------------------------------------------------


def test_search_params_forbid_unknown_keys_and_take_literals() -> None:
    with pytest.raises(pydantic.ValidationError, match="ef_serach"):
        SearchParams(ef_serach=400)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError, match="lexical_ranker"):
        SearchParams(lexical_ranker="tfidf")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError, match="depth"):
        SearchParams(depth=True)


def test_engine_search_with_an_unknown_key_names_the_valid_ones(engine: Engine, coll: str) -> None:
    with pytest.raises(QueryError) as exc:
        engine.search(coll, "pump", ef_serach=400)
    assert str(exc.value) == f"unknown search parameter 'ef_serach'; valid search parameters: {VALID_PARAMS}."
    with pytest.raises(QueryError) as exc:
        engine.search(coll, "pump", iterative_scan="sideways")
    assert str(exc.value) == "unknown iterative scan 'sideways'; use one of off, strict_order, relaxed_order."


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"query": "pump", "depth": 3},
            "unknown body key 'depth'; valid body keys: as_of, collection, filter, k, mode, offset, params, query, snapshot.",
        ),
        (
            {"query": "pump", "rrf_k": 10},
            "unknown body key 'rrf_k'; valid body keys: as_of, collection, filter, k, mode, offset, params, query, snapshot.",
        ),
        (
            {"query": "pump", "k": True},
            "body key 'k': input should be a valid integer, got True (bool); fix the value.",
        ),
        ({"query": "pump", "k": "3"}, "body key 'k': input should be a valid integer, got '3' (str); fix the value."),
        ({}, "body key 'query' is required."),
    ],
)
def test_http_body_that_does_not_fit_is_a_400_in_the_error_shape(
    client: TestClient, coll: str, body: dict, message: str
) -> None:
    r = client.post("/api/search", json={"collection": coll, **body})
    assert r.status_code == 400
    assert r.json() == {"error": {"type": "InputError", "message": message}}


def test_http_params_are_strict_too(client: TestClient, coll: str) -> None:
    r = client.post("/api/search", json={"collection": coll, "query": "pump", "params": {"ef_serach": 400}})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "type": "QueryError",
            "message": f"unknown search parameter 'ef_serach'; valid search parameters: {VALID_PARAMS}.",
        }
    }
    r = client.post("/api/search", json={"collection": coll, "query": "pump", "params": {"depth": 5}})
    assert r.status_code == 200 and r.json()["params"]["depth"] == 5


def test_http_get_rejects_unknown_query_parameters(client: TestClient, coll: str) -> None:
    r = client.get("/api/search", params={"collection": coll, "q": "pump", "depth": 3})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "type": "InputError",
            "message": "unknown query parameter 'depth'; valid query parameters: as_of, collection, filter, k, mode, "
            "offset, q, snapshot.",
        }
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{", "the request body is not valid JSON (Expecting property name enclosed in double quotes at position 1)"),
        (
            b"[1, 2]",
            "the request body must be a JSON object with keys as_of, collection, filter, k, mode, offset, params, ",
        ),
        (b"[" * 5000 + b"]" * 5000, "the request body could not be read as JSON (not UTF-8, or nested too deeply)"),
    ],
)
def test_http_bodies_that_are_not_a_json_object(client: TestClient, content: bytes, message: str) -> None:
    r = client.post("/api/search", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "InputError" and r.json()["error"]["message"].startswith(message)


def test_http_unknown_route_and_method_use_the_error_shape(client: TestClient) -> None:
    r = client.get("/api/nope")
    assert (r.status_code, r.json()) == (
        404,
        {"error": {"type": "NotFound", "message": "no route GET /api/nope; see /docs for the API's routes."}},
    )
    r = client.delete("/api/search")
    assert r.status_code == 405 and r.json()["error"]["type"] == "HTTPError"


def test_http_unexpected_exception_is_a_logged_json_500(engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(engine)

    def boom() -> None:
        raise RuntimeError("kaboom")

    app.add_api_route("/api/boom", boom)
    r = TestClient(app, raise_server_exceptions=False).get("/api/boom")
    assert r.status_code == 500 and r.headers["content-type"] == "application/json"
    assert r.json() == {
        "error": {
            "type": "InternalError",
            "message": "internal error (RuntimeError: kaboom); this is a bug in ranklock, the server log has the "
            "traceback. Please report it.",
        }
    }
    assert any("unhandled error on GET /api/boom" in rec.getMessage() and rec.exc_info for rec in caplog.records)


def test_cli_set_parses_every_search_parameter(engine: Engine, rl_home: Path, coll: str) -> None:
    args = ["--set", "depth=7", "--set", "exact_fallback=false", "--set", "iterative_scan=relaxed_order"]
    code, out = cli(engine, rl_home, "search", coll, "pump", "-k", "2", "--json", *args)
    assert code == 0, out
    params = json.loads(out)["params"]
    assert (params["depth"], params["exact_threshold"]) == (7, 20000)
    assert engine.search(coll, "pump", k=2, depth=7, exact_fallback=False).to_json(served_by=True) == out.strip()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "ef_serach=400"], f"unknown search parameter 'ef_serach'; valid search parameters: {VALID_PARAMS}."),
        (
            ["--set", "depth=many"],
            "search parameter 'depth': input should be a valid integer, unable to parse string as an integer, "
            "got 'many' (str); fix the value.",
        ),
        (["--set", "lexical_ranker=tfidf"], "unknown lexical ranker 'tfidf'; use one of bm25, ts_rank_cd."),
        (["--set", "depth"], f"--set 'depth' is not KEY=VALUE; e.g. --set ef_search=200. Keys: {VALID_PARAMS}."),
        (["--set", "depth=3", "--depth", "4"], "depth is given both as an option and as --set depth=3; give it once."),
    ],
)
def test_cli_set_errors_exit_2_naming_the_valid_keys(
    engine: Engine, rl_home: Path, coll: str, args: list[str], message: str
) -> None:
    code, out = cli(engine, rl_home, "search", coll, "pump", *args)
    assert (code, out.strip()) == (2, f"error: {message}")


# -- item 11: the README's filter example, and queries that start with '-' -----------------------


@pytest.mark.usefixtures("hash_cli")
def test_readme_filter_example_runs_as_written(engine: Engine, rl_home: Path, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [ln.split("  #")[0].strip() for ln in readme.splitlines()]
    create = next(ln for ln in lines if ln.startswith("ranklock collection create"))
    ingest = next(ln for ln in lines if ln.startswith("ranklock ingest") and create.split()[3] in ln.split())
    name = create.split()[3]
    search = next(ln for ln in lines if ln.startswith(f"ranklock search {name} ") and "--filter" in ln)
    assert f"ranklock ingest {name} " in ingest + " " and f"ranklock search {name} " in search
    for other in engine.collections():
        assert other.name != "t_readme_parts"
    rename = {name: "t_readme_parts", "examples/parts.jsonl": str(tmp_path / "parts.jsonl")}
    (tmp_path / "parts.jsonl").write_text(
        json.dumps({"id": "p1", "text": "pump seals", "metadata": {"year": 2021, "tags": ["parts"]}})
        + "\n"
        + json.dumps({"id": "p2", "text": "pump seals", "metadata": {"year": 2010, "tags": ["parts"]}})
        + "\n",
        encoding="utf-8",
    )
    outputs = []
    for line, extra in ((create, ["--embedder", HashEmbedder.id]), (ingest, []), (search, ["--json"])):
        argv = [rename.get(a, a) for a in shlex.split(line)[1:]]
        code, out = cli(engine, rl_home, *argv, *extra)
        assert code == 0, f"{line}: {out}"
        outputs.append(out)
    assert [h["doc_id"] for h in json.loads(outputs[-1])["hits"]] == ["p1"]


def test_cli_query_starting_with_a_dash_says_to_use_double_dash(engine: Engine, rl_home: Path, coll: str) -> None:
    code, out = cli(engine, rl_home, "search", coll, "-word foo")
    assert (code, out.strip()) == (
        2,
        f"error: no such option: -w; if '-word foo' is the query, put -- before a query that starts with '-': "
        f"ranklock search {coll} -- '-word foo'",
    )
    from ranklock.cli import app

    res = CliRunner().invoke(
        app, ["search", coll, "--dsn", engine.db.dsn, "--home", str(rl_home), "--json", "--", "-valve pump"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["query"] == "-valve pump"


def test_limits_are_documented_with_their_values() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name, value, _ in LIMITS:
        assert re.search(rf"\| `{name}` \| {value:,} \|", readme), name


def test_a_keyword_value_too_long_for_an_index_key_stops_the_ingest(engine: Engine, coll: str) -> None:
    before = active_state(engine)
    with pytest.raises(IngestError) as exc:
        engine.ingest(coll, [Document("kw", "", "x", {"tags": ["parts", "x" * 3000]})])
    assert str(exc.value) == (
        "document 'kw': a value of field 'tags' (keyword[]) is 3,000 characters; the limit is 512 "
        "(MAX_KEYWORD_CHARS), since each value is an index key. Keep labels short, or put long text in the "
        "document body."
    )
    assert active_state(engine) == before


def test_eval_checks_search_overrides_before_the_first_query(engine: Engine, coll: str, tmp_path: Path) -> None:
    # A lexical QueryError per query is read as "no searchable words"; a typo must not become empty rankings.
    from eval_corpus import write_golden
    from ranklock.eval.golden import load_golden
    from ranklock.eval.run import evaluate

    golden = load_golden(write_golden(tmp_path / "golden.jsonl"))
    with pytest.raises(QueryError) as exc:
        evaluate(engine, coll, golden, ks=(1,), modes=("lexical",), params={"ef_serach": 400})
    assert str(exc.value) == f"unknown search parameter 'ef_serach'; valid search parameters: {VALID_PARAMS}."
