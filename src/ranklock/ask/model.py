"""The shapes of Ask: numbered chunks, citations, the generator record and the answer.

:class:`Answer` serialises to one stable JSON object (same input, same bytes)::

    {"question", "collection", "answer",
     "citations": [{"n", "doc_id", "chunk", "quote"}], ["closest": [{"n", "doc_id", "chunk", "quote"}],]
     "chunks": [{"n", "doc_id", "chunk", "rank", "score", "text", "date"}],
     "abstained", "generator": {"name", "model", "checksum", "params"},
     "prompt_sha256", "snapshot": {"id", "manifest_hash"}, ["rerank",] "answer_id"}

``answer_id`` is content-addressed: the first 16 hex digits of the sha256 of
that object without ``answer_id``.  Asking the same question of the same
snapshot with a deterministic generator therefore gives the same id and the
same bytes; the answer log keeps one row per ask under that id.

A generator is anything with the :class:`Generator` protocol: it gets a
:class:`GenerationRequest` (the question, the numbered chunks, the rendered
prompt) and returns a :class:`Draft`.  A draft is never shown as it is: it is
validated first (ranklock.ask.validate), and a draft citing anything but the
chunks it was given is rejected.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ABSTAIN",
    "NOUNS",
    "Answer",
    "AskChunk",
    "Citation",
    "Draft",
    "DraftCitation",
    "EmbedFn",
    "abstention_opener",
    "is_abstention",
    "GenerationRequest",
    "Generator",
    "GeneratorInfo",
    "Prompt",
    "canonical_json",
]

#: How an abstention begins: the chunks do not answer the question.  A generator may say after it
#: what it looked for (ranklock.ask.abstention); extractive-v2 and v3 say this sentence alone.  From
#: extractive-v6 on an abstention names what was searched instead (:func:`abstention_opener`).
ABSTAIN = "The journal does not say."

#: What an extractive-v6 abstention calls the documents searched, by the files they came from.
NOUNS = {".md": "notes", ".markdown": "notes", ".html": "pages", ".htm": "pages"}
_OPENER = re.compile(r"The (?:notes|pages|documents)(?: in “[a-z][a-z0-9_]{0,62}”)? do not say\.")


def abstention_opener(doc_ids: Sequence[str], collection: str) -> str:
    """The sentence an extractive-v6 abstention begins with: what was searched, in the collection's words.

    Its documents are *notes* when they are all Markdown files, *pages* when all HTML pages, else
    *documents*; and the collection is named as its owner named it.

    >>> abstention_opener(["daily/2026-01-05.md", "Garden.md"], "vault")
    'The notes in “vault” do not say.'
    >>> abstention_opener(["ls.1.txt"], "manpages"), abstention_opener([], "")
    ('The documents in “manpages” do not say.', 'The documents do not say.')
    """
    kinds = {NOUNS.get(d[d.rfind(".") :].lower(), "documents") if "." in d else "documents" for d in doc_ids}
    noun = kinds.pop() if len(kinds) == 1 else "documents"
    where = f" in “{collection}”" if collection else ""
    return f"The {noun}{where} do not say."


def is_abstention(answer: str) -> bool:
    """Whether an answer text abstains: it is :data:`ABSTAIN` or a v6 opener, alone or followed by a space.

    >>> is_abstention("The journal does not say."), is_abstention("The journal does not say. Looked for…")
    (True, True)
    >>> is_abstention("The notes in “vault” do not say. Looked for…"), is_abstention("The notes say so.")
    (True, False)
    """
    text = answer.strip()
    if text == ABSTAIN or text.startswith(ABSTAIN + " "):
        return True
    m = _OPENER.match(text)
    return m is not None and (m.end() == len(text) or text[m.end()] == " ")


def canonical_json(obj: Any) -> str:
    """Compact JSON with keys in the order given and non-ASCII kept: the bytes Ask hashes and prints."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class AskChunk:
    """One retrieved chunk handed to a generator as passage ``[n]`` (n counts from 1, in rank order)."""

    n: int
    doc_id: str
    chunk: int
    rank: int
    score: float
    text: str
    #: The note's date (its first date or timestamp field, else its effective_from), ISO text; None: undated.
    date: str | None = None
    #: The note's title when this chunk begins with it ("title, blank line, body": ranklock.ingest.chunker), else
    #: None.  A title says what a note is about, never what it answers; not part of the answer JSON.
    title: str | None = None

    def title_end(self) -> int:
        """Where the title this chunk begins with ends (0: it begins with none)."""
        return len(self.title) if self.title and self.text.startswith(self.title + "\n\n") else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "doc_id": self.doc_id,
            "chunk": self.chunk,
            "rank": self.rank,
            "score": self.score,
            "text": self.text,
            "date": self.date,
        }


