"""What the HTTP API answers: every route's response body as a model, with an example, and the errors each
route really returns, for the OpenAPI document (``/openapi.json``, the ``/docs`` page) and docs/http.md.

The routes send the engine's own JSON (``SearchResult.to_json``, ``Answer.to_json``: the bytes the CLI
prints), so these models describe a body and are never on its way out.  They are held to what the routes
send: tests/test_http_schema.py validates real responses against them (``extra="forbid"``: no key more,
none missing) and sends every request example to the server.  The request bodies are ranklock.api's
models, the ones the routes and the MCP tools validate with.

Errors are one shape, ``{"error": {"type", "message"}}`` (:class:`ErrorBody`), with the status the
error's class declares (ranklock.errors); :func:`errors` documents those a route can answer with, each
with the types that come with it.  No route answers 422: a body that does not fit is a 400
(ranklock.http.app), so :func:`describe` removes FastAPI's generated 422 from every route.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from .. import errors as _errors
from ..search.branches import registry
from ..snapshot.collection_drop import CollectionDrop
from ..snapshot.info import SnapshotInfo
from ..store.collections import CollectionSummary

__all__ = [
    "AnswerBody",
    "CollectionBody",
    "CollectionsBody",
    "DropBody",
    "ErrorBody",
    "ReadyBody",
    "SearchBody",
    "StatusBody",
    "describe",
    "errors",
    "search_query_parameters",
]

_STRICT = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    model_config = _STRICT

    type: str = Field(description="The error's class in ranklock's error tree (InputError, NotFound, ...).")
    message: str = Field(description="What is wrong, naming the bad value, and how to fix it.")


class ErrorBody(BaseModel):
    """Every error the server answers, whatever its status."""

    model_config = _STRICT

    error: ErrorDetail


class StatusBody(BaseModel):
    model_config = _STRICT

    status: Literal["ok"]


class ReadyBody(BaseModel):
    """``/readyz``: ``status`` alone for a probe without a token; the parts with one (or on loopback)."""

    model_config = _STRICT

    status: Literal["ready", "not_ready"]
    database: dict[str, Any] | None = Field(None, description="ok, ms (a round trip), recoveries.")
    collections: list[dict[str, Any]] | None = Field(None, description="Each collection's active snapshot, readable?")
    models: dict[str, Any] | None = Field(None, description="The model load: state (not started, loading, loaded).")


def _body_of(record: type, name: str) -> type[BaseModel]:
    """A strict model of a record whose JSON is its fields (its ``as_dict``): the schema follows the record."""
    hints = typing.get_type_hints(record)
    fields: dict[str, Any] = {f.name: (hints[f.name], ...) for f in dataclasses.fields(record)}
    return create_model(name, __config__=_STRICT, __doc__=record.__doc__, **fields)


CollectionSummaryBody = _body_of(CollectionSummary, "CollectionSummaryBody")
SnapshotBody = _body_of(SnapshotInfo, "SnapshotBody")
DropBody = _body_of(CollectionDrop, "DropBody")


class CollectionsBody(BaseModel):
    model_config = _STRICT

    collections: list[CollectionSummaryBody]  # type: ignore[valid-type]


class FieldBody(BaseModel):
    model_config = _STRICT

    name: str
    type: str = Field(description="int, float, bool, keyword, keyword[], date or timestamp.")
    required: bool


class CollectionBody(BaseModel):
    """One collection for the page: its typed fields (the filter box) and its snapshots."""

    model_config = _STRICT

    name: str
    language: str
    embedder_id: str
    index_kind: str
    fields: list[FieldBody]
    active_snapshot_id: int | None
    snapshots: list[SnapshotBody]  # type: ignore[valid-type]


def _hit_model() -> type[BaseModel]:
    """A hit's JSON: each branch of the registry adds its rank and raw score under the keys it names."""
    branch_keys: dict[str, Any] = {}
    for kind in registry():
        branch_keys[kind.signal.rank_key] = (
            int | None,
            Field(description=f"The {kind.name} branch's rank (null: not in its top candidates)."),
        )
        branch_keys[kind.signal.raw_key] = (
            float | None,
            Field(description=f"The {kind.name} branch's raw score ({kind.signal.raw_name})."),
        )
    return create_model(
        "HitBody",
        __config__=_STRICT,
        rank=(int, Field(description="Rank in the whole list, from 1 (a later page goes on from its offset).")),
        doc_id=(str, ...),
        chunk=(int, Field(description="The chunk's number in its document, from 0.")),
        score=(float, Field(description="Fused RRF score: sum over branches of 1/(rrf_k + rank).")),
        **branch_keys,
        char_start=(int, ...),
        char_end=(int, ...),
        text=(str, ...),
        tie_group=(
            int | None,
            Field(description="Hits of one tie group have identical signals; their order carries no meaning."),
        ),
    )


