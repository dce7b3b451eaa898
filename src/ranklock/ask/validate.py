"""Citation validation: a draft is shown only if everything it cites is one of the chunks it was given.

Rules (each violation raises :class:`~ranklock.errors.CitationError`; the
answer is rejected, logged as rejected, and never shown):

1. Every citation's ``n`` is an integer from 1 to N, the number of chunks given.
2. Every ``[n]`` marker in the answer text is from 1 to N and has a citation.
3. Every quote is non-empty and occurs in passage n's text (compared after
   collapsing whitespace and case-folding); the citation keeps the chunk's
   own words, so a quote shown is always verbatim from the chunk.
4. The answer abstains exactly when its text is :data:`~ranklock.ask.model.ABSTAIN` (or, from
   extractive-v6 on, the sentence that names what was searched), alone or followed by what was
   looked for (:func:`~ranklock.ask.model.is_abstention`); an abstention cites nothing, and any
   other answer cites at least one passage.
5. An abstention may name its closest passages (``closest``), each with a span of it, checked as a
   citation's quote is; an answer names none (it cites).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..errors import CitationError
from .model import ABSTAIN, Answer, AskChunk, Citation, Draft, DraftCitation, GeneratorInfo, Prompt, is_abstention

__all__ = ["MARKER", "cited_answer", "find_quote", "validate_closest", "validate_draft"]

MARKER = re.compile(r"\[(\d+)\]")


def _squash(text: str) -> tuple[str, list[int]]:
    """``text`` with whitespace runs collapsed to one space and case-folded, plus each output char's source offset."""
    out: list[str] = []
    where: list[int] = []
    prev_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if prev_space or not out:
                continue
            out.append(" ")
            where.append(i)
            prev_space = True
            continue
        prev_space = False
        folded = ch.casefold()
        out.extend(folded)
        where.extend([i] * len(folded))
    return "".join(out), where


def find_quote(quote: str, text: str) -> str | None:
    """The span of ``text`` that ``quote`` matches (whitespace- and case-insensitively), verbatim, or None."""
    q, _ = _squash(quote)
    q = q.strip()
    if not q:
        return None
    t, where = _squash(text)
    at = t.find(q)
    if at < 0:
        return None
    return text[where[at] : where[at + len(q) - 1] + 1]


def _passages(n: int) -> str:
    return f"[1]..[{n}]" if n else "none"


def _quoted(c: DraftCitation, chunks: Sequence[AskChunk], what: str) -> Citation:
    """Rules 1 and 3 for one quote of passage ``c.n``: the chunk's own words of it."""
    n_chunks = len(chunks)
    if isinstance(c.n, bool) or not isinstance(c.n, int) or not 1 <= c.n <= n_chunks:
        raise CitationError(
            f"the answer {what} passage [{c.n}] but only passages {_passages(n_chunks)} were given; "
            "the answer was rejected, not shown. Ask again, or use --generator extractive."
        )
    chunk = chunks[c.n - 1]
    found = find_quote(c.quote, chunk.text) if isinstance(c.quote, str) else None
    if found is None:
        raise CitationError(
            f"{'citation' if what == 'cites' else 'closest passage'} [{c.n}] quotes {str(c.quote)[:80]!r}, which is "
            f"not in passage [{c.n}] ({chunk.doc_id}, chunk {chunk.chunk}); the answer was rejected, not shown. "
            "Ask again, or use --generator extractive."
        )
    return Citation(n=c.n, doc_id=chunk.doc_id, chunk=chunk.chunk, quote=found)


def validate_closest(draft: Draft, chunks: Sequence[AskChunk], abstained: bool) -> tuple[Citation, ...]:
    """Rule 5: an abstention's closest passages, each quote the chunk's own words; an answer has none."""
    if draft.closest and not abstained:
        raise CitationError(
            "the answer names closest passages but does not abstain; the answer was rejected. Only an abstention "
            "names the passages that came closest; an answer cites."
        )
    return tuple(_quoted(c, chunks, "names as closest") for c in draft.closest)


def validate_draft(draft: Draft, chunks: Sequence[AskChunk]) -> tuple[str, tuple[Citation, ...], bool]:
    """Check ``draft`` against the ``chunks`` it was given; return ``(answer, citations, abstained)``.

    >>> validate_draft(Draft(ABSTAIN, (), True), [])
    ('The journal does not say.', (), True)
    """
    n_chunks = len(chunks)
    answer = draft.answer.strip()
    abstained = is_abstention(answer)
    if draft.abstained and not abstained:
        raise CitationError(
            f"the generator marked its answer as an abstention but wrote {answer[:80]!r}, not {ABSTAIN!r}; "
            "the answer was rejected. Fix the generator so that it abstains with exactly that sentence."
        )
    citations: list[Citation] = []
    seen: set[tuple[int, str]] = set()
    for c in draft.citations:
        quoted = _quoted(c, chunks, "cites")
        if (c.n, quoted.quote) in seen:
            continue
        seen.add((c.n, quoted.quote))
        citations.append(quoted)
    cited = {c.n for c in citations}
    for m in MARKER.finditer(answer):
        k = int(m.group(1))
        if not 1 <= k <= n_chunks:
            raise CitationError(
                f"the answer text cites [{k}] but only passages {_passages(n_chunks)} were given; "
                "the answer was rejected, not shown. Ask again, or use --generator extractive."
            )
        if k not in cited:
            raise CitationError(
                f"the answer text cites [{k}] without quoting passage [{k}]; the answer was rejected, not shown. "
                "Ask again, or use --generator extractive."
            )
    if abstained and citations:
        raise CitationError(
            f"the answer abstains ({ABSTAIN!r}) yet cites {len(citations)} passage(s); the answer was rejected. "
            "An abstention cites nothing."
        )
    if not abstained and not citations:
        raise CitationError(
            f"the answer {answer[:80]!r} cites no passage; the answer was rejected, not shown. "
            "Every answer must cite the passages it relies on."
        )
    return answer, tuple(citations), abstained


def cited_answer(
    draft: Draft,
    *,
    question: str,
    collection: str,
    chunks: Sequence[AskChunk],
    generator: GeneratorInfo,
    prompt: Prompt,
    snapshot_id: int,
    manifest_hash: str | None,
    query_id: int | None = None,
    rerank: dict[str, Any] | None = None,
) -> Answer:
    """The :class:`Answer` for a validated ``draft``; raises :class:`CitationError` as :func:`validate_draft` does.

    One constructor for the live ask and its replay, so the two cannot drift apart.
    """
    text, citations, abstained = validate_draft(draft, chunks)
    closest = validate_closest(draft, chunks, abstained)
    return Answer(
        question=question,
        collection=collection,
        answer=text,
        citations=citations,
        chunks=tuple(chunks),
        abstained=abstained,
        generator=generator,
        prompt_sha256=prompt.sha256,
        snapshot_id=snapshot_id,
        manifest_hash=manifest_hash,
        query_id=query_id,
        rerank=rerank,
        closest=closest,
    )
