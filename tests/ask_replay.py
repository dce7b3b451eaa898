"""Captured answers of the frozen extractive readers, and the stand-in embedder they are replayed under.

A reader version is frozen as a whole by its captured answers (docs/ask.md, "Frozen as a whole"):
``tests/data/ask_replay/requests.json.gz`` holds real generation requests (the question, the
collection's language and the eight passages Ask handed over, from the journal and the hand-written
sets of issue 40), and ``answers-<version>.jsonl`` each frozen version's draft for every request,
captured when the version froze; ``structure.json.gz`` and ``structure-<version>.jsonl`` do the
same for notes written in lists, headings and tables (issue 47's sets), captured for every version
when issue 47 added them.  ``tests/test_ask_replay.py`` asks every request again on every run and
compares byte for byte, so a change to shared code (terms, segmentation, answer types, the
abstention text) that changes what an old version answers fails the suite, whatever the checksum
says.

The vectors are the stand-in's (:func:`standin_embed`), not the model's: the model is not needed,
the test is fast and exact, and a reader is a function of its vectors as much as of its code, so a
fixed stand-in exercises the same code on the same texts.  The stand-in hashes each word and its
character trigrams into 384 dimensions, so texts sharing words or word forms have high cosines, as
a sentence embedder's do; its entries are multiples of a power of two near the vector's norm, so every
dot product of two of them is exact in floating point, whatever the order a BLAS sums in.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ranklock.ask.generators import resolve_generator
from ranklock.ask.model import AskChunk, Draft, GenerationRequest, canonical_json
from ranklock.ask.prompt import render_prompt
from ranklock.ask.terms import terms

DATA = Path(__file__).parent / "data" / "ask_replay"
REQUESTS = DATA / "requests.json.gz"
#: Each set of captured requests, and the prefix of its answer files.
SETS = {"answers": REQUESTS, "structure": DATA / "structure.json.gz"}
DIM = 384


def _features(text: str) -> Iterable[tuple[str, int]]:
    for t in terms(text):
        yield "w:" + t, 2
        padded = f"#{t}#"
        for i in range(len(padded) - 2):
            yield "c:" + padded[i : i + 3], 1


def _vector(text: str) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float64)
    for feature, weight in _features(text):
        h = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        v[int.from_bytes(h[:4], "little") % DIM] += weight if h[4] & 1 else -weight
    norm = float(np.sqrt(v @ v))
    if norm == 0.0:
        v[0] = 1.0
        return v
    return v / 2.0 ** round(math.log2(norm))  # a power of two: the entries stay exact multiples of it


def standin_embed(texts: Sequence[str]) -> np.ndarray:
    """One row per text: the stand-in vectors (see the module docstring), float32 as the cache's are."""
    return np.stack([_vector(t) for t in texts]).astype(np.float32) if texts else np.zeros((0, DIM), np.float32)


def chunk_key(c: AskChunk) -> str:
    return hashlib.sha256(canonical_json([c.doc_id, c.chunk, c.text, c.date, c.title]).encode("utf-8")).hexdigest()[:16]


def write_requests(path: Path, requests: Sequence[tuple[str, str, str, GenerationRequest]]) -> None:
    """``(set, id, question class, request)`` tuples as the gzipped JSON the test reads (chunks stored once)."""
    chunks: dict[str, list[Any]] = {}
    rows = []
    for set_name, qid, cls, req in requests:
        refs = []
        for c in req.chunks:
            key = chunk_key(c)
            chunks[key] = [c.doc_id, c.chunk, c.text, c.date, c.title]
            refs.append([key, c.rank, c.score])
        rows.append(
            {
                "set": set_name,
                "id": qid,
                "class": cls,
                "question": req.question,
                "language": req.language,
                "chunks": refs,
            }
        )
    body = json.dumps({"chunks": dict(sorted(chunks.items())), "requests": rows}, ensure_ascii=False, sort_keys=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(body.encode("utf-8"), mtime=0))


def read_requests(path: Path = REQUESTS) -> list[tuple[str, GenerationRequest]]:
    """``(set/id, request)`` per captured request, with the stand-in embedder (the set is the collection's name)."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    out = []
    for row in data["requests"]:
        chunks = []
        for n, (key, rank, score) in enumerate(row["chunks"], start=1):
            doc_id, chunk, text, date, title = data["chunks"][key]
            chunks.append(AskChunk(n, doc_id, chunk, rank, score, text, date, title))
        prompt = render_prompt(row["question"], chunks)
        request = GenerationRequest(row["question"], tuple(chunks), prompt, row["language"], standin_embed, row["set"])
        out.append((f"{row['set']}/{row['id']}", request))
    return out


def draft_line(key: str, draft: Draft) -> str:
    """A draft as one canonical JSON line: what a frozen version must give again, byte for byte."""
    line: dict[str, Any] = {
        "request": key,
        "answer": draft.answer,
        "citations": [[c.n, c.quote] for c in draft.citations],
        "abstained": draft.abstained,
    }
    if draft.closest:  # extractive-v6 on: the passages an abstention names as closest
        line["closest"] = [[c.n, c.quote] for c in draft.closest]
    return canonical_json(line)


def answers_path(version: str, prefix: str = "answers") -> Path:
    return DATA / f"{prefix}-{version}.jsonl"


def replay(generator: str, requests: Sequence[tuple[str, GenerationRequest]]) -> list[str]:
    """Every request asked of ``generator`` again: its lines, in request order (its info() first)."""
    gen = resolve_generator(generator)
    return [canonical_json({"info": gen.info().to_dict()}), *(draft_line(k, gen.generate(r)) for k, r in requests)]
