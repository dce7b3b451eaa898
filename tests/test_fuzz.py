"""Fuzz the edges: random bytes and random structures for files, queries, filters and parameters.

Every case must end in exit 0 or 2 (CLI), a 2xx or a 4xx JSON error (HTTP) or a RanklockError
(Python API): never a traceback, never a 500.  And nothing stored may change: the reference
collection answers a fixed set of searches (``search --json``, no timings) byte for byte the
same before and after each target.

Bounded so the suite stays fast (about ``RANKLOCK_FUZZ_EXAMPLES`` cases per target, default 100)
and reproducible (hypothesis derandomized); ``RANKLOCK_FUZZ_RANDOM=1`` draws fresh cases, for a
longer exploratory run::

    RANKLOCK_FUZZ_RANDOM=1 RANKLOCK_FUZZ_EXAMPLES=1000 pytest tests/test_fuzz.py -s
"""

from __future__ import annotations

import json
import os
import typing
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ranklock.embed.loaded
from fakes import HashEmbedder
from ranklock import Document, Engine, RanklockError
from ranklock.errors import NotFound
from ranklock.http import create_app
from ranklock.settings import SearchParams

COLL = "t_fuzz_ref"
EXAMPLES = int(os.environ.get("RANKLOCK_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=timedelta(seconds=20),  # a shared, loaded machine: a slow case is not a failure
    derandomize=not os.environ.get("RANKLOCK_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
CASES: Counter[str] = Counter()
FIELDS = ["year:int", "score:float", "tags:keyword[]", "kind:keyword", "day:date", "at:timestamp", "flag:bool"]
FIELD_NAMES = [f.split(":")[0] for f in FIELDS]

# Characters that broke something once, or could: NUL, lone surrogates, rich markup, quotes, dashes.
SPECIAL = ["\x00", "\ud800", "\udfff", "[/]", "[bold]", "-", "--", "'", '"', "\\", "(", ")", "é", "\u200b", "\n"]
WORDS = ["pump", "seal", "valve", "gasket", "the", "and", "-pump", '"seal valve"', "or", "number", "7", "ß", "ﬁ"]
texts = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(SPECIAL)), max_size=6).map("".join)
# Most cases should get past validation, so the SQL paths see odd-but-valid values too.
ODD = ["[/]", "[bold]", "-", "'", '"', "\\", "(", ")", "é", "\u200b", "\n", "*", ":", "&", "|", "!"]
plausible = st.lists(
    st.one_of(st.sampled_from(WORDS), st.sampled_from(WORDS), st.sampled_from(WORDS), st.sampled_from(ODD), texts),
    min_size=1,
    max_size=6,
).map(" ".join)
queries = st.one_of(plausible, plausible, plausible, texts)
numbers = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.integers(min_value=-3000, max_value=3000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 0, -1, 1e308, -1e308, 5e-324]),
)
dates = st.one_of(
    st.dates().map(str),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.sampled_from(["0001-01-01", "9999-12-31", "10000-01-01", "2024-02-30", "2024-01-01T00:00:00+14:00", ""]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts, dates)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
#: A value of roughly the right type for each field, extremes included.
typed_values = {
    "year": st.one_of(st.integers(min_value=-(2**64), max_value=2**64), st.integers(1900, 2100)),
    "score": st.one_of(numbers, st.floats(-1e6, 1e6)),
    "tags": st.one_of(st.lists(st.one_of(st.sampled_from(["parts", "old"]), texts), max_size=4), texts),
    "kind": st.one_of(st.just("k"), texts, st.integers()),
    "day": dates,
    "at": dates,
    "flag": st.one_of(st.booleans(), json_values),
}
FIELD_OPS = {
    "year": ["=", "!=", "<", "<=", ">", ">=", "in", "between", "is null"],
    "score": ["=", "<", ">=", "in", "between", "is not null"],
    "tags": ["has", "has all", "has any", "is null"],
    "kind": ["=", "!=", "in"],
    "day": [">=", "<", "between"],
    "at": [">=", "<"],
    "flag": ["=", "!="],
}


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value).lower()


@st.composite
def conditions(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(FIELD_NAMES))
    op = draw(st.sampled_from(FIELD_OPS[name]))
    value = typed_values[name]
    if op.startswith("is"):
        return f"{name} {op}"
    if op == "between":
        return f"{name} between {_literal(draw(value))} and {_literal(draw(value))}"
    if op in ("in", "has all", "has any"):
        items = draw(st.lists(value, min_size=1, max_size=3))
        return f"{name} {op} ({', '.join(_literal(v) for v in items)})"
    return f"{name} {op} {_literal(draw(value))}"


