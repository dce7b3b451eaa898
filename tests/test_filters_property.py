"""Property tests: filters never admit a violating document, and never lose a matching one.

Random typed documents (with missing values) and random filters of every
operator, nested with and / or / not, in both the structured and the
expression form.  Each result is checked against an independent Python
evaluator of the structured form: every returned document satisfies the
filter, ``matching_count`` is exact, and when ``k >= matching_count`` the
result holds every matching document.  The real embedded PostgreSQL serves
every search; a small deterministic embedder keeps the corpora fast.
"""

from __future__ import annotations

import random
from datetime import UTC, date, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import HashEmbedder
from ranklock import Document, Engine
from ranklock.collection import FieldSpec
from ranklock.ingest.fields import coerce_value
from ranklock.search.filters import format_filter
from test_filters import use_hash_embedder

FIELDS = ["n:int", "x:float", "flag:bool", "kw:keyword", "tags:keyword[]", "day:date", "ts:timestamp"]
INTS = [-2, 0, 1, 3, 7]
FLOATS = [-1.5, 0.0, 0.25, 2.5]
KWS = ["a", "B", "b", "c d", "é"]
TAGS = ["go", "Go", "py", "sql", "x'y"]
DAYS = [date(2024, 1, 1), date(2024, 6, 30), date(2025, 2, 28)]
TSS = [datetime(2024, 1, 1, 12, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)]
WORDS = ["alpha", "beta", "gamma", "delta", "omega"]


def random_metadata(rng: random.Random) -> dict[str, Any]:
    """Typed metadata as JSON would carry it; each field missing about a quarter of the time."""
    pools: dict[str, Any] = {
        "n": lambda: rng.choice(INTS),
        "x": lambda: rng.choice(FLOATS),
        "flag": lambda: rng.choice([True, False]),
        "kw": lambda: rng.choice(KWS),
        "tags": lambda: rng.sample(TAGS, rng.randint(0, 3)),
        "day": lambda: rng.choice(DAYS).isoformat(),
        "ts": lambda: rng.choice(TSS).isoformat(),
    }
    return {k: f() for k, f in pools.items() if rng.random() > 0.25}


def make_docs(seed: int, n: int) -> list[Document]:
    rng = random.Random(seed)
    return [
        Document(f"d{i:03d}", "", " ".join(rng.choices(WORDS, k=rng.randint(1, 4))), random_metadata(rng))
        for i in range(n)
    ]


# -- an independent evaluator of the structured form ----------------------------------------

SPECS = {f.split(":")[0]: FieldSpec(name=f.split(":")[0], type=f.split(":")[1]) for f in FIELDS}  # type: ignore[arg-type]


def typed(value: Any, name: str) -> Any:
    if value is None:
        return None
    return coerce_value(SPECS[name], value, where="test")


def holds(f: dict[str, Any], meta: dict[str, Any]) -> bool:
    if "and" in f:
        return all(holds(g, meta) for g in f["and"])
    if "or" in f:
        return any(holds(g, meta) for g in f["or"])
    if "not" in f:
        return not holds(f["not"], meta)
    name, op = f["field"], f["op"]
    v = typed(meta.get(name), name)
    if op == "is_null":
        return v is None
    if op == "is_not_null":
        return v is not None
    if v is None:
        return False  # a comparison on a missing value is false
    if op == "has":
        return bool(f["value"] in v)
    if op == "has_all":
        return all(t in v for t in f["value"])
    if op == "has_any":
        return any(t in v for t in f["value"])
    want = f["value"]
    if op == "in":
        return v in [typed(w, name) for w in want]
    if op == "between":
        return bool(typed(want[0], name) <= v <= typed(want[1], name))
    w = typed(want, name)
    return bool({"=": v == w, "!=": v != w, "<": v < w, "<=": v <= w, ">": v > w, ">=": v >= w}[op])


# -- random filters ---------------------------------------------------------------------------

ORDERED_OPS = ["=", "!=", "<", "<=", ">", ">="]


def leaf(name: str, pool: list[Any], ordered: bool) -> st.SearchStrategy[dict[str, Any]]:
    json_pool = [p.isoformat() if isinstance(p, (date, datetime)) else p for p in pool]
    ops = ORDERED_OPS if ordered else ["=", "!="]
    return st.one_of(
        st.builds(
            lambda op, v: {"field": name, "op": op, "value": v}, st.sampled_from(ops), st.sampled_from(json_pool)
        ),
        st.builds(
            lambda vs: {"field": name, "op": "in", "value": vs},
            st.lists(st.sampled_from(json_pool), min_size=1, max_size=3),
        ),
        *(
            [
                st.builds(
                    lambda a, b: {"field": name, "op": "between", "value": [a, b]},
                    st.sampled_from(json_pool),
                    st.sampled_from(json_pool),
                )
            ]
            if ordered
            else []
        ),
        st.sampled_from([{"field": name, "op": "is_null"}, {"field": name, "op": "is_not_null"}]),
    )


