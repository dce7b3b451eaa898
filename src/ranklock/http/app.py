"""FastAPI application over one :class:`ranklock.Engine`.

Every route calls one engine method.  Domain errors become JSON
``{"error": {"type": ..., "message": ...}}`` with the status the error class
declares (400 bad input, 404 unknown collection or snapshot, 409 embedder or
snapshot conflicts, 503 database trouble).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..engine import Engine
from ..errors import RanklockError

__all__ = ["AskRequest", "SearchRequest", "create_app"]


class SearchRequest(BaseModel):
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


def create_app(engine: Engine) -> FastAPI:
    app = FastAPI(title="ranklock", version="0.1.0", description="Deterministic hybrid retrieval on PostgreSQL.")

    @app.exception_handler(RanklockError)
    async def ranklock_error(request: Request, exc: RanklockError) -> JSONResponse:
        return JSONResponse(
            status_code=exc.http_status,
            content={"error": {"type": type(exc).__name__, "message": str(exc)}},
        )

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return (resources.files("ranklock.http") / "static" / "index.html").read_text(encoding="utf-8")

    @app.get("/api/health")
    def health() -> dict[str, str]:
        engine.db.fetchone("SELECT 1 AS ok")
        return {"status": "ok"}

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """Liveness: the process answers; touches no database."""
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        """Readiness: the database answers and every active snapshot can be read; 503 names the failing part."""
        report = engine.readiness()
        ready = report.pop("ready")
        body = {"status": "ready" if ready else "not_ready", **report}
        return JSONResponse(status_code=200 if ready else 503, content=body)

    @app.get("/api/collections")
    def collections() -> dict[str, Any]:
        return {"collections": engine.collections()}

    def run(req: SearchRequest) -> Response:
        res = engine.search(
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
    def search_post(req: SearchRequest) -> Response:
        return run(req)

    @app.get("/api/search")
    def search_get(
        collection: str,
        q: str,
        k: int = 10,
        mode: str = "hybrid",
        filter: str | None = None,
        snapshot: int | None = None,
        as_of: str | None = None,
    ) -> Response:
        return run(
            SearchRequest(collection=collection, query=q, k=k, mode=mode, filter=filter, snapshot=snapshot, as_of=as_of)
        )

    @app.post("/api/ask")
    def ask(req: AskRequest) -> Response:
        ans = engine.ask(
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
