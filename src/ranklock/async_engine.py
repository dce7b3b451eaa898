"""AsyncEngine: the Engine for applications that are already async (asyncio).

::

    >>> from ranklock import AsyncEngine
    >>> async with AsyncEngine() as eng:                     # embedded PostgreSQL in the home (ranklock.home)
    ...     res = await eng.search("docs", "how do vaccines work", k=5)
    ...     [h.doc_id for h in res.hits]

Same constructor arguments as :class:`~ranklock.Engine`, same result objects,
byte-identical ``to_json()`` for the same query and snapshot: the reads run
the very steps the sync engine runs (ranklock.store.steps: plan, completeness
count, fused statement, ties, query log, result cache), driven over psycopg_pool's
``AsyncConnectionPool`` instead of the sync pool.  Nothing on the SQL path
blocks the event loop; the query embedding (CPU-bound, torch) and loading a
model run in a worker thread.

Every other public Engine method (the writes, ``ask``, the snapshot, log, token
and replica operations) is that very method run on the sync Engine in a worker
thread (``asyncio.to_thread``): they hold locks, build tables or call a
generator model for seconds, and gain nothing from async I/O.  Those twins are
derived from the Engine's methods (:func:`in_thread`: same keywords, defaults,
types and docstring); scripts/check_twins.py (``make lint``, tests/test_twins.py)
checks the hand-written rest against Engine.  ``Engine.rdb`` alone is
sync-only (a blocking handle; the async reads use :attr:`AsyncEngine.adb`).
With read replicas (``read_dsns``), or with ``rerank=N``, a search, too, runs
the sync Engine's search in a worker thread: the async engine has no replica
routing of its own yet, and a reranker is a model or an HTTP call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Unpack

from .collection import CollectionInfo
from .embed import Embedder
from .engine import Engine
from .errors import QueryError
from .search.options import SearchOptions
from .search.request import SearchRequest
from .search.results import SearchResult
from .settings import REQUEST, Settings
from .snapshot.info import SnapshotInfo
from .store.async_database import AsyncDatabase
from .store.database import Tracer
from .store.errors import refusals_as

if TYPE_CHECKING:
    from .rerank.base import Reranker
    from .search.pipeline import Services
    from .search.replay import ReplayReport, RerankedReplay
    from .snapshot.document import StoredDocument
    from .snapshot.health import Readiness
    from .store.collections import CollectionSummary
    from .store.steps import Steps
    from .store.tokens import TokenInfo

__all__ = ["AsyncEngine"]

T = TypeVar("T")
P = ParamSpec("P")


def in_thread(method: Callable[Concatenate[Engine, P], T]) -> Callable[Concatenate[AsyncEngine, P], Awaitable[T]]:
    """The awaitable twin of an :class:`Engine` method: its very signature, run on the sync Engine in a worker thread.

    ``functools.wraps`` gives the twin the method's name, docstring and ``__wrapped__`` (so
    ``inspect.signature`` and an editor show the Engine's keywords); mypy reads the same
    keywords through the ParamSpec.
    """

    @functools.wraps(method)
    async def twin(self: AsyncEngine, /, *args: P.args, **kwargs: P.kwargs) -> T:
        eng, _ = await self._ready()
        return await asyncio.to_thread(method, eng, *args, **kwargs)

    twin.__doc__ = f":meth:`Engine.{method.__name__}` in a worker thread.\n\n{inspect.getdoc(method) or ''}".rstrip()
    return twin


class AsyncEngine:
    """Everything an async application reads from ranklock, awaitable; same results as :class:`Engine`.

    Open it with ``async with AsyncEngine(...) as eng`` (or ``await eng.open()``;
    the first call opens it too), close it with ``await eng.close()``.  Opening
    starts the embedded server and migrates the schema in a worker thread (it
    blocks for seconds), then opens an ``AsyncConnectionPool``.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        home: str | Path | None = None,
        embedder: Embedder | None = None,
        tracer: Tracer | None = None,
        log_queries: bool | None = None,
        read_dsns: Sequence[str] | None = None,
        embed_service: bool | None = None,
        reranker: str | Reranker | None = None,
    ) -> None:
        self._args: dict[str, Any] = {
            "dsn": dsn,
            "home": home,
            "embedder": embedder,
            "tracer": tracer,
            "log_queries": log_queries,
            "read_dsns": read_dsns,
            "embed_service": embed_service,
            "reranker": reranker,
        }
        self._engine: Engine | None = None
        self._adb: AsyncDatabase | None = None
        self._owns_engine = True
        # Opening runs in a worker thread; a thread lock keeps two first calls from opening twice.
        self._open_lock = threading.Lock()

    @classmethod
    def over(cls, engine: Engine) -> AsyncEngine:
        """An AsyncEngine sharing ``engine``'s database, settings and loaded models (the HTTP server's).

        :meth:`close` closes only the async pool: ``engine`` stays its owner's to close.
        """
        eng = cls()
        eng._engine, eng._owns_engine = engine, False
        eng._adb = eng._async_database(engine)
        return eng

    @staticmethod
    def _async_database(engine: Engine) -> AsyncDatabase:
        from .store.trace import stderr_timer

        settings = engine.settings
        # The sync Engine started (and migrated) the server; this pool only connects to it, and
        # restarts the embedded one the same way when it dies.
        server = engine.server
        return AsyncDatabase(
            engine.db.dsn,
            tracer=engine.db.tracer,
            timer=stderr_timer if settings.trace else None,
            max_size=engine.db.max_size,
            pool_timeout=settings.pool_timeout,
            restart=None if server is None else server.restart,
            diagnose=None if server is None else server.diagnose,
            data_directory=engine.db.data_directory,
        )

    # -- lifecycle --------------------------------------------------------------------

    def _open_sync(self) -> None:
        with self._open_lock:
            if self._engine is None:
                self._engine = Engine(**self._args)
                self._adb = self._async_database(self._engine)

    async def open(self) -> AsyncEngine:
        """Start (embedded) or reach the server and migrate, off the event loop; idempotent."""
        if self._engine is None:
            await asyncio.to_thread(self._open_sync)
        return self

    async def close(self) -> None:
        """Close the async pool, and the sync Engine this AsyncEngine opened (in a worker thread)."""
        if self._adb is not None:
            await self._adb.close()
        if self._engine is not None and self._owns_engine:
            await asyncio.to_thread(self._engine.close)

    async def release(self) -> None:
        """Close this event loop's pool but stay usable: the next call opens a new one (server shutdown hooks)."""
        if self._adb is not None:
            await self._adb.release()

    async def __aenter__(self) -> AsyncEngine:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _ready(self) -> tuple[Engine, AsyncDatabase]:
        await self.open()
        if self._engine is None or self._adb is None:  # open() set both or raised
            raise RuntimeError("AsyncEngine.open() left no engine")
        return self._engine, self._adb

    @property
    def engine(self) -> Engine:
        """The sync Engine underneath (writes, settings); opened by :meth:`open`."""
        if self._engine is None:
            raise RuntimeError("the AsyncEngine is not open yet; use `async with AsyncEngine(...)` or `await open()`.")
        return self._engine

    @property
    def settings(self) -> Settings:
        """The settings of the sync Engine underneath (:attr:`Engine.settings`); opened by :meth:`open`."""
        return self.engine.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.engine.settings = value

    @property
    def adb(self) -> AsyncDatabase:
        """The async connection pool reads run on; opened by :meth:`open`."""
        if self._adb is None:
            raise RuntimeError("the AsyncEngine is not open yet; use `async with AsyncEngine(...)` or `await open()`.")
        return self._adb

    async def _run(self, steps: Steps[T]) -> T:
        _, adb = await self._ready()
        return await adb.run(steps)

    # -- reads: async I/O on the shared steps ----------------------------------------------

    async def ping(self) -> None:
        """One round trip to the database (``GET /api/health``)."""
        _, adb = await self._ready()
        await adb.fetchall("SELECT 1 AS ok")

    async def collection(self, name: str) -> CollectionInfo:
        """The collection record of ``name`` (:meth:`Engine.collection`)."""
        from .collection import read_collection_steps

        return await self._run(read_collection_steps(name))

    async def collections(self) -> list[CollectionSummary]:
        """Every collection with its active snapshot's counts (:meth:`Engine.collections`)."""
        from .store.collections import list_collections_steps

        return await self._run(list_collections_steps())

    async def _snapshot_for(self, coll: CollectionInfo, snapshot: int | None) -> dict[str, Any]:
        from .snapshot.lifecycle import resolve_steps

        return await self._run(resolve_steps(coll, snapshot))

    async def document(
        self, name: str, doc_id: str, *, snapshot: int | None = None, show_purge: bool = False
    ) -> StoredDocument:
        """The stored version of ``doc_id`` in ``snapshot`` (default: the active one) (:meth:`Engine.document`)."""
        from .snapshot.document import get_document_steps
        from .snapshot.purge_key import load_purge_key

        coll = await self.collection(name)
        snap = await self._snapshot_for(coll, snapshot)
        purges = load_purge_key(self.settings.home) if show_purge else None
        return await self._run(get_document_steps(coll, int(snap["id"]), doc_id, purges=purges))

    async def list_snapshots(self, name: str) -> list[SnapshotInfo]:
        """Every snapshot of ``name``, oldest first (:meth:`Engine.list_snapshots`)."""
        from .snapshot.lifecycle import list_snapshots_steps

        eng, _ = await self._ready()
        coll = await self.collection(name)
        return await self._run(list_snapshots_steps(eng.db, coll))

    async def verify_token(self, token: str) -> TokenInfo:
        """The live API token ``token`` is (:class:`~ranklock.errors.Unauthorized` when none): one indexed read."""
        from .store.tokens import verify_token_steps

        return await self._run(verify_token_steps(token))

    async def readiness(self) -> Readiness:
        """Whether the database answers and every active snapshot can be read (``GET /readyz``)."""
        from dataclasses import replace

        from .snapshot.health import readiness_steps

        eng, adb = await self._ready()
        report = await adb.run(readiness_steps(eng.settings.statement_timeout, lambda: adb.recoveries))
        return replace(report, models=dict(eng.warm_state))

    async def search_sql(
        self,
        name: str,
        query: str,
        *,
        k: int = REQUEST.k,
        mode: str = REQUEST.mode,
        filter: Any = None,
        snapshot: int | None = None,
        as_of: datetime | str | None = None,
        **params: Unpack[SearchOptions],
    ) -> tuple[str, dict[str, Any]]:
        """The SQL and parameters :meth:`search` would run, without running it; writes nothing."""
        from .search.pipeline import sql_steps

        eng, adb = await self._ready()
        req = SearchRequest.of(name, query, k=k, mode=mode, filter=filter, snapshot=snapshot, as_of=as_of, **params)
        with refusals_as(QueryError):
            # The embedder is resolved (a model loaded) only for a vector branch, in a worker thread.
            q, p = await adb.run(sql_steps(self._services(eng, adb), req))
            async with adb.connection() as conn:
                return q.as_string(conn), p

    async def search(
        self,
        name: str,
        query: str,
        *,
        k: int = REQUEST.k,
        mode: str = REQUEST.mode,
        filter: Any = None,
        snapshot: int | None = None,
        as_of: datetime | str | None = None,
        rerank: int | None = None,
        offset: int = 0,
        **params: Unpack[SearchOptions],
    ) -> SearchResult:
        """Search ``name``: the fused, tie-broken top ``k`` (:meth:`Engine.search`, same keywords and result).

        The same pipeline as :meth:`Engine.search` (ranklock.search.pipeline), its steps on async I/O;
        ``rerank=N`` and ``offset`` are its stages (the reranker runs in a worker thread, as an embedder
        does).  With read replicas the search runs the sync pipeline in a worker thread (see the module
        docstring).
        """
        from .search.pipeline import Stages, request_steps

        eng, adb = await self._ready()
        req = SearchRequest.of(name, query, k=k, mode=mode, filter=filter, snapshot=snapshot, as_of=as_of, **params)
        stages = Stages(rerank, offset)
        if eng.router is not None:
            return await asyncio.to_thread(eng.searching.run, req, stages)
        with refusals_as(QueryError):
            return await adb.run(request_steps(self._services(eng, adb), req, stages, started=time.perf_counter()))

    @staticmethod
    def _services(eng: Engine, adb: AsyncDatabase) -> Services:
        """The search services of the sync engine's, reading on the async pool."""
        import dataclasses

        return dataclasses.replace(eng.searching.services(), dsn=adb.dsn)

    async def replay(self, query_id: int, *, query: str | None = None) -> ReplayReport | RerankedReplay:
        """Re-run logged query ``query_id`` on its snapshot (:meth:`Engine.replay`), layer by layer, the rerank too.

        The same steps as ``Engine.replay``, on async I/O.
        """
        from .search.pipeline import Stages, request_steps
        from .search.replay import replay_steps

        eng, adb = await self._ready()
        services = self._services(eng, adb)

        def searched(req: SearchRequest, stages: Stages) -> Steps[SearchResult]:
            return request_steps(services, req, stages)

        with refusals_as(QueryError):
            return await adb.run(
                replay_steps(eng.db, eng.settings, searched, query_id, query=query, reranker=eng.reranker)
            )

    # -- everything else: the sync Engine's own method in a worker thread ------------------------
    # Writes (they wait for the collection's writer lock, build tables, embed), ask (a generator model
    # or an HTTP call), evaluation and administration: blocking work that gains nothing from async I/O.
    # Each twin is derived from the Engine method of the same name: its keywords, defaults, types and
    # docstring are that method's, so the two cannot drift (scripts/check_twins.py checks the rest).

    create_collection = in_thread(Engine.create_collection)
    drop_collection = in_thread(Engine.drop_collection)
    ingest = in_thread(Engine.ingest)
    delete = in_thread(Engine.delete)
    purge = in_thread(Engine.purge)
    merge = in_thread(Engine.merge)
    prune_snapshots = in_thread(Engine.prune_snapshots)
    set_snapshot_retention = in_thread(Engine.set_snapshot_retention)
    activate = in_thread(Engine.activate)
    snapshot_info = in_thread(Engine.snapshot_info)
    rollback = in_thread(Engine.rollback)
    diff_snapshots = in_thread(Engine.diff_snapshots)
    drop_snapshot = in_thread(Engine.drop_snapshot)
    lexical_stats = in_thread(Engine.lexical_stats)
    manifest = in_thread(Engine.manifest)
    activate_gated = in_thread(Engine.activate_gated)
    log_status = in_thread(Engine.log_status)
    logs_status = in_thread(Engine.logs_status)
    prune_log = in_thread(Engine.prune_log)
    pin = in_thread(Engine.pin)
    create_token = in_thread(Engine.create_token)
    list_tokens = in_thread(Engine.list_tokens)
    revoke_token = in_thread(Engine.revoke_token)
    replica_status = in_thread(Engine.replica_status)
    ask = in_thread(Engine.ask)
    replay_answer = in_thread(Engine.replay_answer)
    plan = in_thread(Engine.plan)
    search_request = in_thread(Engine.search_request)
    reranker = in_thread(Engine.reranker)
    embedder_for = in_thread(Engine.embedder_for)
    warm = in_thread(Engine.warm)
