"""The chunker's cut rules (ranklock.ingest.chunker): exact offsets, full coverage, whole words."""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import SpaceTok, use_hash_embedder
from ranklock import Document, Engine
from ranklock.embed.sentence import HFTokenizer, default_embedder
from ranklock.ingest.chunker import BOUNDARY_RULES, Chunk, boundaries, chunk_text


@cache
def minilm() -> HFTokenizer:
    return default_embedder().tokenizer


_WORDS = st.sampled_from(
    [
        "glass",
        "absorbs",
        "ultraviolet",
        "B",
        "radiation",
        "e.g.",
        "Dr.",
        "(IL-6)",
        "estimating",
        "optimal",
        "intakes",
        "naïve",
        "café",
        "über",
        "x",
        "3'-unique",
        "well-known",
        "é",
        "日本語",
        "THE",
        "a",
    ]
)
_SEPS = st.sampled_from([" ", " ", " ", "  ", ". ", "! ", "? ", ".\n\n", "\n", ", ", "\t", "\u00a0", '." '])


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(_WORDS, min_size=1, max_size=120))
    seps = draw(st.lists(_SEPS, min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps, strict=True)).strip()


def _check(text: str, chunks: list[Chunk], spans: list[tuple[int, int]], window: int, overlap: int) -> None:
    assert [c.number for c in chunks] == list(range(len(chunks)))
    strength = boundaries(text, spans)
    starts = {a: i for i, (a, _) in enumerate(spans)}
    ends = {b: i for i, (_, b) in enumerate(spans)}
    covered = [False] * len(spans)
    # Tokens of the longest word (a run of tokens with no boundary between them).
    longest_word = run = 1
    for s in strength[1:]:
        run = 1 if s else run + 1
        longest_word = max(longest_word, run)
    for prev, c in zip([None, *chunks], chunks, strict=False):
        # Offsets are exact and fall on token edges.
        assert c.text == text[c.start : c.end]
        first, last = starts[c.start], ends[c.end]
        assert last - first + 1 <= window
        for i in range(first, last + 1):
            covered[i] = True
        if prev is not None:
            # Consecutive chunks share at most `overlap` tokens, and always move forward.
            assert c.start > prev.start
            assert ends[prev.end] - first + 1 <= max(overlap, 0) or c.start >= prev.end
        if longest_word <= window // 2:
            # Whole words: a chunk starts after whitespace and ends before whitespace (or the text's edges).
            assert strength[first] > 0
            assert last + 1 == len(spans) or strength[last + 1] > 0
    # Every token of the document is in some chunk.
    assert all(covered)


@settings(max_examples=150, deadline=None)
@given(texts(), st.integers(min_value=2, max_value=40), st.integers(min_value=0, max_value=39))
def test_chunks_cover_every_token_with_exact_offsets_and_whole_words_space_tokens(
    text: str, window: int, overlap: int
) -> None:
    overlap = min(overlap, window - 1)
    tok = SpaceTok()
    chunks = chunk_text(text, tok, window, overlap)
    _check(text, chunks, tok.offsets(text), window, overlap)
    assert chunks == chunk_text(text, tok, window, overlap)  # deterministic


@settings(max_examples=150, deadline=None)
@given(texts(), st.integers(min_value=16, max_value=64), st.integers(min_value=0, max_value=15))
def test_chunks_cover_every_token_with_exact_offsets_and_whole_words_minilm(
    text: str, window: int, overlap: int
) -> None:
    tok = minilm()
    chunks = chunk_text(text, tok, window, overlap)
    _check(text, chunks, tok.offsets(text), window, overlap)
    for c in chunks:
        # A chunk tokenized alone is no longer than the window: the model never truncates it.
        assert len(tok.offsets(c.text)) <= window


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=400), st.integers(min_value=16, max_value=40))
def test_any_text_is_covered_within_the_window_minilm(text: str, window: int) -> None:
    """Arbitrary Unicode, long unspaced runs included: exact, complete, never over the window."""
    tok = minilm()
    spans = tok.offsets(text)
    chunks = chunk_text(text, tok, window, 4)
    if not spans:
        assert chunks == ([Chunk(0, 0, len(text), text)] if text.strip() else [])
        return
    covered: set[int] = set()
    for c in chunks:
        assert c.text == text[c.start : c.end]
        assert len(tok.offsets(c.text)) <= window
        covered |= {i for i, (a, b) in enumerate(spans) if a >= c.start and b <= c.end}
    assert covered == set(range(len(spans)))


def test_cut_prefers_a_sentence_end_then_a_word_end() -> None:
    tok = SpaceTok()
    text = "Alpha beta gamma. Delta epsilon zeta eta theta iota kappa"
    # Window 6: "Alpha .. gamma." (3 tokens) keeps half the window, so the cut is the sentence end.
    assert [c.text for c in chunk_text(text, tok, 6, 0)] == [
        "Alpha beta gamma.",
        "Delta epsilon zeta eta theta iota",
        "kappa",
    ]
    # Window 8: the sentence end would keep 3 tokens, less than half the window: the last word end instead.
    assert chunk_text(text, tok, 8, 0)[0].text == "Alpha beta gamma. Delta epsilon zeta eta theta"


def test_abbreviation_before_a_lowercase_word_is_not_a_sentence_end() -> None:
    text = "We used e.g. the glass. It absorbs light"
    assert boundaries(text, SpaceTok().offsets(text)) == [2, 1, 1, 1, 1, 2, 1, 1]


def test_real_tokenizer_cuts_at_sentence_ends_and_overlaps_from_a_word_start_minilm() -> None:
    tok = minilm()
    sentence = "The glass absorbs ultraviolet B radiation. "  # 8 MiniLM tokens
    text = sentence * 3 + "Estimating optimal intakes of vitamin D is hard."
    assert [c.text for c in chunk_text(text, tok, 16, 6)] == [
        # 16 tokens: two whole sentences.
        "The glass absorbs ultraviolet B radiation. The glass absorbs ultraviolet B radiation.",
        # 6 tokens back is "absorbs", a word start; the next sentence end in reach is before "Estimating".
        "absorbs ultraviolet B radiation. The glass absorbs ultraviolet B radiation.",
        # No sentence end leaves half the window: the last word end that fits.
        "absorbs ultraviolet B radiation. Estimating optimal intakes of vitamin D is",
        "intakes of vitamin D is hard.",
    ]


def test_boundary_rules_are_recorded_in_the_snapshot_manifest(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    engine.ingest(cname, [Document("d1", "Title", "One sentence. Another one here.")], create={"embedder": emb})
    chunker = engine.manifest(cname)["chunker"]
    assert chunker["boundaries"] == BOUNDARY_RULES == "ranklock-boundaries/1"
    assert chunker["tokenizer"] == "space"
    assert (chunker["window"], chunker["overlap"]) == (256, 32)
