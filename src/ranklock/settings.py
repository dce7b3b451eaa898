"""Settings, declared once: name, default, unit and help.

The CLI, the HTTP API and the docs read these declarations, so a default
lives in exactly one place.  Environment variables use the ``RANKLOCK_``
prefix (``RANKLOCK_HOME``, ``RANKLOCK_DSN``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .limits import MAX_K

__all__ = ["SearchParams", "Settings", "ChunkerParams"]


class Settings(BaseModel):
    """Where ranklock keeps its data and which database it talks to."""

    home: Path = Field(
        default_factory=lambda: Path(os.environ.get("RANKLOCK_HOME", ".ranklock")),
        description="Data directory for the embedded PostgreSQL and caches (RANKLOCK_HOME).",
    )
    dsn: str | None = Field(
        default_factory=lambda: os.environ.get("RANKLOCK_DSN") or None,
        description="DSN of an external PostgreSQL >= 16 with pgvector >= 0.8 (RANKLOCK_DSN). "
        "When unset, ranklock starts its own embedded server in `home`.",
    )
    log_queries: bool = Field(
        default_factory=lambda: os.environ.get("RANKLOCK_LOG_QUERIES", "1") not in ("0", "false", "no"),
        description="Record every search in the query log (RANKLOCK_LOG_QUERIES=0 turns it off).",
    )
    result_cache: bool = Field(
        default_factory=lambda: os.environ.get("RANKLOCK_RESULT_CACHE", "0") in ("1", "true", "yes"),
        description="Serve repeated searches of an immutable snapshot from the result cache "
        "(RANKLOCK_RESULT_CACHE=1 turns it on; off by default so latency benchmarks measure real searches).",
    )


class ChunkerParams(BaseModel):
    """How documents are cut into chunks; recorded in every manifest."""

    window: int = Field(256, ge=16, le=8192, description="Chunk length in embedder tokens.")
    overlap: int = Field(32, ge=0, description="Tokens shared by consecutive chunks.")

    def model_post_init(self, __context: object) -> None:
        if self.overlap >= self.window:
            from .errors import ConfigError

            raise ConfigError(
                f"chunk overlap {self.overlap} must be smaller than the window {self.window}; "
                "lower --overlap or raise --window."
            )


class SearchParams(BaseModel):
    """Every knob that shapes a search result.  All of them are echoed in the response.

    Strict: an unknown key (``ef_serach``), a value of the wrong type (``depth=True``,
    ``depth="40"``) or a non-finite number is an error, never silently ignored or coerced.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    depth: int = Field(40, ge=1, le=MAX_K, description="Candidates each branch contributes to fusion.")
    rrf_k: int = Field(
        60, ge=1, le=1_000_000, description="Reciprocal Rank Fusion constant: score = sum 1/(rrf_k + rank)."
    )
    ef_search: int = Field(100, ge=1, le=1000, description="HNSW candidate list size (hnsw.ef_search).")
    iterative_scan: Literal["off", "strict_order", "relaxed_order"] = Field(
        "strict_order", description="pgvector iterative index scan mode: off, strict_order or relaxed_order."
    )
    max_scan_tuples: int = Field(20000, ge=1, le=2**31 - 1, description="pgvector hnsw.max_scan_tuples budget.")
    probes: int = Field(10, ge=1, le=32768, description="IVFFlat lists probed (ivfflat.probes).")
    exact_threshold: int = Field(
        20000,
        ge=0,
        le=2**63 - 1,
        description="When the filtered set has at most this many chunks the vector branch scans exactly.",
    )
    exact_fallback: bool = Field(
        True,
        description="When the vector index returns fewer documents than min(depth, matching documents), "
        "rescan the filtered set exactly (true) or return the short result flagged incomplete (false).",
    )
    lexical_ranker: Literal["bm25", "ts_rank_cd"] = Field(
        "bm25", description="Lexical ranking function: bm25 (Okapi BM25, in the database) or ts_rank_cd."
    )
    k1: float = Field(1.2, ge=0, le=1000, description="BM25 term-frequency saturation.")
    b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation.")
    query_syntax: Literal["natural", "websearch"] = Field(
        "natural", description="Lexical query syntax: natural (OR of terms) or websearch."
    )