well_formed_filters = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        inner.map(lambda f: f"not ({f})"),
    ),
    max_leaves=5,
)
FILTER_TOKENS = [
    *FIELD_NAMES,
    "nope",
    "=",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "between",
    "has",
    "all",
    "any",
    "is",
    "not",
    "null",
    "and",
    "or",
    "true",
    "false",
    "(",
    ")",
    ",",
    "1e999",
    "99999999999999999999",
    '"2024-01-01"',
    '"2024-01-01T00:00:00Z"',
    '"10000-01-01"',
    '"a\x00b"',
]
filter_texts = st.one_of(
    well_formed_filters,
    well_formed_filters,
    texts,
    st.lists(st.one_of(st.sampled_from(FILTER_TOKENS), numbers.map(str), texts.map(json.dumps)), max_size=12).map(
        " ".join
    ),
)
typed_nodes = st.sampled_from(FIELD_NAMES).flatmap(
    lambda name: st.fixed_dictionaries(
        {"field": st.just(name), "op": st.sampled_from(["=", ">=", "<", "in", "between", "has", "has_any", "is_null"])},
        optional={"value": st.one_of(typed_values[name], st.lists(typed_values[name], max_size=3))},
    )
)
filter_nodes = st.recursive(
    typed_nodes
    | st.fixed_dictionaries(
        {
            "field": st.one_of(st.sampled_from(FIELD_NAMES), texts),
            "op": st.one_of(st.sampled_from(["=", ">=", "in", "between", "has", "has_any", "is_null"]), texts),
        },
        optional={"value": json_values},
    ),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"and": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries({"or": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries({"not": inner}),
    ),
    max_leaves=6,
)


def _param_values(annotation: Any) -> st.SearchStrategy[Any]:
    """A value of roughly ``annotation``'s type, bounds and beyond included; None too for an optional one."""
    args = typing.get_args(annotation)
    if type(None) in args and len(args) == 2:  # `int | None` (ef_search): the type's values, or None
        (inner,) = (a for a in args if a is not type(None))
        return st.one_of(_param_values(inner), st.none())
    if annotation is int:
        return st.one_of(st.integers(1, 100), st.integers(1, 100), st.integers(min_value=-1, max_value=2**64))
    if annotation is float:
        return st.one_of(st.floats(0, 1), st.floats(0, 1), st.floats(allow_nan=True, allow_infinity=True))
    if annotation is bool:
        return st.booleans()
    return st.sampled_from([*args, "nope"])


#: A value of roughly the right type for each search parameter, bounds and beyond included.
param_values: dict[str, st.SearchStrategy[Any]] = {
    name: _param_values(field.annotation) for name, field in SearchParams.model_fields.items()
}
typed_params = st.sampled_from(sorted(param_values)).flatmap(
    lambda name: st.tuples(
        st.just(name), st.one_of(param_values[name], param_values[name], param_values[name], json_values)
    )
)
ks = st.one_of(st.integers(1, 30), st.integers(1, 30), st.integers(-5, 20_000), json_values)
SEARCH_ARGS = {"self", "name", "query", "k", "mode", "filter", "snapshot", "as_of"}
param_keys = st.one_of(st.sampled_from(sorted(SearchParams.model_fields)), texts)


@pytest.fixture(scope="module")
def ref(engine: Engine) -> Iterator[str]:
    """The reference collection, and the CLI's engines resolving the test embedder."""
    engine.embedders.register(HashEmbedder())
    try:
        engine.collection(COLL)
    except NotFound:
        engine.create_collection(COLL, fields=FIELDS, embedder=HashEmbedder.id)
    docs = [
        Document(
            f"d{i}",
            f"Title {i}",
            f"pump seal valve number {i} " + "gasket " * (i % 3),
            {
                "year": 2015 + i,
                "score": i / 3,
                "tags": ["parts"] if i % 2 else ["old"],
                "kind": "k",
                "flag": i % 2 == 0,
            },
        )
        for i in range(8)
    ]
    engine.ingest(COLL, docs, replace=True)
    real = ranklock.embed.loaded.resolve_embedder
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            ranklock.embed.loaded, "resolve_embedder", lambda s: HashEmbedder() if s == HashEmbedder.id else real(s)
        )
        yield COLL
    print(f"\nfuzzed cases: {sum(CASES.values())}; by outcome: {dict(sorted(CASES.items()))}")


