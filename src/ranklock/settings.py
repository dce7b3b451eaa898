"""Settings, declared once: name, default, unit and help.

The CLI, the HTTP API and the docs read these declarations, so a default
lives in exactly one place.  Environment variables use the ``RANKLOCK_``
prefix (``RANKLOCK_HOME``, ``RANKLOCK_DSN``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .home import find_home
from .limits import MAX_K

__all__ = [
    "ASK_DEPTH",
    "ASK_RRF_K",
    "BM25_B",
    "BM25_K1",
    "DEFAULT_EMBEDDER",
    "REQUEST",
    "SNAPSHOT_KEEP",
    "WATCH_MAX_WAIT_MS",
    "WATCH_QUIET_MS",
    "ENV",
    "ChunkerParams",
    "EnvVar",
    "FileLimits",
    "RequestDefaults",
    "SearchParams",
    "Settings",
    "env",
    "human_duration",
    "parse_duration",
    "parse_rate",
    "parse_size",
    "search_param_help",
]

#: The embedder of a collection created without one (``--embedder`` unset).
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"

#: Ask's retrieval: candidates per branch and the RRF constant, fixed whatever the collection's
#: search defaults (so an answer's passages are reproducible).  eval --answers reads them here (its
#: recall@8 must describe the chunks Ask hands over); ranklock.ask, which may import only the
#: foundations, keeps them as ask.retrieve.DEPTH / RRF_K, and tests/test_settings_declared.py
#: checks that the two agree.
ASK_DEPTH = 40
ASK_RRF_K = 60


#: Snapshot retention's default (ranklock.snapshot.retention): each collection keeps its newest 10
#: snapshots, plus the active, previous, pinned and replica-held ones.  Ten: a rollback needs one, an
#: ingest makes one and its merge often another, so ten keep the last few writes of a day undoable and
#: diffable whatever the write rate, at a bounded cost (a snapshot holds its segments' tables).
SNAPSHOT_KEEP = 10

#: ``ranklock ingest FOLDER --watch`` (ranklock.cli.watch) ingests once the folder has been quiet this
#: long, in milliseconds.  An editor's save (a temporary file written, then renamed over the note), a
#: `git checkout` or a folder pasted in arrive as bursts of events a few milliseconds apart, and one
#: snapshot per burst is what a person expects; short enough that a saved note is searchable within
#: about a second.
WATCH_QUIET_MS = 400
#: ... and at the latest this long after a burst's first event, so a folder that never stops changing
#: (a sync client copying thousands of files) is still ingested as it goes.
WATCH_MAX_WAIT_MS = 5000


#: BM25's parameters: a snapshot's statistics are built under them (ranklock.snapshot.lexical_stats)
#: and a search's default is the same pair, so a default search takes the fast BM25 plans, which
#: apply only under the snapshot's own k1 and b (tests/test_bm25.py pins it).
BM25_K1 = 1.2
BM25_B = 0.75


@dataclass(frozen=True)
class RequestDefaults:
    """The defaults of a request's own arguments, for every interface (Engine, AsyncEngine, CLI, HTTP, MCP)."""

    #: Results returned.
    k: int = 10
    #: hybrid (every branch, fused), or one branch: lexical, semantic.
    mode: str = "hybrid"
    #: Ask: the numbered chunks [1]..[N] an answer is drawn from.
    chunks: int = 8


#: The one declaration of the request defaults; signatures read ``REQUEST.k`` and so on.
REQUEST = RequestDefaults()


@dataclass(frozen=True)
class EnvVar:
    """One environment variable ranklock reads: its name, default (``None``: unset) and meaning."""

    name: str
    default: str | None
    meaning: str