HitBody = _hit_model()


class SnapshotRefBody(BaseModel):
    model_config = _STRICT

    id: int
    manifest_hash: str | None
    segments: list[int]


class SearchBody(BaseModel):
    """A search result: the engine's canonical JSON, as ``ranklock search --json --timings`` prints it."""

    model_config = _STRICT

    query: str
    collection: str
    mode: str
    k: int
    hits: list[HitBody]  # type: ignore[valid-type]
    params: dict[str, Any] = Field(description="Every parameter that shaped the result, echoed.")
    snapshot: SnapshotRefBody
    filter: Any = Field(description="The filter as given (an expression or the structured form), or null.")
    as_of: str | None
    matching_count: int | None = Field(
        description="Documents the hard constraints admit (all of them without a filter)."
    )
    complete: bool | None = Field(
        description="Whether nothing was cut short: false says the result may hold fewer hits than exist."
    )
    truncation: str | None
    warnings: list[str]
    query_id: int | None = Field(description="Its query-log id: `ranklock replay ID` runs it again.")
    timings: dict[str, float]
    served_by: str = Field(description="primary, or the read replica (host:port) that ran it.")
    offset: int | None = Field(None, description="Present on a later page only: the results skipped.")


class CitationBody(BaseModel):
    model_config = _STRICT

    n: int
    doc_id: str
    chunk: int
    quote: str


class AskChunkBody(BaseModel):
    model_config = _STRICT

    n: int
    doc_id: str
    chunk: int
    rank: int
    score: float
    text: str
    date: str | None


class GeneratorBody(BaseModel):
    model_config = _STRICT

    name: str
    model: str | None
    checksum: str | None
    params: dict[str, Any]


class AnswerSnapshotBody(BaseModel):
    model_config = _STRICT

    id: int
    manifest_hash: str | None


class AnswerBody(BaseModel):
    """An answer: the bytes of ``ranklock ask --json``; every [n] of ``answer`` is one of ``chunks``."""

    model_config = _STRICT

    question: str
    collection: str
    answer: str
    citations: list[CitationBody]
    chunks: list[AskChunkBody]
    abstained: bool
    generator: GeneratorBody
    prompt_sha256: str
    snapshot: AnswerSnapshotBody
    rerank: dict[str, Any] | None = Field(None, description="Present on a reranked answer only.")
    answer_id: str = Field(description="`ranklock replay --answer ID` replays it.")


# -- errors -------------------------------------------------------------------------------------

