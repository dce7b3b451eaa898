"""One ask: retrieve → number [1]..[N] → prompt → generate → validate → log.

Retrieval is exactly ``search``: hybrid, depth :data:`DEPTH` candidates per
branch, RRF k = :data:`RRF_K`, one chunk per document, the collection's filter
and ``as_of`` pushed into both branches.  The top N hits become passages
[1]..[N] in rank order, so the ties the search broke (doc_id, then chunk) fix
the numbering too.  Only the generator may vary; everything before it is
deterministic and logged.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import GenerationError, QueryError
from ..settings import REQUEST
from .generators import resolve_generator
from .log import LogPolicy, log_answer, log_rejected
from .model import Answer, GenerationRequest, Generator
from .prompt import render_prompt

# The retrieval half lives in .retrieve (ask/log.py's replay needs it too, and must not import this module).
from .retrieve import DEPTH, MAX_CHUNKS, RRF_K, SearchFn, embed_fn, number_chunks, passages, retrieve
from .validate import cited_answer

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..collection import CollectionInfo
    from ..embed.base import Embedder
    from ..store.database import Database

__all__ = ["DEPTH", "MAX_CHUNKS", "RRF_K", "SearchFn", "ask", "number_chunks", "retrieve"]


def ask(
    db: Database,
    coll: CollectionInfo,
    search: SearchFn,
    question: str,
    *,
    filter: Any = None,
    as_of: datetime | str | None = None,
    snapshot: int | None = None,
    chunks: int = REQUEST.chunks,
    generator: str | Generator = "extractive",
    log: bool = True,
    mode: str = REQUEST.mode,
    embedder: Callable[[], Embedder] | None = None,
    rerank: int | None = None,
    log_policy: LogPolicy = LogPolicy(),
) -> Answer:
    """Answer ``question`` over ``coll`` with citations into the retrieved chunks.

    A draft that cites anything but the chunks it was given raises
    :class:`~ranklock.errors.CitationError` (and is logged as rejected when
    ``log``); it is never returned.  ``mode`` is for evaluation only (``eval --answers``
    compares Ask over each retrieval mode); an ask is hybrid.  ``embedder`` returns the
    collection's embedder (checked against its weights), for generators that score by meaning;
    it is called only when a text's vector is not cached yet.
    """
    if not isinstance(question, str) or not question.strip():
        raise QueryError("the question is empty; pass the question to answer.")
    gen = resolve_generator(generator)  # before retrieval: a misconfigured generator costs no search
    res = retrieve(
        search,
        coll.name,
        question,
        filter=filter,
        as_of=as_of,
        snapshot=snapshot,
        chunks=chunks,
        mode=mode,
        rerank=rerank,
    )
    numbered = passages(db, coll, res)
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
    if rerank is not None:
        request["rerank"] = rerank  # only when given: the request of an ask without it is as before
    draft = None
    try:
        draft = gen.generate(
            GenerationRequest(question, numbered, prompt, coll.language, embed_fn(db, coll, embedder), coll.name)
        )
        answer = cited_answer(
            draft,
            question=question,
            collection=coll.name,
            chunks=numbered,
            generator=info,
            prompt=prompt,
            snapshot_id=res.snapshot.id,
            manifest_hash=res.snapshot.manifest_hash,
            query_id=res.query_id,
            rerank=res.params.get("rerank"),
        )
    except GenerationError as exc:
        if log:
            log_rejected(
                db,
                coll.name,
                res,
                request,
                numbered,
                prompt,
                info,
                error=str(exc),
                raw=draft.raw if draft else None,
                policy=log_policy,
            )
        raise
    if not log:
        return answer
    log_id = log_answer(db, answer, res, request, prompt, raw=draft.raw, policy=log_policy)
    return replace(answer, log_id=log_id)