#: Every environment variable read anywhere in ``src/ranklock`` (tests/test_settings_env.py
#: greps the source and fails on one missing here).  The README's settings table is generated
#: from this tuple by scripts/gen_cli_docs.py.
ENV: tuple[EnvVar, ...] = (
    EnvVar(
        "RANKLOCK_HOME",
        None,
        "data directory of the embedded PostgreSQL; unset: the nearest `.ranklock` folder in the working folder or "
        "above it, else the per-user `$XDG_DATA_HOME/ranklock` (`~/.local/share/ranklock`); `ranklock db status` "
        "prints which",
    ),
    EnvVar("RANKLOCK_DSN", None, "external PostgreSQL >= 16 with pgvector >= 0.8 instead of the embedded one"),
    EnvVar("RANKLOCK_LOG_QUERIES", "1", "record searches in the query log (`0` turns it off)"),
    EnvVar(
        "RANKLOCK_RESULT_CACHE",
        "0",
        "serve repeated searches of an immutable snapshot from the result cache (`1` turns it on)",
    ),
    EnvVar(
        "RANKLOCK_STATEMENT_TIMEOUT",
        "30s",
        "PostgreSQL cancels a search's statements after this (`QueryTimeout`, HTTP 504); echoed as "
        "`params.statement_timeout_s`",
    ),
    EnvVar(
        "RANKLOCK_POOL_TIMEOUT",
        "5s",
        "longest wait for a pooled connection before the server is checked and restarted/reconnected",
    ),
    EnvVar(
        "RANKLOCK_LOG_RETENTION",
        "30d",
        "entries of the query log and of the answer log older than this are pruned (`0`: any age)",
    ),
    EnvVar(
        "RANKLOCK_LOG_MAX_BYTES",
        "1GB",
        "the query log and the answer log each keep at most this much, newest first (`0`: any size); "
        "retention runs whenever 5% of it has been logged since it last ran",
    ),
    EnvVar(
        "RANKLOCK_LOG_TEXT",
        "full",
        "`full`: the logs keep the query, question and answer texts; `hash`: only their sha256 (replay then "
        "needs the text given again)",
    ),
    EnvVar(
        "RANKLOCK_LOCK_WAIT",
        "300s",
        "how long a writer (ingest, snapshot activate/rollback/drop) waits for another writer of the same "
        "collection before failing ([docs/snapshots.md](docs/snapshots.md#concurrent-writers))",
    ),
    EnvVar(
        "RANKLOCK_PURGE_WAIT",
        "60s",
        "how long a purge waits, in all, for older transactions and replicas to let go of the rows it deleted "
        "before it rewrites their tables; what still holds them then is named and the purge stays unfinished "
        "([docs/reliability.md](docs/reliability.md#purge-an-erasure-erases))",
    ),
    EnvVar(
        "RANKLOCK_READ_DSNS",
        None,
        "streaming replicas (comma-separated DSNs) that serve searches; writes stay on the primary "
        "([docs/scaling.md](docs/scaling.md)). Unset with the embedded server: the local replicas of "
        "`ranklock replica create`",
    ),
    EnvVar(
        "RANKLOCK_REPLICA_WAIT",
        "0.5s",
        "longest a search waits for a replica to replay the primary's position at request start, then another "
        "node serves it",
    ),
    EnvVar(
        "RANKLOCK_EMBED_SERVICE",
        "1",
        "every process of a data directory (a command, a script's `Engine`, `serve`, `mcp`) embeds through its "
        "embedding service: one model in memory, started by the first process that needs it, on a socket in "
        "the data directory, stopped by `ranklock db stop`; the same vectors, bit for bit. `0` (or "
        "`Engine(embed_service=False)`) loads the model in each process",
    ),
    # The idle limits (issue 45, measured on 2026-12-04): the embedding service holds ~550 MB and costs the
    # next vector a model load to come back (~3 s of CPU; 10-30 s wall on a loaded machine); a command
    # service holds ~80 MB and costs one command its imports (~1 s) while it starts again.  30 minutes left
    # ~850 MB behind a few commands.  Commands of one working session come seconds to minutes apart: 10 and
    # 5 minutes keep each warm through one and give the memory back soon after; a server (serve, mcp) holds
    # the model for as long as it runs, whatever the limit.
    EnvVar(
        "RANKLOCK_EMBED_IDLE",
        "10m",
        "the embedding service (~550 MB) exits after this long without a request, unless `serve` or `mcp` holds "
        "it (`0`: never)",
    ),
    EnvVar(
        "RANKLOCK_CLI_SERVICE",
        "1",
        "the quick commands (`search`, `ingest`, `collections`, `document get`, `snapshot list/show/diff/manifest`, "
        "`db status`, `token list`) run in the local command service (a process of the data directory with the "
        "CLI imported, started by the first of them, stopped by `ranklock db stop`; the same output, byte for "
        "byte); `0` runs each command in its own process",
    ),
    EnvVar(
        "RANKLOCK_CLI_IDLE", "5m", "the command service (~80 MB) exits after this long without a command (`0`: never)"
    ),
    EnvVar("RANKLOCK_TRACE", "0", "`1` prints every SQL statement with its timing on stderr"),
    EnvVar(
        "RANKLOCK_MAX_BODY_BYTES",
        "1MB",
        "largest HTTP request body `serve` reads (Content-Length checked, then the body counted as it "
        "streams in); larger: 413",
    ),
    EnvVar(
        "RANKLOCK_MCP_MAX_REPLY",
        "16MB",
        "largest reply `ranklock mcp` writes as one frame; a larger one (a huge document) is replaced by a "
        "JSON-RPC error naming its size, so a client's line buffer is never flooded",
    ),
    EnvVar(
        "RANKLOCK_HEADER_TIMEOUT",
        "10s",
        "a connection to `serve` must send its request line and headers within this, or it is closed (408)",
    ),
    EnvVar(
        "RANKLOCK_BODY_TIMEOUT",
        "30s",
        "a request body must arrive within this after its headers, or the connection is closed (408)",
    ),
    EnvVar(
        "RANKLOCK_MAX_COST",
        "250000",
        "largest `k` x `depth` of one search over HTTP or MCP (single-branch modes: `k` x max(`depth`, `k`)); "
        "larger: 400",
    ),
    EnvVar(
        "RANKLOCK_MAX_FILTER_SIZE",
        "4000",
        "largest filter of one request over HTTP or MCP, in characters (a structured filter: its compact JSON); "
        "larger: 400",
    ),
    EnvVar(
        "RANKLOCK_TOKEN_CONCURRENCY",
        "4",
        "searches and asks one token (or, without tokens, one client address) may run at once over HTTP; more: 429",
    ),
    EnvVar(
        "RANKLOCK_RATE_LIMIT",
        "1200/m",
        "requests one token (or client address) may make over HTTP, as N/s, N/m or N/h (a bucket of N "
        "refilled over the period); more: 429 with Retry-After (`0`: no limit)",
    ),
    EnvVar(
        "RANKLOCK_AUTH_FAIL_LIMIT",
        "20/m",
        "failed authentications (a malformed, unknown or revoked token) one client address may make over HTTP, "
        "as N/s, N/m or N/h; more: 429 with Retry-After, before any token lookup (`0`: no limit)",
    ),
    EnvVar(
        "RANKLOCK_TRUSTED_PROXIES",
        None,
        "addresses of the reverse proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` `serve` believes "
        "(comma-separated IPs or networks); unset: none, the client is the connection's peer, so no local "
        "process can pose as another client",
    ),
    # The size of a document's text (bench/document_size.py, docs/benchmarks.md, issue 48): an ingest holds
    # about 200 bytes per byte of a document's text at its peak, most of it the tokenizer's encoding of the
    # whole text (4 MB of text: 880 MB), so a document of 5 MiB peaks near 1.1 GB, under the 1.5 GB an ingest
    # may take, with the model in the embedding service; and 5 MiB holds any book (the King James Bible is
    # 4.4 MB of text, War and Peace 3.3 MB).  A larger file is refused by its size before it is read.
    EnvVar(
        "RANKLOCK_MAX_DOCUMENT_BYTES",
        "5MiB",
        "largest text of one document, in bytes of UTF-8: a text or Markdown file larger than this is refused by "
        "its size before it is read (an HTML file at 4 times it, for its markup), a PDF or DOCX by the text read "
        "from it, a JSONL record or a `Document` by its text; the file is named as unreadable (`--skip-unreadable` "
        "leaves it out)",
    ),
    EnvVar(
        "RANKLOCK_PDF_MAX_PAGES",
        "2000",
        "largest number of pages of one PDF; a PDF with more is refused before its pages are read",
    ),
    EnvVar(
        "RANKLOCK_PDF_TIMEOUT",
        "60s",
        "longest the text of one PDF may take to extract (in a process of its own, stopped then); longer: the "
        "file is refused as unreadable",
    ),
    EnvVar("RANKLOCK_LLM_URL", None, "OpenAI-compatible endpoint of the `openai` Ask generator"),
    EnvVar("RANKLOCK_LLM_MODEL", None, "model name sent to `RANKLOCK_LLM_URL`"),
    EnvVar("RANKLOCK_LLM_API_KEY", None, "bearer token sent to `RANKLOCK_LLM_URL`"),
    EnvVar(
        "RANKLOCK_RERANKER",
        None,
        "the reranker of `--rerank N`: a saved sentence-transformers CrossEncoder directory, or a `/rerank` "
        "endpoint URL (Text Embeddings Inference, Cohere, Jina)",
    ),
    EnvVar("RANKLOCK_RERANK_API", "tei", "request shape of an HTTP reranker: `tei` or `cohere` (Cohere and Jina)"),
    EnvVar("RANKLOCK_RERANK_MODEL", None, "model name sent to an HTTP reranker (required by the `cohere` shape)"),
    EnvVar("RANKLOCK_RERANK_API_KEY", None, "bearer token sent to an HTTP reranker"),
    EnvVar("RANKLOCK_PLAN_LLM_URL", None, "OpenAI-compatible endpoint of the LLM plan extractor"),
    EnvVar("RANKLOCK_PLAN_LLM_MODEL", None, "model name sent to `RANKLOCK_PLAN_LLM_URL`"),
    EnvVar("RANKLOCK_PLAN_LLM_KEY", None, "bearer token sent to `RANKLOCK_PLAN_LLM_URL`"),
    EnvVar("OPENAI_API_KEY", None, "bearer token of an `openai:` HTTP embedder"),
    EnvVar(
        "RANKLOCK_EMBEDDER_REVISION",
        None,
        "revision recorded in an `openai:` embedder's id (the server's model version; changes the cache key)",
    ),
)
_ENV_BY_NAME = {v.name: v for v in ENV}


