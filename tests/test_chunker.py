"""The chunker's cut rules (ranklock.ingest.chunker): exact offsets, full coverage, whole words, full overlaps."""

from __future__ import annotations

from functools import cache

from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import sql

from fakes import HashEmbedder, SpaceTok, use_hash_embedder
from ranklock import ChunkerParams, Document, Engine
from ranklock.embed.base import token_capacity
from ranklock.embed.sentence import HFTokenizer, default_embedder
from ranklock.ingest.chunker import BOUNDARY_RULES, Chunk, boundaries, chunk_text, effective_window, last_window
from ranklock.snapshot.build import chunk_table


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
        # Long words, URLs and hyphenation: many word pieces, no whitespace inside.
        "pneumonoultramicroscopicsilicovolcanoconiosis",
        "https://example.org/a/b_c?d=e&f=g#h",
        "state-of-the-art",
        "anti-\ninflammatory",
        "10.1016/j.cell.2009.01.042",
    ]
)
_SEPS = st.sampled_from([" ", " ", " ", "  ", ". ", "! ", "? ", ".\n\n", "\n", ", ", "\t", "\u00a0", '." '])


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(_WORDS, min_size=1, max_size=120))
    seps = draw(st.lists(_SEPS, min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps, strict=True)).strip()


def _words(strength: list[int]) -> list[int]:
    """For each token, the number of tokens of the word it belongs to (a run with no boundary inside)."""
    sizes: list[int] = []
    run = 0
    for i, s in enumerate(strength):
        if i and s:
            sizes += [run] * run
            run = 0
        run += 1
    return sizes + [run] * run


def _check(
    text: str, chunks: list[Chunk], spans: list[tuple[int, int]], window: int, overlap: int, cap: int | None = None
) -> None:
    """Exact offsets, full coverage, within the window, whole words, at least ``overlap`` shared tokens.

    ``cap``: the model reads a chunk's first ``cap`` tokens; then the last chunk is within it and
    every token is read by some chunk's vector.
    """
    assert [c.number for c in chunks] == list(range(len(chunks)))
    strength = boundaries(text, spans)
    word = _words(strength)
    starts = {a: i for i, (a, _) in enumerate(spans)}
    ends = {b: i for i, (_, b) in enumerate(spans)}
    covered = [False] * len(spans)
    prev: tuple[int, int] | None = None
    for c in chunks:
        # Offsets are exact and fall on token edges.
        assert c.text == text[c.start : c.end]
        first, last = starts[c.start], ends[c.end]
        assert last - first + 1 <= window
        for i in range(first, last + 1):
            covered[i] = True
        # Whole words: a chunk starts and ends at a word boundary, unless it cuts a word longer than the window.
        assert strength[first] > 0 or word[first] > window
        assert last + 1 == len(spans) or strength[last + 1] > 0 or word[last] > window
        if prev is not None:
            p_first, p_last = prev
            assert first > p_first  # always forward
            assert first <= p_last + 1  # no token skipped
            assert last > p_last or last + 1 == len(spans)  # no chunk lies inside the one before it
            point = p_last + 1 - overlap  # `overlap` tokens back from the previous end
            # The start is the last word boundary at or before that point, so at least `overlap` tokens are
            # shared; it lies after the point only when a single word forbids it: a word spans the point, or
            # the word after the previous chunk would not fit whole from there.
            if first <= point:
                assert not any(strength[i] for i in range(first + 1, point + 1))
            else:
                prior = [i for i in range(p_first + 1, point + 1) if strength[i]]
                next_word_end = p_last + 1 + word[p_last + 1]
                assert not prior or (strength[p_last + 1] > 0 and prior[-1] + window < next_word_end)
        prev = (first, last)
    # Every token of the document is in some chunk.
    assert all(covered)
    if cap is not None and chunks:
        assert ends[chunks[-1].end] - starts[chunks[-1].start] + 1 <= cap
        read = [False] * len(spans)
        for c in chunks:
            first, last = starts[c.start], ends[c.end]
            for i in range(first, min(last + 1, first + cap)):
                read[i] = True
        assert all(read)


@settings(max_examples=200, deadline=None)
@given(texts(), st.integers(min_value=2, max_value=40), st.integers(min_value=0, max_value=39))
def test_chunks_cover_every_token_with_exact_offsets_whole_words_and_full_overlap_space_tokens(
    text: str, window: int, overlap: int
) -> None:
    overlap = min(overlap, window - 1)
    tok = SpaceTok()
    chunks = chunk_text(text, tok, window, overlap)
    _check(text, chunks, tok.offsets(text), window, overlap)
    assert chunks == chunk_text(text, tok, window, overlap)  # deterministic