#: Why each status is answered, in a sentence.
WHY = {
    400: "The request does not fit: an unknown key, a value of the wrong type or out of range, a bad filter, a search "
    "over RANKLOCK_MAX_COST; the message names it and the fix.",
    401: "A token is needed (a server beyond loopback) and none was sent, or it is malformed, unknown or revoked.",
    403: "The token lacks the scope this needs: read for every route, admin to drop, paid-generator for a billed "
    "generator.",
    404: "No such collection, snapshot or document; the message names the ones there are.",
    408: "The body did not arrive within RANKLOCK_BODY_TIMEOUT; the connection is closed.",
    409: "The collection cannot be read as asked: its embedder's weights are not the ones loaded, or its snapshot is "
    "not ready.",
    413: "The body is over RANKLOCK_MAX_BODY_BYTES; the connection is closed.",
    421: "The Host header is not one this server answers to (DNS rebinding; --allow-host adds names).",
    429: "Over the token's rate (RANKLOCK_RATE_LIMIT, with Retry-After) or its searches at once "
    "(RANKLOCK_TOKEN_CONCURRENCY), or too many failed authentications.",
    502: "The generator or the reranker failed (an endpoint down, a reply not in the asked format).",
    503: "The database cannot be reached or is out of resources; ranklock retries on every request.",
    504: "The search ran past RANKLOCK_STATEMENT_TIMEOUT.",
}