def cli(engine: Engine, rl_home: Path, command: str, *args: str) -> tuple[int, str, BaseException | None]:
    from ranklock.cli import app

    res = CliRunner().invoke(app, [command, "--dsn", engine.db.dsn, "--home", str(rl_home), *args])
    return res.exit_code, res.output, res.exception


def fingerprint(engine: Engine, rl_home: Path) -> list[str]:
    """What the reference collection answers: `search --json` of fixed queries, and its active snapshot."""
    out = []
    for args in (["pump seal"], ["gasket", "--mode", "lexical"], ["valve", "--filter", "year >= 2018"]):
        code, text, _ = cli(engine, rl_home, "search", COLL, *args, "--json", "-k", "5")
        assert code == 0, text
        out.append(text)
    row = next(c for c in engine.collections() if c.name == COLL)
    out.append(json.dumps(row.as_dict(), sort_keys=True, default=str))
    return out


def assert_clean_exit(what: str, code: int, output: str, exc: BaseException | None) -> None:
    CASES[f"{what} exit {code}"] += 1
    assert code in (0, 2), f"exit {code}: {output[-2000:]!r} ({exc!r})"
    assert "Traceback" not in output, output[-2000:]


def jsonl(records: list[Any], ascii_only: bool) -> bytes:
    lines = [json.dumps(r, ensure_ascii=ascii_only) for r in records]
    return "\n".join(lines).encode("utf-8", errors="surrogatepass")


typed_metadata = st.lists(st.sampled_from(FIELD_NAMES), unique=True, max_size=4).flatmap(
    lambda names: st.fixed_dictionaries({n: typed_values[n] for n in names})
)
plausible_records = st.fixed_dictionaries(
    {"id": st.one_of(st.sampled_from(["a", "b", "c"]), texts, st.integers()), "text": queries},
    optional={"title": queries, "metadata": typed_metadata, "display": json_values},
)
random_records = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(texts, st.integers(), json_values),
        "_id": texts,
        "text": st.one_of(texts, json_values),
        "title": st.one_of(texts, json_values),
        "metadata": st.one_of(st.dictionaries(st.sampled_from(FIELD_NAMES), json_values, max_size=4), json_values),
        "display": json_values,
    },
)
records = st.one_of(plausible_records, plausible_records, random_records)
files = st.one_of(
    st.binary(max_size=400).map(lambda b: ("bytes.jsonl", b)),
    st.tuples(st.lists(records, min_size=1, max_size=4), st.booleans()).map(lambda t: ("records.jsonl", jsonl(*t))),
    st.tuples(st.lists(st.one_of(records, json_values), max_size=3), st.binary(max_size=20)).map(
        lambda t: ("mixed.jsonl", jsonl(t[0], True) + b"\n" + t[1])
    ),
    st.binary(max_size=200).map(lambda b: ("note.txt", b)),
)