def env(name: str) -> str:
    """The value of the declared environment variable ``name``: its setting, else its default (``""`` when none).

    An empty setting counts as unset.  Reading an undeclared name is a programming error.
    """
    decl = _ENV_BY_NAME[name]  # KeyError: declare it in ENV first
    return os.environ.get(name) or decl.default or ""


def search_param_help(name: str) -> str:
    """CLI help for the search parameter ``name``: its description and default, from :class:`SearchParams`."""
    field = SearchParams.model_fields[name]
    default = field.default
    shown = str(default).lower() if isinstance(default, bool) else default
    return f"{(field.description or name).rstrip('.')} (default {shown})."


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_size(text: str | int, *, what: str = "size") -> int:
    """Bytes from ``"1GB"``, ``"500MB"``, ``"64MiB"`` or a plain integer (GB = 10^9, GiB = 2^30).

    >>> parse_size("1GB")
    1000000000
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?\s*", str(text), re.IGNORECASE)
    if m is None:
        from .errors import ConfigError

        raise ConfigError(f"{what} {text!r} is not a size; write bytes or a number with KB, MB, GB, KiB, MiB or GiB.")
    return int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower()])


def parse_duration(text: str | float, *, what: str = "duration") -> float:
    """Seconds from ``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"`` or a plain number of seconds.

    >>> parse_duration("30d")
    2592000.0
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])?\s*", str(text), re.IGNORECASE)
    if m is None:
        from .errors import ConfigError

        raise ConfigError(f"{what} {text!r} is not a duration; write seconds or a number with s, m, h, d or w.")
    return float(m.group(1)) * _DURATION_UNITS[(m.group(2) or "s").lower()]


