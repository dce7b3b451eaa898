"""One ask: retrieve → number [1]..[N] → prompt → generate → validate → log.

Retrieval is exactly ``search``: hybrid, depth :data:`DEPTH` candidates per
branch, RRF k = :data:`RRF_K`, one chunk per document, the collection's filter
and ``as_of`` pushed into both branches.  The top N hits become passages
[1]..[N] in rank order, so the ties the search broke (doc_id, then chunk) fix
the numbering too.  Only the generator may vary; everything before it is
deterministic and logged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import GenerationError, QueryError
from .generators import resolve_generator
from .model import Answer, AskChunk, GenerationRequest, Generator
from .prompt import render_prompt
from .validate import validate_draft

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..search.results import Hit, SearchResult
    from ..store.database import Database

__all__ = ["DEFAULT_CHUNKS", "DEPTH", "MAX_CHUNKS", "RRF_K", "SearchFn", "ask", "number_chunks", "retrieve"]

DEPTH = 40
RRF_K = 60
DEFAULT_CHUNKS = 8
MAX_CHUNKS = DEPTH  # more passages than one branch's candidates would not be "the top of the fusion"

#: ``Engine.search``: (collection, query, *, k, mode, filter, snapshot, as_of, **params) -> SearchResult.
SearchFn = Callable[..., "SearchResult"]


def retrieve(
    search: SearchFn,
    collection: str,
    question: str,
    *,
    filter: Any,
    as_of: datetime | str | None,
    snapshot: int | None,
    chunks: int,
    mode: str = "hybrid",
) -> SearchResult:
    """The search an ask runs: hybrid, depth 40, RRF k = 60, top ``chunks`` documents.

    ``mode`` exists for replay only: an evaluation that ran Ask over another
    retrieval mode (``eval --answers``) logged it, and its replay must use it.
    """
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 1 <= chunks <= MAX_CHUNKS:
        raise QueryError(f"chunks must be an integer from 1 to {MAX_CHUNKS}, got {chunks!r}; the default is 8.")
    return search(
        collection,
        question,
        k=chunks,
        mode=mode,
        filter=filter,
        snapshot=snapshot,
        as_of=as_of,
        depth=DEPTH,
        rrf_k=RRF_K,
    )


def number_chunks(hits: Sequence[Hit]) -> tuple[AskChunk, ...]:
    """Hits in rank order as passages [1]..[N]."""
    return tuple(
        AskChunk(n=i, doc_id=h.doc_id, chunk=h.chunk, rank=h.rank, score=h.score, text=h.text)
        for i, h in enumerate(hits, start=1)
    )


def ask(
    db: Database,
    coll: CollectionInfo,
    search: SearchFn,
    question: str,
    *,
    filter: Any = None,
    as_of: datetime | str | None = None,
    snapshot: int | None = None,
    chunks: int = DEFAULT_CHUNKS,
    generator: str | Generator = "extractive",
    log: bool = True,
) -> Answer:
    """Answer ``question`` over ``coll`` with citations into the retrieved chunks.

    A draft that cites anything but the chunks it was given raises
    :class:`~ranklock.errors.CitationError` (and is logged as rejected when
    ``log``); it is never returned.
    """
    if not isinstance(question, str) or not question.strip():
        raise QueryError("the question is empty; pass the question to answer.")
    gen = resolve_generator(generator)  # before retrieval: a misconfigured generator costs no search
    res = retrieve(search, coll.name, question, filter=filter, as_of=as_of, snapshot=snapshot, chunks=chunks)
    numbered = number_chunks(res.hits)
    prompt = render_prompt(question, numbered)
    info = gen.info()
    # res.mode, not "hybrid": a caller may hand in a search that runs another mode (eval --answers compares them).
    request = {
        "question": question,
        "filter": res.filter,
        "as_of": res.as_of,
        "snapshot": snapshot,
        "chunks": chunks,
        "mode": res.mode,
    }
    from .log import log_answer, log_rejected

    draft = None
    try:
        draft = gen.generate(GenerationRequest(question, numbered, prompt, coll.language))
        text, citations, abstained = validate_draft(draft, numbered)
    except GenerationError as exc:
        if log:
            log_rejected(
                db, coll.name, res, request, numbered, prompt, info, error=str(exc), raw=draft.raw if draft else None
            )
        raise
    answer = Answer(
        question=question,
        collection=coll.name,
        answer=text,
        citations=citations,
        chunks=numbered,
        abstained=abstained,
        generator=info,
        prompt_sha256=prompt.sha256,
        snapshot_id=res.snapshot.id,
        manifest_hash=res.snapshot.manifest_hash,
        query_id=res.query_id,
    )
    if not log:
        return answer
    log_id = log_answer(db, answer, res, request, prompt, raw=draft.raw)
    return replace(answer, log_id=log_id)
