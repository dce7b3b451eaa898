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

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any
from urllib.parse import unquote_plus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ..api import AskArguments, SearchArguments, SearchQuery, request_error
from ..ask.generators import PAID
from ..async_engine import AsyncEngine
from ..engine import Engine
from ..errors import Forbidden, InputError, QueryError, RanklockError, public_name
from ..settings import Settings
from ..validation import describe_errors
from .guard import Access, Guard, scopes_of
from .schemas import (
    EXAMPLES,
    GUARDED,
    WITH_TOKEN,
    AnswerBody,
    CollectionBody,
    CollectionsBody,
    DropBody,
    ReadyBody,
    SearchBody,
    StatusBody,
    describe,
    errors,
    ok,
    search_query_parameters,
)

__all__ = ["AskArguments", "SearchQuery", "SearchArguments", "create_app", "search_query"]

log = logging.getLogger("ranklock.http")


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
        if err.get("type") == "ranklock":
            parts.append(str(err.get("msg", "")) + ".")  # a whole sentence of ranklock.api's validators
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


def _settings_of(aeng: AsyncEngine) -> Settings:
    # An AsyncEngine not opened yet reads the same environment its Engine will.
    try:
        return aeng.engine.settings
    except RuntimeError:
        return Settings()


def search_query(raw: bytes) -> SearchQuery:
    """``GET /api/search``'s query string, read strictly: valid UTF-8 escapes, each key once.

    Starlette decodes ``%ff`` to U+FFFD and keeps the last of ``k=1&k=2``; a search
    would then run on text nobody sent.  The POST body is refused for the same input.
    """
    values: dict[str, str] = {}
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise QueryError("the query string holds bytes that are not URL-encoded; percent-encode it as UTF-8.") from None
    for pair in text.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key = unquote_plus(key, errors="strict")
            value = unquote_plus(value, errors="strict")
        except UnicodeDecodeError:
            raise QueryError(
                f"query parameter {key!r} is not valid UTF-8 once its %-escapes are decoded ({pair[:60]!r}); "
                "percent-encode the text as UTF-8."
            ) from None
        if key in values:
            raise QueryError(
                f"query parameter {key!r} is given twice ({values[key][:40]!r} and {value[:40]!r}); give it once."
            )
        values[key] = value
    try:
        return SearchQuery.model_validate(values)
    except ValidationError as exc:
        raise request_error(exc, SearchQuery, what="query parameter") from None