def human_duration(seconds: float) -> str:
    """The shortest :func:`parse_duration` spelling of ``seconds``: ``30d``, ``12h``, ``90s``.

    >>> human_duration(2592000.0), human_duration(5400.0)
    ('30d', '90m')
    """
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


_RATE_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_rate(text: str, *, what: str = "rate") -> tuple[int, float]:
    """``(requests, period_s)`` from ``"1200/m"``, ``"20/s"``, ``"50000/h"``; ``"0"`` is ``(0, 1.0)``: no limit.

    >>> parse_rate("1200/m")
    (1200, 60.0)
    """
    if text.strip() == "0":
        return 0, 1.0
    m = re.fullmatch(r"\s*(\d+)\s*/\s*([smh])\s*", text, re.IGNORECASE)
    if m is None or int(m.group(1)) < 1:
        from .errors import ConfigError

        raise ConfigError(f"{what} {text!r} is not a rate; write requests per period, e.g. 1200/m, 20/s or 0 (none).")
    return int(m.group(1)), _RATE_PERIODS[m.group(2).lower()]


def _log_text() -> Literal["full", "hash"]:
    text = env("RANKLOCK_LOG_TEXT").strip().lower()
    if text == "full":
        return "full"
    if text == "hash":
        return "hash"
    from .errors import ConfigError

    raise ConfigError(f"RANKLOCK_LOG_TEXT {env('RANKLOCK_LOG_TEXT')!r} is not full or hash; set it to one of them.")


