"""FastAPI application over one :class:`ranklock.Engine`, served through :class:`ranklock.AsyncEngine`.

Every route is an ``async def`` that awaits one AsyncEngine method: reads run on
psycopg's async pool without blocking the event loop (``ask`` runs the sync
engine in a worker thread).  The server's shutdown closes the async pool.
Every error, whatever raised it, is JSON of one shape,
``{"error": {"type": ..., "message": ...}}``:

* domain errors with the status their class declares (400 bad input, 404
  unknown collection or snapshot, 409 embedder or snapshot conflicts, 503
  database trouble);
* a request that does not fit the route's model (unknown key, wrong type,
  missing key, a body that is not JSON): 400, type ``InputError``, the message
  naming the key, the problem and the valid keys;
* an unknown route or method: its HTTP status (404, 405);
* anything unexpected: 500, type ``InternalError``, logged with its traceback.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ..async_engine import AsyncEngine
from ..engine import Engine
from ..errors import InputError, RanklockError
from ..validation import describe_errors

__all__ = ["AskRequest", "SearchQuery", "SearchRequest", "create_app"]

log = logging.getLogger("ranklock.http")


class SearchRequest(BaseModel):
    """POST /api/search body.  Strict: unknown keys and loosely typed values (``"k": true``) are errors."""

    model_config = ConfigDict(extra="forbid", strict=True)

    collection: str
    query: str
    k: int = 10
    mode: str = "hybrid"
    filter: Any = None
    snapshot: int | None = None
    as_of: str | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="Search parameter overrides (depth, ef_search…).")


class AskRequest(BaseModel):
    """``POST /api/ask``: the options of ``ranklock ask``; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    collection: str
    question: str
    filter: str | dict[str, Any] | list[Any] | None = None
    as_of: str | None = None
    snapshot: int | None = None
    chunks: int = Field(8, ge=1, le=40, description="Chunks handed to the generator, numbered [1]..[N].")
    generator: str = Field("extractive", description="extractive, openai or local.")


class SearchQuery(BaseModel):
    """GET /api/search query string.  Values arrive as text, so types are parsed; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    collection: str
    q: str
    k: int = 10
    mode: str = "hybrid"
    filter: str | None = None
    snapshot: int | None = None
    as_of: str | None = None


def _error(status: int, etype: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"type": etype, "message": message}})


def _valid_keys(request: Request, where: str) -> list[str]:
    """The keys the route accepts in its body or query string, from its pydantic models."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return []
    fields = [getattr(route, "body_field", None)] if where == "body" else list(dependant.query_params)
    names: list[str] = []
    for f in fields:
        if f is None:
            continue
        ann = getattr(getattr(f, "field_info", None), "annotation", None)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            names.extend(ann.model_fields)
        else:
            names.append(f.alias)
    return sorted(names)


