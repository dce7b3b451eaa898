"""Loading, normalising, chunking and storing documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from psycopg import sql

from ranklock import Document, Engine, IngestError
from ranklock.embed.sentence import MINILM_SHA256, default_embedder
from ranklock.ingest.chunker import chunk_text
from ranklock.ingest.loaders import load_corpus
from ranklock.ingest.normalize import normalize
from ranklock.snapshot.build import chunk_table


def test_default_embedder_weights_are_checked() -> None:
    emb = default_embedder()
    assert emb.sha256 == MINILM_SHA256
    assert emb.dim == 384


def test_nfkc_normalization_is_applied() -> None:
    assert normalize("ﬁle\r\nＡＢＣ  ") == "file\nABC"


def test_chunker_windows_and_overlap_in_model_tokens() -> None:
    tok = default_embedder().tokenizer
    text = " ".join(f"word{i}" for i in range(300))
    chunks = chunk_text(text, tok, window=64, overlap=16)
    spans = tok.offsets(text)
    assert len(chunks) > 1
    for c in chunks:
        assert c.text == text[c.start : c.end]
        n_tokens = sum(1 for a, b in spans if a >= c.start and b <= c.end)
        assert n_tokens <= 64
    # Consecutive chunks share exactly `overlap` tokens.
    first, second = chunks[0], chunks[1]
    shared = sum(1 for a, b in spans if a >= second.start and b <= first.end)
    assert shared == 16
    assert chunks == chunk_text(text, tok, window=64, overlap=16)


def test_loaders_beir_jsonl_and_folder(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(
        json.dumps({"_id": "1", "title": "T", "text": "body one", "metadata": {"a": 1}}) + "\n"
    )
    docs = load_corpus(beir)
    assert docs == [Document("1", "T", "body one", {"a": 1})]
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": 7, "text": "x"}) + "\n\n")
    assert load_corpus(plain)[0].doc_id == "7"
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("plain text note")
    (folder / "sub" / "b.md").write_text("# Heading B\n\nmarkdown body")
    docs = load_corpus(folder)
    assert [(d.doc_id, d.title, d.body) for d in docs] == [
        ("a.txt", "a", "plain text note"),
        ("sub/b.md", "Heading B", "markdown body"),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"_id": "1", "text": "ok"}\n{broken\n', r"bad\.jsonl:2: not valid JSON"),
        ('{"text": "no id"}\n', r"bad\.jsonl:1: the record has no `_id` \(BEIR\) or `id` field; add one\."),
        ('{"_id": "1"}\n', r"bad\.jsonl:1: document '1' has no string `text` field"),
        ('{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n', r"document id '1' appears twice"),
        ("[1, 2]\n", r"bad\.jsonl:1: expected a JSON object, got list\."),
    ],
)
def test_broken_files_have_clear_errors(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(IngestError, match=message):
        load_corpus(p)


def test_missing_path_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="does not exist; pass a corpus.jsonl"):
        load_corpus(tmp_path / "nope.jsonl")
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(IngestError, match=r"unknown corpus format '\.csv'"):
        load_corpus(tmp_path / "x.csv")


def test_broken_ingest_loses_nothing_stored(engine: Engine, cname: str, tmp_path: Path) -> None:
    engine.ingest(cname, [Document("a", "", "first document about owls")], replace=True)
    before = engine.search(cname, "owls", k=5).to_json()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "b", "text": "fine"}\n{oops\n')
    with pytest.raises(IngestError):
        engine.ingest(cname, bad)
    assert engine.search(cname, "owls", k=5).to_json() == before


def _stored(engine: Engine, name: str) -> list[tuple]:
    sid = engine.collection(name).active_snapshot_id
    assert sid is not None
    rows = engine.db.fetchall(
        sql.SQL(
            "SELECT doc_id, chunk, char_start, char_end, text, tsv::text AS tsv, embedding::text AS e, vec_digest "
            "FROM {} ORDER BY row_id"
        ).format(chunk_table(sid))
    )
    return [tuple(r.values()) for r in rows]


def test_ingesting_twice_gives_byte_identical_chunks_and_vectors(engine: Engine, cname: str) -> None:
    from ranklock.cli.demo import demo_corpus_path

    engine.ingest(cname + "_a", demo_corpus_path(), replace=True)
    # Clear the embedding cache for these texts so the second ingest embeds again.
    engine.db.execute("DELETE FROM ranklock.embedding_cache")
    r2 = engine.ingest(cname + "_b", demo_corpus_path(), replace=True)
    # dup-001 and dup-002 share one text: embedded once, its vector used twice (reused: not computed again).
    assert r2.embedded == r2.chunks - 1 and r2.reused == 1
    assert _stored(engine, cname + "_a") == _stored(engine, cname + "_b")
    # And the vectors are unit length, normalised once at write time.
    sid = engine.collection(cname + "_b").active_snapshot_id
    norms = engine.db.fetchall(sql.SQL("SELECT vector_norm(embedding) AS n FROM {}").format(chunk_table(int(sid or 0))))
    assert all(abs(r["n"] - 1.0) < 1e-5 for r in norms)