def _env_int(name: str) -> int:
    text = env(name)
    if not text.strip().isdigit():
        from .errors import ConfigError

        raise ConfigError(f"{name} {text!r} is not a whole number; set it to e.g. {_ENV_BY_NAME[name].default}.")
    return int(text)


def _positive(name: str, value: float) -> None:
    if value <= 0:
        from .errors import ConfigError

        raise ConfigError(f"{name} {env(name)!r} must be more than 0; set it to e.g. {_ENV_BY_NAME[name].default}.")


@dataclass(frozen=True)
class FileLimits:
    """What reading one file may cost: the size of a document's text and, for a PDF, its pages and seconds.

    Read from the environment (:meth:`from_env`) where the loaders are called, so the CLI, the
    Engine and a watch all hold a file to the same limits; a test passes its own.

        >>> FileLimits.from_env().max_document_bytes
        5242880
    """

    #: Bytes of one document's text, as UTF-8 (RANKLOCK_MAX_DOCUMENT_BYTES).
    max_document_bytes: int
    #: Pages of one PDF (RANKLOCK_PDF_MAX_PAGES).
    pdf_max_pages: int
    #: Seconds to extract the text of one PDF (RANKLOCK_PDF_TIMEOUT).
    pdf_timeout: float

    @classmethod
    def from_env(cls) -> FileLimits:
        size = parse_size(env("RANKLOCK_MAX_DOCUMENT_BYTES"), what="RANKLOCK_MAX_DOCUMENT_BYTES")
        pages = _env_int("RANKLOCK_PDF_MAX_PAGES")
        seconds = parse_duration(env("RANKLOCK_PDF_TIMEOUT"), what="RANKLOCK_PDF_TIMEOUT")
        for name, value in (("RANKLOCK_MAX_DOCUMENT_BYTES", size), ("RANKLOCK_PDF_MAX_PAGES", pages)):
            _positive(name, value)
        _positive("RANKLOCK_PDF_TIMEOUT", seconds)
        return cls(size, pages, seconds)


