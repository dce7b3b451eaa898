"""Exact identifiers: versions, part numbers, SKUs and e-mail addresses match as whole tokens."""

from __future__ import annotations

import pytest

from lexical_helpers import lexical, use_hash_embedder
from ranklock import Document, Engine

DOCS = [
    Document("rel-0", "Release notes", "Firmware v2.14.0 fixes the pump timer. See v2.14.0 notes. v2.14.0 is stable."),
    Document("rel-1", "Release notes", "Firmware v2.14.1 fixes the valve."),
    Document("rel-2", "Release notes", "Firmware v2.13.9 and v2.14 betas."),
    Document("xj-900", "Pump", "The XJ-900 pump is rated for 4711-B valves."),
    Document("xj-901", "Pump", "The XJ-901 pump replaces the XJ-902; XJ 900 series adapters fit."),
    Document("part-c", "Valve", "Valve 4711-C for the XJ-901, sold with 4711 gaskets and a B clamp."),
    Document("mail-1", "Contact", "Write to john.doe@example.com for parts."),
    Document("mail-2", "Contact", "Write to jane.doe@example.com or john@example.org for parts."),
]


@pytest.fixture(scope="module")
def parts(engine: Engine) -> str:
    name = "t_identifiers"
    emb = use_hash_embedder(engine)
    engine.ingest(name, DOCS, replace=True, create={"embedder": emb, "index": "exact"})
    return name


def test_identifier_tokens_are_whole_lowercased_lexemes(engine: Engine) -> None:
    row = engine.db.fetchone(
        "SELECT ranklock.ident_tokens('sensitive', %s) AS t, "
        "tsvector_to_array(ranklock.doc_tsvector('english', 'sensitive', %s)) AS lex",
        ["XJ-900 and 4711-B, v2.14.1. Mail J.Doe@Example.com; a well-known fact.",
         "XJ-900 and 4711-B, v2.14.1. Mail J.Doe@Example.com; a well-known fact."],
    )  # fmt: skip
    assert row is not None
    # Ordinary hyphenated words are not identifiers (no digit, no @); the parser keeps them whole already.
    assert row["t"] == ["xj-900", "4711-b", "v2.14.1", "j.doe@example.com"]
    # The parser's pieces stay, the whole tokens are added once.
    assert {"xj", "-900", "xj-900", "4711", "b", "4711-b", "v2.14.1", "j.doe@example.com"} <= set(row["lex"])


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("v2.14.1", "rel-1"),
        ("v2.14.0", "rel-0"),
        ("XJ-900", "xj-900"),
        ("xj-901", "xj-901"),
        ("4711-B", "xj-900"),
        ("4711-C", "part-c"),
        ("john.doe@example.com", "mail-1"),
    ],
)
def test_identifier_query_ranks_the_exact_match_first(engine: Engine, parts: str, query: str, first: str) -> None:
    hits = lexical(engine, parts, query)
    assert hits[0][0] == first


def test_version_does_not_match_its_neighbours(engine: Engine, parts: str) -> None:
    # v2.14.1 is one token: the documents about v2.14.0 or v2.13.9 share nothing with it.
    assert [d for d, _, _ in lexical(engine, parts, "v2.14.1")] == ["rel-1"]
    assert lexical(engine, parts, "firmware v2.14.1")[0][0] == "rel-1"


def test_part_number_is_not_reduced_to_its_pieces(engine: Engine, parts: str) -> None:
    hits = lexical(engine, parts, "XJ-900")
    top = hits[0]
    # The whole token outweighs the shared pieces: "XJ 900 series" and "XJ-901" come after.
    assert top[0] == "xj-900"
    others = {d: s for d, _, s in hits[1:]}
    assert "xj-901" in others and others["xj-901"] < top[2]


def test_identifiers_in_websearch_and_ts_rank_cd(engine: Engine, parts: str) -> None:
    web = lexical(engine, parts, '"XJ-900" pump', query_syntax="websearch")
    assert [d for d, _, _ in web] == ["xj-900"]
    res = engine.search(parts, "v2.14.1", k=5, mode="lexical", lexical_ranker="ts_rank_cd")
    assert [h.doc_id for h in res.hits] == ["rel-1"]