@settings(max_examples=200, deadline=None)
@given(texts(), st.integers(min_value=16, max_value=64), st.integers(min_value=0, max_value=15))
@example(
    # Found by hypothesis: a chunk starting inside a word longer than the window, shortened to fit the
    # model, ended inside the short last word (ranklock-boundaries/3).
    "glass glass glass glass glass glass glass glass pneumonoultramicroscopicsilicovolcanoconiosis glass glass "
    "glass glass absorbs.",
    16,
    8,
)
def test_chunks_cover_every_token_with_exact_offsets_whole_words_and_full_overlap_minilm(
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


def test_cut_at_the_last_word_end_in_the_window_and_start_a_full_overlap_back() -> None:
    tok = SpaceTok()
    text = "Alpha beta gamma. Delta epsilon zeta eta theta iota kappa"
    # Window 6: the fullest whole-word window, not the sentence end; the next start is 2 words back.
    assert [c.text for c in chunk_text(text, tok, 6, 2)] == [
        "Alpha beta gamma. Delta epsilon zeta",
        "epsilon zeta eta theta iota kappa",
    ]
    # No overlap: consecutive chunks meet.
    assert [c.text for c in chunk_text(text, tok, 4, 0)] == [
        "Alpha beta gamma. Delta",
        "epsilon zeta eta theta",
        "iota kappa",
    ]


def test_abbreviation_before_a_lowercase_word_is_not_a_sentence_end() -> None:
    text = "We used e.g. the glass. It absorbs light"
    assert boundaries(text, SpaceTok().offsets(text)) == [2, 1, 1, 1, 1, 2, 1, 1]


def test_real_tokenizer_cuts_at_word_ends_and_overlaps_from_a_word_start_minilm() -> None:
    tok = minilm()
    # MiniLM splits "absorbs" into absorb ##s, "Estimating" into est ##imating, "intakes" into intake ##s.
    text = "The glass absorbs ultraviolet B radiation. " * 2 + "Estimating optimal intakes of vitamin D is hard."
    assert [c.text for c in chunk_text(text, tok, 12, 3)] == [
        # 12 tokens end before "ultraviolet", a word start: a full window.
        "The glass absorbs ultraviolet B radiation. The glass absorbs",
        # 3 tokens back is "glass", a word start: exactly 3 tokens shared.
        "glass absorbs ultraviolet B radiation. Estimating optimal intakes",
        "optimal intakes of vitamin D is hard.",
    ]
    # 1 token back is ##s, inside "absorbs": the next chunk starts at the word's start and shares 2 tokens.
    assert [c.text for c in chunk_text(text, tok, 12, 1)][
        1
    ] == "absorbs ultraviolet B radiation. Estimating optimal intakes of"


def test_a_word_longer_than_the_window_is_cut_and_the_words_around_it_are_whole_minilm() -> None:
    tok = minilm()
    url = "https://example.org/" + "/".join(f"segment{i}" for i in range(12))  # 43 MiniLM tokens, no space
    text = f"See the archive at {url} for the raw data of every patient."
    chunks = chunk_text(text, tok, 24, 4)
    _check(text, chunks, tok.offsets(text), 24, 4)
    assert [c.text for c in chunks] == [
        # The URL does not fit after "at": the cut falls before it.
        "See the archive at",
        # Only the URL itself is cut inside, with `overlap` tokens shared (segment4).
        "https://example.org/segment0/segment1/segment2/segment3/segment4/segment",
        "segment4/segment5/segment6/segment7/segment8/segment9/segment10/segment11 for",
        # 4 tokens back lies inside the URL: the first word start after it.
        "for the raw data of every patient.",
    ]


class _CappedSpaceTok(SpaceTok):
    """Whitespace tokens, and a model that reads ``max_tokens`` of them."""

    id = "space-capped"

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens


@settings(max_examples=200, deadline=None)
@given(
    texts(),
    st.integers(min_value=2, max_value=40),
    st.integers(min_value=0, max_value=39),
    st.integers(min_value=1, max_value=40),
)
def test_every_token_is_read_by_some_vector_when_the_model_reads_less_than_the_window(
    text: str, window: int, overlap: int, cap: int
) -> None:
    """The window may pass the model's limit by the overlap; the last chunk never passes it."""
    overlap = min(overlap, window - 1)
    tok = _CappedSpaceTok(cap)
    chunks = chunk_text(text, tok, window, overlap)
    w, o = effective_window(window, overlap, tok)
    assert w == min(window, cap + min(overlap, cap - 1)) and o == min(overlap, cap - 1, w - 1)
    _check(text, chunks, tok.offsets(text), w, o, cap=min(w, cap))


def test_the_window_passes_the_model_by_at_most_the_overlap_minilm() -> None:
    """all-MiniLM-L6-v2 reads 254 tokens of a text; a 256-token chunk's last two are read by the next chunk."""
    tok = minilm()
    assert token_capacity(tok) == 254
    assert effective_window(256, 32, tok) == (256, 32)
    assert effective_window(512, 32, tok) == (286, 32)
    assert effective_window(128, 32, tok) == (128, 32)
    assert effective_window(512, 300, tok) == (507, 253)  # the overlap within what the model reads
    assert last_window(256, tok) == 254 and last_window(128, tok) == 128
    assert token_capacity(SpaceTok()) is None and effective_window(512, 32, SpaceTok()) == (512, 32)
    text = " ".join(["The glass absorbs ultraviolet B radiation."] * 200)
    chunks = chunk_text(text, tok, 256, 32)
    assert max(len(tok.offsets(c.text)) for c in chunks) == 256
    assert len(tok.offsets(chunks[-1].text)) <= 254
    _check(text, chunks, tok.offsets(text), 256, 32, cap=254)
    # A document of 255 tokens: one 256-token chunk would leave its last token in no vector.
    words = " ".join(f"w{i}" for i in range(300))
    spans = tok.offsets(words)
    doc = words[: spans[254][1]]
    assert len(tok.offsets(doc)) == 255
    two = chunk_text(doc, tok, 256, 32)
    assert len(two) == 2 and all(len(tok.offsets(c.text)) <= 254 for c in two)


def test_boundary_rules_and_effective_window_are_recorded_in_the_snapshot_manifest(engine: Engine, cname: str) -> None:
    emb = use_hash_embedder(engine)
    engine.ingest(cname, [Document("d1", "Title", "One sentence. Another one here.")], create={"embedder": emb})
    chunker = engine.manifest(cname)["chunker"]
    assert chunker["boundaries"] == BOUNDARY_RULES == "ranklock-boundaries/4"
    assert chunker["tokenizer"] == "space"
    assert (chunker["window"], chunker["overlap"]) == (256, 32)
    # The test tokenizer states no model limit: the configured window is the one cut.
    assert chunker["effective"] == {"window": 256, "overlap": 32, "last_window": 256}


def test_a_model_limit_lowers_the_window_of_every_stored_chunk(engine: Engine, cname: str) -> None:
    """A tokenizer that states the model's limit (``max_tokens``) bounds the windows, end to end."""

    class CappedTok(SpaceTok):
        id = "space-capped"
        max_tokens = 10

    class CappedEmbedder(HashEmbedder):
        tokenizer = CappedTok()

    emb = CappedEmbedder("test:hash-capped")
    engine.embedders.register(emb)
    body = " ".join(f"w{i}" for i in range(40))
    engine.ingest(
        cname,
        [Document("d1", "", body)],
        create={"embedder": emb.id, "chunker": ChunkerParams(window=24, overlap=4)},
    )
    chunker = engine.manifest(cname)["chunker"]
    assert (chunker["window"], chunker["overlap"]) == (24, 4)
    # The window passes the model's 10 by at most the overlap; the last chunk stays within it.
    assert chunker["effective"] == {"window": 14, "overlap": 4, "last_window": 10}
    sid = int(engine.collection(cname).active_snapshot_id or 0)
    rows = engine.db.fetchall(sql.SQL("SELECT text FROM {} ORDER BY chunk").format(chunk_table(sid)))
    # 40 words, 14 a chunk, 4 shared: chunks start at w0, w10, w20; the last, w30-w39, holds 10.
    # Each vector reads 10 words (w0-9, w10-19, ...): every word is read by one.
    assert [r["text"] for r in rows] == [
        " ".join(f"w{i}" for i in range(a, min(a + 14, 40) if a < 30 else 40)) for a in (0, 10, 20, 30)
    ]