LEAVES = st.one_of(
    leaf("n", INTS, True),
    leaf("x", FLOATS, True),
    leaf("flag", [True, False], False),
    leaf("kw", KWS, False),
    leaf("day", DAYS, True),
    leaf("ts", TSS, True),
    st.builds(lambda t: {"field": "tags", "op": "has", "value": t}, st.sampled_from(TAGS)),
    st.builds(
        lambda op, ts: {"field": "tags", "op": op, "value": ts},
        st.sampled_from(["has_all", "has_any"]),
        st.lists(st.sampled_from(TAGS), min_size=1, max_size=3),
    ),
    st.sampled_from([{"field": "tags", "op": "is_null"}, {"field": "tags", "op": "is_not_null"}]),
)

FILTERS = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, inner),
    ),
    max_leaves=6,
)


# -- the corpus, built once ------------------------------------------------------------------

CORPUS = make_docs(7, 60)


@pytest.fixture(scope="module")
def corpus(engine: Engine) -> str:
    name = f"t_filters_property_{random.Random().randint(0, 10**6)}"
    emb = use_hash_embedder(engine)
    engine.create_collection(name, fields=FIELDS, embedder=emb, index_params={"m": 4, "ef_construction": 16})
    engine.ingest(name, CORPUS)
    return name


def check(
    engine: Engine,
    name: str,
    docs: list[Document],
    flt: dict[str, Any],
    as_text: bool,
    mode: str,
    exact_threshold: int,
    deep: bool = True,
) -> None:
    expected = {d.doc_id for d in docs if holds(flt, d.metadata)}
    spec: Any = format_filter(flt) if as_text else flt
    k = len(expected) + 1 if expected else 1
    # Hybrid fusion takes `depth` documents per branch; ask for enough half of the time.
    depth = max(k, 40) if deep else None
    res = engine.search(name, "alpha gamma", k=k, mode=mode, filter=spec, exact_threshold=exact_threshold, depth=depth)
    got = [h.doc_id for h in res.hits]
    assert len(got) == len(set(got))
    assert set(got) <= expected, f"admitted {sorted(set(got) - expected)} for {spec!r}"
    assert res.matching_count == len(expected)
    if mode == "lexical":
        assert res.complete is True
    elif res.truncation == "fusion_depth":
        # Never silent: the only way to get fewer is hybrid fusion depth below k, and it says so.
        assert mode == "hybrid" and res.params["depth"] < k and not res.complete
        assert len(got) < len(expected)
    else:
        # Exact scan, or an ANN index (flagged approximate) whose short result was rescanned exactly.
        assert set(got) == expected, f"lost {sorted(expected - set(got))} for {spec!r}"
        assert res.complete is (res.params["vector_strategy"] == "exact")
        assert res.truncation == (None if res.complete else "approximate_index")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flt=FILTERS,
    as_text=st.booleans(),
    mode=st.sampled_from(["hybrid", "semantic", "lexical"]),
    exact_threshold=st.sampled_from([0, 20000]),
    deep=st.booleans(),
)
def test_filters_on_a_fixed_random_corpus(
    engine: Engine, corpus: str, flt: dict[str, Any], as_text: bool, mode: str, exact_threshold: int, deep: bool
) -> None:
    check(engine, corpus, CORPUS, flt, as_text, mode, exact_threshold, deep)


@pytest.fixture(scope="module")
def scratch(engine: Engine) -> str:
    name = f"t_filters_property_scratch_{random.Random().randint(0, 10**6)}"
    engine.create_collection(name, fields=FIELDS, embedder=use_hash_embedder(engine))
    return name


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 15), flt=FILTERS, mode=st.sampled_from(["hybrid", "semantic"]))
def test_filters_on_random_corpora(
    engine: Engine, scratch: str, seed: int, n: int, flt: dict[str, Any], mode: str
) -> None:
    docs = make_docs(seed, n)
    engine.ingest(scratch, docs, replace=True)
    check(engine, scratch, docs, flt, False, mode, 20000)


def test_format_parse_round_trip_on_random_filters() -> None:
    from ranklock.search.filters import parse_filter

    @settings(max_examples=300, deadline=None)
    @given(flt=FILTERS)
    def inner(flt: dict[str, Any]) -> None:
        assert parse_filter(format_filter(flt)) == normalize_shape(flt)

    inner()


def normalize_shape(f: dict[str, Any]) -> dict[str, Any]:
    """The parser flattens a one-element and/or to its element."""
    if "and" in f or "or" in f:
        key = "and" if "and" in f else "or"
        items = [normalize_shape(g) for g in f[key]]
        return items[0] if len(items) == 1 else {key: items}
    if "not" in f:
        return {"not": normalize_shape(f["not"])}
    return f


assert HashEmbedder.dim == 8