def _validation_message(request: Request, exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        where = str(loc[0]) if loc else "body"
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            parts.append(
                f"the request body is not valid JSON ({ctx.get('error', 'decode error')} at position {loc[-1]}); "
                "send one JSON object."
            )
            continue
        if len(loc) <= 1:
            parts.append(
                f"the request {where} must be a JSON object with keys {', '.join(_valid_keys(request, where))}; "
                f"got {type(err.get('input')).__name__}."
            )
            continue
        what = "body key" if where == "body" else "query parameter"
        parts.append(
            describe_errors([err], what=what, valid=_valid_keys(request, where), skip_loc=1).removesuffix(".") + "."
        )
    return " ".join(parts)


class _PoolScope:
    """Whether a server's lifespan holds the async pool open, and how many requests run now."""

    def __init__(self, aeng: AsyncEngine) -> None:
        self.aeng = aeng
        self.server_running = False
        self.in_flight = 0


class _ReleaseWithoutLifespan:
    """Close the async pool after the last running request when no server lifespan owns it.

    An asyncio pool belongs to the event loop that opened it and must be closed
    before that loop ends.  uvicorn runs the lifespan, so its one loop keeps one
    pool.  An in-process client without ``with`` (``TestClient(app).get(...)``)
    runs each request in a fresh loop and no lifespan: the pool lives as long as
    the request's loop.
    """

    def __init__(self, app: ASGIApp, scope: _PoolScope) -> None:
        self.app = app
        self.pool_scope = scope

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ps = self.pool_scope
        if scope["type"] != "http" or ps.server_running:
            await self.app(scope, receive, send)
            return
        ps.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            ps.in_flight -= 1
            if ps.in_flight == 0 and not ps.server_running:
                await ps.aeng.release()


def create_app(engine: Engine | AsyncEngine) -> FastAPI:
    """The HTTP API over ``engine`` (an Engine is wrapped in an AsyncEngine sharing its pool and models)."""
    aeng = engine if isinstance(engine, AsyncEngine) else AsyncEngine.over(engine)
    pool_scope = _PoolScope(aeng)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool_scope.server_running = True
        try:
            yield
        finally:
            pool_scope.server_running = False
            await aeng.release()  # the async pool's connections end with the server

    app = FastAPI(
        title="ranklock",
        version="0.1.0",
        description="Deterministic hybrid retrieval on PostgreSQL.",
        lifespan=lifespan,
    )
    app.add_middleware(_ReleaseWithoutLifespan, scope=pool_scope)

    @app.exception_handler(RanklockError)
    async def ranklock_error(request: Request, exc: RanklockError) -> JSONResponse:
        return _error(exc.http_status, type(exc).__name__, str(exc))

    # One shape for FastAPI's own errors too: 400 (like every InputError), never {"detail": [...]}.
    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(InputError.http_status, "InputError", _validation_message(request, exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        etype = {400: "InputError", 404: "NotFound"}.get(exc.status_code, "HTTPError")
        message = str(exc.detail)
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}; see /docs for the API's routes."
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}; see /docs for the methods it takes."
        elif exc.status_code == 400:
            message = (
                "the request body could not be read as JSON (not UTF-8, or nested too deeply); send one JSON object."
            )
        return _error(exc.status_code, etype, message)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug, not bad input: log the traceback, tell the client what happened without it.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return _error(
            500,
            "InternalError",
            f"internal error ({type(exc).__name__}: {str(exc)[:200]}); this is a bug in ranklock, the server log "
            "has the traceback. Please report it.",
        )

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return (resources.files("ranklock.http") / "static" / "index.html").read_text(encoding="utf-8")

    @app.get("/api/health")
    async def health() -> dict[str, str]:
        await aeng.ping()
        return {"status": "ok"}

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """Liveness: the process answers; touches no database."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        """Readiness: the database answers and every active snapshot can be read; 503 names the failing part."""
        report = await aeng.readiness()
        ready = report.pop("ready")
        body = {"status": "ready" if ready else "not_ready", **report}
        return JSONResponse(status_code=200 if ready else 503, content=body)

    @app.get("/api/collections")
    async def collections() -> dict[str, Any]:
        return {"collections": await aeng.collections()}

    @app.get("/api/collections/{name}")
    async def collection_detail(name: str) -> dict[str, Any]:
        """One collection for the page: its typed fields (for the filter box) and its snapshots."""
        coll = await aeng.collection(name)
        return {
            "name": coll.name,
            "language": coll.language,
            "embedder_id": coll.embedder_id,
            "index_kind": coll.index_kind,
            "fields": [{"name": f.name, "type": f.type, "required": f.required} for f in coll.fields],
            "active_snapshot_id": coll.active_snapshot_id,
            "snapshots": await aeng.list_snapshots(name),
        }

    async def run(req: SearchRequest) -> Response:
        res = await aeng.search(
            req.collection,
            req.query,
            k=req.k,
            mode=req.mode,
            filter=req.filter,
            snapshot=req.snapshot,
            as_of=req.as_of,
            **req.params,
        )
        # The engine's canonical JSON, byte for byte, so HTTP and CLI agree.
        return Response(content=res.to_json(timings=True, served_by=True), media_type="application/json")

    @app.post("/api/search")
    async def search_post(req: SearchRequest) -> Response:
        return await run(req)

    @app.get("/api/search")
    async def search_get(query: Annotated[SearchQuery, Query()]) -> Response:
        return await run(
            SearchRequest(
                collection=query.collection,
                query=query.q,
                k=query.k,
                mode=query.mode,
                filter=query.filter,
                snapshot=query.snapshot,
                as_of=query.as_of,
            )
        )

    @app.post("/api/ask")
    async def ask(req: AskRequest) -> Response:
        ans = await aeng.ask(
            req.collection,
            req.question,
            filter=req.filter,
            as_of=req.as_of,
            snapshot=req.snapshot,
            chunks=req.chunks,
            generator=req.generator,
        )
        # The same bytes as `ranklock ask --json`.
        return Response(content=ans.to_json(), media_type="application/json")

    return app