class Settings(BaseModel):
    """Where ranklock keeps its data and which database it talks to."""

    home: Path = Field(
        default_factory=lambda: find_home().path,
        description="Data directory for the embedded PostgreSQL and caches (RANKLOCK_HOME; ranklock.home finds it).",
    )
    dsn: str | None = Field(
        default_factory=lambda: env("RANKLOCK_DSN") or None,
        description="DSN of an external PostgreSQL >= 16 with pgvector >= 0.8 (RANKLOCK_DSN). "
        "When unset, ranklock starts its own embedded server in `home`.",
    )
    log_queries: bool = Field(
        default_factory=lambda: env("RANKLOCK_LOG_QUERIES") not in ("0", "false", "no"),
        description="Record every search in the query log (RANKLOCK_LOG_QUERIES=0 turns it off).",
    )
    result_cache: bool = Field(
        default_factory=lambda: env("RANKLOCK_RESULT_CACHE") in ("1", "true", "yes"),
        description="Serve repeated searches of an immutable snapshot from the result cache "
        "(RANKLOCK_RESULT_CACHE=1 turns it on; off by default so latency benchmarks measure real searches).",
    )
    statement_timeout: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_STATEMENT_TIMEOUT"), what="RANKLOCK_STATEMENT_TIMEOUT"),
        gt=0,
        description="Longest a search's statements may run before PostgreSQL cancels them, in seconds "
        "(RANKLOCK_STATEMENT_TIMEOUT, e.g. 30s or 2m). Set per search transaction (SET LOCAL); echoed in "
        "every result's params.",
    )
    pool_timeout: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_POOL_TIMEOUT"), what="RANKLOCK_POOL_TIMEOUT"),
        gt=0,
        description="Longest a request waits for a pooled database connection, in seconds "
        "(RANKLOCK_POOL_TIMEOUT); then the server is checked, restarted (embedded) or reconnected.",
    )
    read_dsns: list[str] = Field(
        default_factory=lambda: [d.strip() for d in env("RANKLOCK_READ_DSNS").split(",") if d.strip()],
        description="DSNs of streaming replicas (hot standbys) of the primary that serve searches "
        "(RANKLOCK_READ_DSNS, comma-separated; `--read-dsn`, repeatable). Writes always go to the primary. "
        "Unset with the embedded server: the local replicas of `ranklock replica create`.",
    )
    replica_wait: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_REPLICA_WAIT"), what="RANKLOCK_REPLICA_WAIT"),
        ge=0,
        description="Longest a search waits for a replica to replay the primary's position at request start, "
        "in seconds (RANKLOCK_REPLICA_WAIT); then another replica or the primary serves it.",
    )
    log_retention: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_LOG_RETENTION"), what="RANKLOCK_LOG_RETENTION"),
        ge=0,
        description="Entries of the query log and the answer log older than this are pruned, in seconds "
        "(RANKLOCK_LOG_RETENTION, e.g. 30d; 0 keeps entries of any age).",
    )
    log_max_bytes: int = Field(
        default_factory=lambda: parse_size(env("RANKLOCK_LOG_MAX_BYTES"), what="RANKLOCK_LOG_MAX_BYTES"),
        ge=0,
        description="The query log and the answer log each keep at most this many bytes of entries, the "
        "newest ones (RANKLOCK_LOG_MAX_BYTES, e.g. 1GB or 500MB; 0 means no size limit).",
    )
    log_text: Literal["full", "hash"] = Field(
        default_factory=_log_text,
        description="What the query log and the answer log keep of the query, question and answer texts "
        "(RANKLOCK_LOG_TEXT): `full` the texts, `hash` only their sha256.",
    )
    trace: bool = Field(
        default_factory=lambda: env("RANKLOCK_TRACE") in ("1", "true", "yes"),
        description="Print every SQL statement with its duration and row count to stderr "
        "(RANKLOCK_TRACE=1; off by default).",
    )
    embed_service: bool = Field(
        default_factory=lambda: env("RANKLOCK_EMBED_SERVICE") not in ("0", "false", "no"),
        description="Every process of a data directory (the `ranklock` command, `Engine()` in a script, `serve`, "
        "`mcp`) embeds through the home's embedding service, which keeps the one model loaded for all of them "
        "(RANKLOCK_EMBED_SERVICE=0, or `Engine(embed_service=False)`: load it in the process itself).",
    )
    embed_idle: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_EMBED_IDLE"), what="RANKLOCK_EMBED_IDLE"),
        ge=0,
        description="The embedding service exits after this many seconds without a request "
        "(RANKLOCK_EMBED_IDLE, e.g. 10m; 0: it runs until `ranklock db stop`) and without a holder (a server).",
    )
    cli_idle: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_CLI_IDLE"), what="RANKLOCK_CLI_IDLE"),
        ge=0,
        description="The command service (ranklock.cli.service) exits after this many seconds without a command "
        "(RANKLOCK_CLI_IDLE, e.g. 5m; 0: it runs until `ranklock db stop`). RANKLOCK_CLI_SERVICE=0 turns the "
        "service off; the entry point reads that one itself, before anything is imported.",
    )
    lock_wait: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_LOCK_WAIT"), what="RANKLOCK_LOCK_WAIT"),
        ge=0,
        description="Longest a writer (ingest, snapshot activate/rollback/drop) waits for another writer of the "
        "same collection before failing, in seconds (RANKLOCK_LOCK_WAIT, e.g. 300 or 5m; 0: do not wait). "
        "Writers of one collection run one at a time.",
    )
    purge_wait: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_PURGE_WAIT"), what="RANKLOCK_PURGE_WAIT"),
        ge=0,
        description="Longest a purge waits, in all, for older transactions and replicas to let go of the rows it "
        "deleted before it rewrites their tables, in seconds (RANKLOCK_PURGE_WAIT, e.g. 60 or 5m); what still holds "
        "them is named, and the purge stays unfinished until it is run again.",
    )
    max_body_bytes: int = Field(
        default_factory=lambda: parse_size(env("RANKLOCK_MAX_BODY_BYTES"), what="RANKLOCK_MAX_BODY_BYTES"),
        ge=1,
        description="Largest HTTP request body `ranklock serve` reads, in bytes (RANKLOCK_MAX_BODY_BYTES).",
    )
    mcp_max_reply: int = Field(
        default_factory=lambda: parse_size(env("RANKLOCK_MCP_MAX_REPLY"), what="RANKLOCK_MCP_MAX_REPLY"),
        ge=1,
        description="Largest reply `ranklock mcp` writes as one frame, in bytes (RANKLOCK_MCP_MAX_REPLY).",
    )
    header_timeout: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_HEADER_TIMEOUT"), what="RANKLOCK_HEADER_TIMEOUT"),
        gt=0,
        description="Seconds a connection has to send its request line and headers (RANKLOCK_HEADER_TIMEOUT).",
    )
    body_timeout: float = Field(
        default_factory=lambda: parse_duration(env("RANKLOCK_BODY_TIMEOUT"), what="RANKLOCK_BODY_TIMEOUT"),
        gt=0,
        description="Seconds a request has to send its body after its headers (RANKLOCK_BODY_TIMEOUT).",
    )
    max_cost: int = Field(
        default_factory=lambda: _env_int("RANKLOCK_MAX_COST"),
        ge=1,
        description="Largest k x depth of one search over HTTP or MCP (RANKLOCK_MAX_COST).",
    )
    max_filter_size: int = Field(
        default_factory=lambda: _env_int("RANKLOCK_MAX_FILTER_SIZE"),
        ge=1,
        description="Largest filter of one HTTP or MCP request, in characters (RANKLOCK_MAX_FILTER_SIZE).",
    )
    token_concurrency: int = Field(
        default_factory=lambda: _env_int("RANKLOCK_TOKEN_CONCURRENCY"),
        ge=1,
        description="Searches and asks one token may run at once over HTTP (RANKLOCK_TOKEN_CONCURRENCY).",
    )
    rate_limit: tuple[int, float] = Field(
        default_factory=lambda: parse_rate(env("RANKLOCK_RATE_LIMIT"), what="RANKLOCK_RATE_LIMIT"),
        description="Requests per period one token may make over HTTP, as (requests, seconds); (0, ...) "
        "is no limit (RANKLOCK_RATE_LIMIT, e.g. 1200/m).",
    )
    auth_fail_limit: tuple[int, float] = Field(
        default_factory=lambda: parse_rate(env("RANKLOCK_AUTH_FAIL_LIMIT"), what="RANKLOCK_AUTH_FAIL_LIMIT"),
        description="Failed authentications per period one client address may make over HTTP, as (failures, "
        "seconds); (0, ...) is no limit (RANKLOCK_AUTH_FAIL_LIMIT, e.g. 20/m).",
    )
    max_document_bytes: int = Field(
        default_factory=lambda: FileLimits.from_env().max_document_bytes,
        ge=1,
        description="Largest text of one document, in bytes of UTF-8 (RANKLOCK_MAX_DOCUMENT_BYTES, e.g. 5MiB); a "
        "larger file is refused as unreadable, by its size before it is read where the format allows.",
    )
    pdf_max_pages: int = Field(
        default_factory=lambda: FileLimits.from_env().pdf_max_pages,
        ge=1,
        description="Largest number of pages of one PDF (RANKLOCK_PDF_MAX_PAGES).",
    )
    pdf_timeout: float = Field(
        default_factory=lambda: FileLimits.from_env().pdf_timeout,
        gt=0,
        description="Longest the text of one PDF may take to extract, in seconds (RANKLOCK_PDF_TIMEOUT, e.g. 60s).",
    )
    trusted_proxies: list[str] = Field(
        default_factory=lambda: [p.strip() for p in env("RANKLOCK_TRUSTED_PROXIES").split(",") if p.strip()],
        description="Reverse proxies whose X-Forwarded-For `serve` believes (RANKLOCK_TRUSTED_PROXIES); none "
        "by default.",
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
    ef_search: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="HNSW candidate list size (hnsw.ef_search); unset: chosen per query from the filter's "
        "selectivity, max(200, ceil(fetched chunks / selectivity)) up to 1000.",
    )
    iterative_scan: Literal["off", "strict_order", "relaxed_order"] = Field(
        "strict_order", description="pgvector iterative index scan mode: off, strict_order or relaxed_order."
    )
    max_scan_tuples: int = Field(20000, ge=1, le=2**31 - 1, description="pgvector hnsw.max_scan_tuples budget.")
    probes: int = Field(10, ge=1, le=32768, description="IVFFlat lists probed (ivfflat.probes).")
    exact_threshold: int = Field(
        20000,
        ge=0,
        le=2**63 - 1,
        description="When the filtered set has at most this many chunks the vector branch scans exactly "
        "(and BM25 scores those chunks rather than the query's postings, when that reads less).",
    )
    exact_fallback: bool = Field(
        True,
        description="When the vector index returns fewer documents than min(depth, matching documents), "
        "rescan the filtered set exactly (true) or return the short result flagged incomplete (false).",
    )
    lexical_ranker: Literal["bm25", "ts_rank_cd"] = Field(
        "bm25", description="Lexical ranking function: bm25 (Okapi BM25, in the database) or ts_rank_cd."
    )
    k1: float = Field(BM25_K1, ge=0, le=1000, description="BM25 term-frequency saturation.")
    b: float = Field(BM25_B, ge=0, le=1, description="BM25 length normalisation, 0..1.")
    query_syntax: Literal["natural", "websearch"] = Field(
        "natural", description="Lexical query syntax: natural (OR of terms) or websearch."
    )