def _types_by_status() -> dict[int, list[str]]:
    """The error types of each status, from the error tree (ranklock.errors)."""
    out: dict[int, set[str]] = {}
    todo: list[type[_errors.RanklockError]] = [_errors.RanklockError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls is not _errors.RanklockError:
            out.setdefault(cls.http_status, set()).add(cls.__name__)
    return {status: sorted(names) for status, names in out.items()}


_TYPES = _types_by_status()


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route for these error statuses: the one error body, why, and its types."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in sorted(statuses):
        types = _TYPES.get(status, [])
        example = {"error": {"type": types[0] if types else "HTTPError", "message": WHY[status]}}
        out[status] = {
            "model": ErrorBody,
            "description": f"{WHY[status]} Types: {', '.join(types)}." if types else WHY[status],
            "content": {"application/json": {"example": example}},
        }
    return out


#: What every route may answer before it runs (ranklock.http.guard): a Host it does not answer to, a bad
#: Content-Length, a body too large or too slow; routes that need a token: none or an unknown one, a missing
#: scope, the rate limit.
GUARDED = (400, 408, 413, 421)
WITH_TOKEN = (*GUARDED, 401, 403, 429)


def ok(model: type[BaseModel], example: dict[str, Any], description: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entry of a route's 200: its body's model and an example."""
    return {200: {"model": model, "description": description, "content": {"application/json": {"example": example}}}}


def search_query_parameters() -> list[dict[str, Any]]:
    """``GET /api/search``'s query parameters, from ranklock.api.SearchQuery (the route reads them itself)."""
    from ..api import SearchQuery

    schema = SearchQuery.model_json_schema()
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema["properties"].items()
    ]


def describe(spec: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document FastAPI made, less what the server never answers: its generated 422 (a request
    that does not fit is a 400), the schemas only that 422 used, and an HTML error."""
    for ops in spec.get("paths", {}).values():
        for op in ops.values():
            responses = op.get("responses", {})
            responses.pop("422", None)
            for status, resp in responses.items():
                # An error is JSON on every route: FastAPI files its model under the route's own media type
                # (the page's text/html).
                html = resp.get("content", {}).pop("text/html", None) if status != "200" else None
                if html is not None:
                    resp["content"].setdefault("application/json", {}).setdefault("schema", html.get("schema"))
    schemas = spec.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return spec


# -- examples: bodies the routes answer for the README's `docs` collection (examples/corpus.jsonl) --------


def _hit_example() -> dict[str, Any]:
    raw = {"lexical": 2.8406, "semantic": 0.3171}
    signals: dict[str, Any] = {}
    for kind in registry():
        signals[kind.signal.rank_key] = 1
        signals[kind.signal.raw_key] = raw.get(kind.name, 0.5)
    return {
        "rank": 1,
        "doc_id": "vac-01",
        "chunk": 0,
        "score": 1 / 61 * len(signals) / 2,
        **signals,
        "char_start": 0,
        "char_end": 240,
        "text": "How vaccines train the immune system\n\nA vaccine shows the immune system a harmless piece or copy of a "
        "pathogen. B cells learn to make antibodies against it and memory cells keep that lesson for years, so a "
        "later infection is stopped quickly.",
        "tie_group": None,
    }


_MANIFEST = "0c1d7f3e9b2a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
EXAMPLES: dict[str, dict[str, Any]] = {
    "status": {"status": "ok"},
    "ready": {
        "status": "ready",
        "database": {"ok": True, "ms": 1.2, "recoveries": 0},
        "collections": [{"name": "docs", "snapshot_id": 1, "ok": True}],
        "models": {"state": "loaded", "lines": ["embedder sentence-transformers/all-MiniLM-L6-v2 loaded in 0.1 s"]},
    },
    "collections": {
        "collections": [
            {
                "name": "docs",
                "language": "english",
                "accent": "sensitive",
                "embedder_id": "sentence-transformers/all-MiniLM-L6-v2",
                "dim": 384,
                "index_kind": "hnsw",
                "active_snapshot_id": 1,
                "documents": 12,
                "chunks": 12,
                "manifest_hash": _MANIFEST,
            }
        ]
    },
    "collection": {
        "name": "docs",
        "language": "english",
        "embedder_id": "sentence-transformers/all-MiniLM-L6-v2",
        "index_kind": "hnsw",
        "fields": [
            {"name": "tags", "type": "keyword[]", "required": False},
            {"name": "year", "type": "int", "required": False},
        ],
        "active_snapshot_id": 1,
        "snapshots": [
            {
                "id": 1,
                "status": "ready",
                "active": True,
                "previous": False,
                "parent_id": None,
                "documents": 12,
                "chunks": 12,
                "corpus_digest": "5e2b1c0d9a8f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d",
                "manifest_hash": _MANIFEST,
                "embedded": 12,
                "reused": 0,
                "created_at": "2026-12-04T09:30:00.000000+00:00",
                "built_at": "2026-12-04T09:30:01.200000+00:00",
            }
        ],
    },
    "drop": {
        "collection": "docs",
        "snapshots": [1],
        "segments": [1],
        "tables": 5,
        "documents": 12,
        "query_log_entries": 3,
        "answer_log_entries": 1,
        "drop_id": 1,
    },
    "search": {
        "query": "how do vaccines work",
        "collection": "docs",
        "mode": "hybrid",
        "k": 1,
        "hits": [_hit_example()],
        "params": {"depth": 40, "rrf_k": 60, "lexical_ranker": "bm25", "vector_strategy": "exact"},
        "snapshot": {"id": 1, "manifest_hash": _MANIFEST, "segments": [1]},
        "filter": None,
        "as_of": None,
        "matching_count": 12,
        "complete": True,
        "truncation": None,
        "warnings": [],
        "query_id": 7,
        "timings": {"embed_ms": 9.1, "sql_ms": 4.3, "total_ms": 15.2},
        "served_by": "primary",
    },
    "answer": {
        "question": "how do vaccines work?",
        "collection": "docs",
        "answer": "A vaccine shows the immune system a harmless piece or copy of a pathogen. [1]",
        "citations": [
            {
                "n": 1,
                "doc_id": "vac-01",
                "chunk": 0,
                "quote": "A vaccine shows the immune system a harmless piece or copy of a pathogen.",
            }
        ],
        "chunks": [
            {
                "n": 1,
                "doc_id": "vac-01",
                "chunk": 0,
                "rank": 1,
                "score": 1 / 61,
                "text": "How vaccines train the immune system\n\nA vaccine shows the immune system a harmless piece or "
                "copy of a pathogen.",
                "date": None,
            }
        ],
        "abstained": False,
        "generator": {"name": "extractive", "model": "extractive-v5", "checksum": "e104365ccfdcd91c", "params": {}},
        "prompt_sha256": "db0364fc1ee18ad5a9a4f320c97a1d2da865d1228bbc4348620d20e58ac73b56",
        "snapshot": {"id": 1, "manifest_hash": _MANIFEST},
        "answer_id": "54e817a1ccefabb5",
    },
}