def create_app(engine: Engine | AsyncEngine, *, access: Access | None = None) -> FastAPI:
    """The HTTP API over ``engine`` (an Engine is wrapped in an AsyncEngine sharing its pool and models).

    ``access`` is who may call it (ranklock.http.guard); the default, for an
    in-process client, needs no token and answers to any Host.
    """
    aeng = engine if isinstance(engine, AsyncEngine) else AsyncEngine.over(engine)
    settings = engine.settings if isinstance(engine, Engine) else _settings_of(engine)
    pool_scope = _PoolScope(aeng)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
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
        # FastAPI's Swagger and ReDoc pages load their scripts from a CDN: /docs below is local.
        docs_url=None,
        redoc_url=None,
    )
    # What the server never answers (FastAPI's 422) removed, once, when the document is first asked for.
    generated = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe(generated())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    # Added last, so it runs first: the pool outlives the guard's token check.
    app.add_middleware(Guard, aeng=aeng, access=access or Access(), settings=settings)
    app.add_middleware(_ReleaseWithoutLifespan, scope=pool_scope)

    @app.exception_handler(RanklockError)
    async def ranklock_error(_request: Request, exc: RanklockError) -> JSONResponse:
        return _error(exc.http_status, public_name(exc), str(exc))

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

    @app.get("/", response_class=HTMLResponse, responses=errors(*GUARDED))
    def page() -> str:
        """The search page: Search, Ask and Evaluation views; ``?collection=..&q=..`` (``&view=ask``) permalinks."""
        return search_page()

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> str:
        """The routes, from the OpenAPI document, as one page with nothing fetched from elsewhere."""
        return _docs_page(app.openapi())

    @app.get(
        "/api/health",
        responses={**ok(StatusBody, EXAMPLES["status"], "The database answers."), **errors(*WITH_TOKEN, 503)},
    )
    async def health() -> dict[str, str]:
        """The database answers (a round trip), else 503."""
        await aeng.ping()
        return {"status": "ok"}

    @app.get("/healthz", responses={**ok(StatusBody, EXAMPLES["status"], "The process answers."), **errors(*GUARDED)})
    def healthz() -> dict[str, str]:
        """Liveness: the process answers; touches no database."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        responses={
            **ok(ReadyBody, EXAMPLES["ready"], "Ready: the database answers and every active snapshot can be read."),
            **errors(*WITH_TOKEN),
            503: {"model": ReadyBody, "description": "Not ready: the body names the failing part (with a token)."},
        },
    )
    async def readyz(request: Request) -> JSONResponse:
        """Readiness: the database answers and every active snapshot can be read; 503 names the failing part.

        A probe without a token (an orchestrator's, on a server that needs tokens) gets the status alone."""
        report = (await aeng.readiness()).as_dict()
        ready = report.pop("ready")
        body = {"status": "ready" if ready else "not_ready"}
        if "read" in scopes_of(request.scope):
            body.update(report)
        return JSONResponse(status_code=200 if ready else 503, content=body)

    @app.get(
        "/api/collections",
        responses={**ok(CollectionsBody, EXAMPLES["collections"], "Every collection."), **errors(*WITH_TOKEN, 503)},
    )
    async def collections() -> dict[str, Any]:
        """Every collection with its active snapshot's counts (``ranklock collections --json``)."""
        return {"collections": [c.as_dict() for c in await aeng.collections()]}

    @app.get(
        "/api/collections/{name}",
        responses={**ok(CollectionBody, EXAMPLES["collection"], "The collection."), **errors(*WITH_TOKEN, 404, 503)},
    )
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
            "snapshots": [s.as_dict() for s in await aeng.list_snapshots(name)],
        }

    @app.delete(
        "/api/collections/{name}",
        responses={
            **ok(DropBody, EXAMPLES["drop"], "Dropped: what was removed."),
            **errors(*WITH_TOKEN, 400, 404, 409, 503),
        },
    )
    async def collection_drop(name: str, request: Request, confirm: str = "") -> dict[str, Any]:
        """Drop a collection with every snapshot, document and log entry of it (scope admin; ?confirm=NAME)."""
        if "admin" not in scopes_of(request.scope):
            raise Forbidden(
                f"dropping collection {name!r} needs a token with the scope `admin`; create one with "
                "`ranklock token create NAME --scope read --scope admin`, or run `ranklock collection drop` on the "
                "server."
            )
        if confirm != name:
            raise InputError(
                f"a drop deletes every snapshot, document and log entry of {name!r} for good; repeat the name to "
                f"confirm: DELETE /api/collections/{name}?confirm={name}."
            )
        return (await aeng.drop_collection(name)).as_dict()

    async def run(req: SearchArguments) -> Response:
        coll = await aeng.collection(req.collection)
        req.check_cost(settings, coll.search_defaults)
        res = await aeng.search(req.collection, req.query, **req.arguments())
        # The engine's canonical JSON, byte for byte, so HTTP and CLI agree.
        return Response(content=res.to_json(timings=True, served_by=True), media_type="application/json")

    search_responses = {
        **ok(SearchBody, EXAMPLES["search"], "The result: the bytes of `ranklock search --json --timings`."),
        **errors(*WITH_TOKEN, 400, 404, 409, 503, 504),
    }

    @app.post("/api/search", responses=search_responses)
    async def search_post(req: SearchArguments) -> Response:
        """Search a collection: the JSON body of :class:`ranklock.api.SearchArguments` (the MCP tool ``search``'s
        arguments); ``params`` overrides search parameters (depth, rrf_k, ef_search, ...)."""
        return await run(req)

    @app.get("/api/search", responses=search_responses, openapi_extra={"parameters": search_query_parameters()})
    async def search_get(request: Request) -> Response:
        """Search with the query string: collection, q, k, mode, filter, snapshot, as_of, offset (each once)."""
        query = search_query(request.scope.get("query_string", b""))
        return await run(
            SearchArguments(
                collection=query.collection,
                query=query.q,
                k=query.k,
                mode=query.mode,
                filter=query.filter,
                snapshot=query.snapshot,
                as_of=query.as_of,
                offset=query.offset,
            )
        )

    @app.post(
        "/api/ask",
        responses={
            **ok(AnswerBody, EXAMPLES["answer"], "A cited answer: the bytes of `ranklock ask --json`."),
            **errors(*WITH_TOKEN, 400, 404, 409, 502, 503, 504),
        },
    )
    async def ask(req: AskArguments, request: Request) -> Response:
        """A grounded answer with numbered citations from the collection's top chunks (``ranklock ask``)."""
        if req.generator in PAID and "paid-generator" not in scopes_of(request.scope):
            raise Forbidden(
                f"generator {req.generator!r} is billed to the server's operator, and this token lacks the scope "
                "`paid-generator`; use generator extractive, or a token created with --scope paid-generator."
            )
        req.check_cost(settings)
        ans = await aeng.ask(req.collection, req.question, **req.arguments())
        # The same bytes as `ranklock ask --json`.
        return Response(content=ans.to_json(), media_type="application/json")

    return app


#: Where the page's branch list goes (an empty list in the static file).
_BRANCHES_SLOT = '<script id="branches" type="application/json">[]</script>'


def search_page() -> str:
    """The page (static/index.html) with the search's branches written in (ranklock.search.branches.describe),
    so it shows each one's signals under the keys it names, and offers its mode."""
    from ..search.branches import describe

    html = (resources.files("ranklock.http") / "static" / "index.html").read_text(encoding="utf-8")
    # Constants of the branch classes; "</" escaped all the same, so no value can end the script element.
    branches = json.dumps(describe(), ensure_ascii=False).replace("</", "<\\/")
    return html.replace(_BRANCHES_SLOT, _BRANCHES_SLOT.replace("[]", branches))


def _docs_page(spec: dict[str, Any]) -> str:
    """A plain HTML list of the API's routes and their summaries, from ``spec`` (the OpenAPI document)."""
    from html import escape

    rows = []
    for path, ops in sorted(spec.get("paths", {}).items()):
        for method, op in sorted(ops.items()):
            summary = op.get("description") or op.get("summary") or ""
            rows.append(
                f"<tr><td><code>{escape(method.upper())}</code></td><td><code>{escape(path)}</code></td>"
                f"<td>{escape(summary.strip().splitlines()[0] if summary.strip() else '')}</td></tr>"
            )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>ranklock API</title></head><body>"
        "<h1>ranklock API</h1><p>The machine-readable description is <a href='/openapi.json'>/openapi.json</a>. "
        'Every error is <code>{"error": {"type", "message"}}</code>.</p>'
        f"<table><tr><th>method</th><th>path</th><th>what</th></tr>{''.join(rows)}</table></body></html>"
    )
