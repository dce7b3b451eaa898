"""The Ask prompt: one versioned template, rendered from the question and the numbered chunks.

``prompt_sha256`` is the sha256 of the canonical JSON of the template version
and the rendered chat messages, so two asks with the same question and the
same retrieved chunks have the same prompt hash whatever the generator, and a
replay can say whether the prompt layer changed.  Any edit to the wording
must bump :data:`TEMPLATE_VERSION`.

The reply format asked for is one JSON object::

    {"answer": "… [1] … [3]", "citations": [{"n": 1, "quote": "words copied from passage 1"}]}

(ranklock.ask.generators.reply parses it; ranklock.ask.validate checks it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .model import ABSTAIN, AskChunk, Prompt, canonical_json

__all__ = ["SYSTEM", "TEMPLATE_VERSION", "render_prompt"]

TEMPLATE_VERSION = "ask-v2"  # v2: each passage says its note's date when it has one

SYSTEM = (
    "You answer questions about a personal journal. Use only the numbered passages you are given. "
    "Reply with one JSON object and nothing else, of the form "
    '{"answer": "...", "citations": [{"n": 1, "quote": "..."}]}. '
    "Write the passage numbers you rely on into the answer as [n]. For each of them add a citation "
    "whose quote copies, word for word, the words of passage n that support the answer. "
    f'If the passages do not answer the question, reply {{"answer": "{ABSTAIN}", "citations": []}}.'
)

USER = "Question: {question}\n\nPassages:\n{passages}"
PASSAGE = "[{n}] ({doc_id}, chunk {chunk}{dated}) {text}"


def render_prompt(question: str, chunks: Sequence[AskChunk]) -> Prompt:
    """The chat messages for ``question`` over ``chunks``, with the template version and their sha256.

    >>> render_prompt("who?", []).version
    'ask-v2'
    """
    passages = "\n\n".join(
        PASSAGE.format(n=c.n, doc_id=c.doc_id, chunk=c.chunk, dated=f", dated {c.date}" if c.date else "", text=c.text)
        for c in chunks
    )
    messages = (
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER.format(question=question, passages=passages or "(none)")},
    )
    digest = hashlib.sha256(
        canonical_json({"version": TEMPLATE_VERSION, "messages": list(messages)}).encode("utf-8")
    ).hexdigest()
    return Prompt(version=TEMPLATE_VERSION, messages=messages, sha256=digest)