def test_fuzz_cli_ingest_files(
    engine: Engine, rl_home: Path, ref: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    before = fingerprint(engine, rl_home)

    @FUZZ
    @given(file=files)
    def case(file: tuple[str, bytes]) -> None:
        folder = tmp_path_factory.mktemp("fuzz-ingest")
        name, content = file
        (folder / name).write_bytes(content)
        target = folder if name.endswith(".txt") else folder / name
        # --no-activate: a file that loads builds a snapshot, and the active one must not move.
        assert_clean_exit("cli ingest", *cli(engine, rl_home, "ingest", ref, str(target), "--no-activate", "--json"))

    case()
    assert fingerprint(engine, rl_home) == before


def test_fuzz_cli_search(engine: Engine, rl_home: Path, ref: str) -> None:
    before = fingerprint(engine, rl_home)

    @FUZZ
    @given(
        query=st.one_of(queries, st.sampled_from(["pump", "-pump", "--", "-k", "--json"])),
        filt=st.none() | filter_texts,
        sets=st.lists(
            st.one_of(
                typed_params.map(lambda t: (t[0], _literal(t[1]).strip('"'))),
                st.tuples(param_keys, texts | numbers.map(str)),
            ),
            max_size=3,
            unique_by=lambda t: t[0],
        ),
        k=st.none() | ks.map(str) | texts,
        mode=st.none() | st.sampled_from(["hybrid", "lexical", "semantic"]) | texts,
    )
    def case(query: str, filt: str | None, sets: list[tuple[str, str]], k: str | None, mode: str | None) -> None:
        args = [ref, query, "--json"]
        if filt is not None:
            args += ["--filter", filt]
        for key, value in sets:
            args += ["--set", f"{key}={value}"]
        if k is not None:
            args += ["-k", k]
        if mode is not None:
            args += ["--mode", mode]
        assert_clean_exit("cli search", *cli(engine, rl_home, "search", *args))

    case()
    assert fingerprint(engine, rl_home) == before


def _assert_json_answer(what: str, status: int, body: bytes) -> None:
    CASES[f"{what} {status}"] += 1
    assert status < 500, body[-2000:]
    data = json.loads(body)
    if status >= 400:
        assert set(data) == {"error"} and set(data["error"]) == {"type", "message"}, data
        assert isinstance(data["error"]["message"], str) and data["error"]["message"]
    else:
        assert data["collection"] == COLL and isinstance(data["hits"], list)


@pytest.mark.usefixtures("ref")
def test_fuzz_http_search(engine: Engine, rl_home: Path) -> None:
    before = fingerprint(engine, rl_home)
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    keys = st.sampled_from(["collection", "query", "k", "mode", "filter", "snapshot", "as_of", "params", "depth"])
    searches = st.fixed_dictionaries(
        {"collection": st.just(COLL), "query": queries},
        optional={
            "k": ks,
            "mode": st.sampled_from(["hybrid", "lexical", "semantic"]) | json_values,
            "filter": st.one_of(filter_texts, filter_nodes, st.lists(filter_nodes, max_size=3), json_values),
            "params": st.lists(typed_params, max_size=3).map(dict)
            | st.dictionaries(param_keys, json_values, max_size=3)
            | json_values,
            "snapshot": st.none() | st.integers(-1, 3) | json_values,
            "as_of": st.none() | dates | json_values,
        },
    )
    bodies = st.one_of(
        searches,
        searches,
        searches,
        st.dictionaries(keys | texts, json_values, max_size=6).map(lambda d: {"collection": COLL, **d}),
        json_values,
    )

    @FUZZ
    @given(
        body=bodies,
        raw=st.one_of(st.none(), st.none(), st.none(), st.binary(max_size=200)),
        query=st.dictionaries(keys | texts, texts | numbers.map(str), max_size=5),
    )
    def case(body: Any, raw: bytes | None, query: dict[str, str]) -> None:
        content = raw if raw is not None else json.dumps(body).encode()  # ASCII: lone surrogates travel as \ud800
        r = client.post("/api/search", content=content, headers={"content-type": "application/json"})
        _assert_json_answer("http post", r.status_code, r.content)
        params = {"collection": COLL, "q": "pump", **query}
        # Percent-encoded by hand: a lone surrogate goes out as the bytes a broken client would send.
        qs = "&".join(
            f"{quote(k, safe='', errors='surrogatepass')}={quote(v, safe='', errors='surrogatepass')}"
            for k, v in params.items()
        )
        r = client.get(f"/api/search?{qs}")
        _assert_json_answer("http get", r.status_code, r.content)

    case()
    assert fingerprint(engine, rl_home) == before


@pytest.mark.usefixtures("ref")
def test_fuzz_python_api_parameters(engine: Engine, rl_home: Path) -> None:
    before = fingerprint(engine, rl_home)

    @FUZZ
    @given(
        query=queries,
        k=ks,
        filt=st.none() | filter_texts | filter_nodes,
        params=st.one_of(
            st.lists(typed_params, max_size=3).map(dict),
            st.dictionaries(texts.filter(lambda t: t not in SEARCH_ARGS), json_values, max_size=2),
        ),
    )
    def case(query: str, k: Any, filt: Any, params: dict[str, Any]) -> None:
        try:
            res = engine.search(COLL, query, k=k, filter=filt, **params)
        except RanklockError as exc:
            CASES[f"python search {type(exc).__name__}"] += 1
            assert str(exc)
            return
        CASES["python search ok"] += 1
        assert res.collection == COLL

    case()
    assert fingerprint(engine, rl_home) == before
