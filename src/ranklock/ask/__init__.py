"""Ask: grounded, cited answers over a collection.

retrieval (exactly ``search``: hybrid, depth 40, RRF k = 60, one chunk per
document) → the top N chunks numbered [1]..[N] in rank order → a prompt
(versioned, hashed) → a generator → validation (every citation refers to one
of the N chunks) → the answer log.  Retrieval is deterministic and logged;
only generation may vary, and ``replay_answer`` says which layer changed.

This package depends only downward (search results, the database, ingest,
errors, settings); it never imports the Engine.  The Engine hands it a
database handle, the collection record and a search callable.
"""

from __future__ import annotations

from .model import (
    ABSTAIN,
    Answer,
    AskChunk,
    Citation,
    Draft,
    DraftCitation,
    GenerationRequest,
    Generator,
    GeneratorInfo,
    Prompt,
)

__all__ = [
    "ABSTAIN",
    "Answer",
    "AskChunk",
    "Citation",
    "Draft",
    "DraftCitation",
    "GenerationRequest",
    "Generator",
    "GeneratorInfo",
    "Prompt",
]