@dataclass(frozen=True)
class Citation:
    """Passage ``[n]`` supports the answer with ``quote``, a verbatim span of that chunk's text."""

    n: int
    doc_id: str
    chunk: int
    quote: str

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "doc_id": self.doc_id, "chunk": self.chunk, "quote": self.quote}


@dataclass(frozen=True)
class GeneratorInfo:
    """What produced an answer: enough to say whether a replay ran the same generator."""

    name: str
    model: str | None
    checksum: str | None
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "checksum": self.checksum, "params": dict(self.params)}


@dataclass(frozen=True)
class Prompt:
    """The rendered prompt: chat messages, the template version, and the sha256 of both."""

    version: str
    messages: tuple[dict[str, str], ...]
    sha256: str


#: Texts -> one L2-normalised row each, under the collection's pinned embedder, through the embedding cache.
EmbedFn = Callable[[Sequence[str]], "npt.NDArray[np.float32]"]


@dataclass(frozen=True)
class GenerationRequest:
    """Everything a generator may read: the question, the numbered chunks and the prompt.

    ``embed`` (set by the ask runner) gives vectors of any texts under the collection's
    embedder, read from or written to the embedding cache; a generator never sees the database.
    """

    question: str
    chunks: tuple[AskChunk, ...]
    prompt: Prompt
    language: str = "english"  # the collection's text-search language
    embed: EmbedFn | None = None
    #: The collection's name, which an abstention names (extractive-v6); "" when not known.
    collection: str = ""


@dataclass(frozen=True)
class DraftCitation:
    """A citation as a generator wrote it: a passage number and a quote (validated later)."""

    n: int
    quote: str


@dataclass(frozen=True)
class Draft:
    """A generator's unvalidated answer; ``raw`` is the model's reply as received, for error reports."""

    answer: str
    citations: tuple[DraftCitation, ...]
    abstained: bool
    raw: str | None = None
    #: An abstention's closest passages, each with the span that came closest (extractive-v6): not citations.
    closest: tuple[DraftCitation, ...] = ()


@runtime_checkable
class Generator(Protocol):
    """One way to turn numbered chunks into a cited answer.

    ``info`` is recorded with every answer; ``generate`` must not touch the
    database and must cite only the chunks of the request.
    """

    name: str

    def info(self) -> GeneratorInfo: ...

    def generate(self, request: GenerationRequest) -> Draft: ...


@dataclass(frozen=True)
class Answer:
    """A validated, cited answer.  ``to_json()`` is the stable object of ``ranklock ask --json``."""

    question: str
    collection: str
    answer: str
    citations: tuple[Citation, ...]
    chunks: tuple[AskChunk, ...]
    abstained: bool
    generator: GeneratorInfo
    prompt_sha256: str
    snapshot_id: int
    manifest_hash: str | None
    #: The rerank record of a reranked ask (reranker, N, order; ranklock.search.rerank), else None.
    rerank: dict[str, Any] | None = None
    #: An abstention's closest passages and the span of each that came closest (extractive-v6), else empty.
    closest: tuple[Citation, ...] = ()
    #: The search's query-log entry (None when query logging is off); not part of the JSON.
    query_id: int | None = None
    #: The answer-log row of this ask (None when logging is off); not part of the JSON.
    log_id: int | None = None

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "question": self.question,
            "collection": self.collection,
            "answer": self.answer,
            "citations": [c.to_dict() for c in self.citations],
        }
        if self.closest:
            body["closest"] = [c.to_dict() for c in self.closest]  # only an abstention that has them: others as before
        body |= {
            "chunks": [c.to_dict() for c in self.chunks],
            "abstained": self.abstained,
            "generator": self.generator.to_dict(),
            "prompt_sha256": self.prompt_sha256,
            "snapshot": {"id": self.snapshot_id, "manifest_hash": self.manifest_hash},
        }
        if self.rerank is not None:
            body["rerank"] = self.rerank  # only a reranked answer has the key: every other keeps its shape
        return body

    @property
    def answer_id(self) -> str:
        """First 16 hex digits of the sha256 of the canonical JSON without the id."""
        return hashlib.sha256(canonical_json(self._body()).encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The issue's JSON shape, keys in that order."""
        return {**self._body(), "answer_id": self.answer_id}

    def to_json(self, *, indent: int | None = None) -> str:
        """Canonical JSON: the same answer always gives the same bytes."""
        if indent is None:
            return canonical_json(self.to_dict())
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, allow_nan=False)
