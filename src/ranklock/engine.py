"""The Engine: one object that owns the database, the embedders and every operation.

The CLI and the HTTP service are thin shells over it::

    >>> from ranklock import Engine
    >>> eng = Engine()                                    # embedded PostgreSQL in the home (ranklock.home)
    >>> eng.ingest("docs", "corpus.jsonl")                # creates the collection if needed
    >>> res = eng.search("docs", "how do vaccines work", k=5)
    >>> [h.doc_id for h in res.hits]

Every method delegates in a few lines to a feature module (search/, snapshot/, plan/, ask/,
eval/) and holds no SQL: an ingest is ranklock.snapshot.ingest_run, the snapshot operations
ranklock.snapshot.lifecycle, and their reports are defined there.  What stays here is what the
engine owns: the database and its replica router, the embedders (loaded once, checked against
a collection's weights, warmed) and the reranker.  The file is longer than the ~500-line guide
on purpose: it is the whole public surface in one place, about forty methods, each mostly its
docstring.  :class:`~ranklock.AsyncEngine` is its twin (scripts/check_twins.py keeps it so).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .collection import CollectionInfo, FieldSpec, read_collection
from .embed import Embedder
from .errors import IngestError, QueryError, RanklockError
from .ingest.normalize import NORMALIZATION
from .search.options import SearchOptions
from .search.request import SearchRequest
from .search.results import SearchResult
from .settings import REQUEST, SNAPSHOT_KEEP, ChunkerParams, Settings
from .snapshot.info import (
    Activation,
    DropReport,
    GatedActivation,
    LexicalStatsReport,
    SnapshotDetail,
    SnapshotDiff,
    SnapshotInfo,
)
from .snapshot.reports import DeleteReport, IngestReport, MergeReport
from .store.database import Database, Tracer
from .store.errors import refusals_as

__all__ = ["DeleteReport", "Engine", "IngestReport", "MergeReport"]

if TYPE_CHECKING:
    import numpy as np

    # Types only: a search never loads the file readers or the snapshot builder (bench/cli_startup.py).
    from .ask.log import AnswerReplay
    from .ask.model import Answer, Generator
    from .ingest.document import Document
    from .ingest.formats import FileLoad
    from .plan.model import Plan
    from .plan.run import PlannedSearch
    from .rerank.base import Reranker
    from .search.replay import ReplayReport, RerankedReplay
    from .snapshot.build import Progress
    from .snapshot.collection_drop import CollectionDrop
    from .snapshot.document import StoredDocument
    from .snapshot.health import Readiness
    from .snapshot.purge import PurgeOutcome
    from .snapshot.purge_key import PurgeKey
    from .snapshot.retention import RetentionPlan, SnapshotRetention
    from .store.collections import CollectionSummary
    from .store.log_retention import LogStatus, PruneReport
    from .store.replicas import ReplicaStatus
    from .store.server import EmbeddedServer
    from .store.tokens import TokenInfo


class Engine:
    """Everything ranklock does, over one PostgreSQL database."""

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
        """Open the database of ``dsn`` (else ``RANKLOCK_DSN``, else the embedded server of ``home``).

        ``embed_service`` (default ``RANKLOCK_EMBED_SERVICE``, on): embed through the home's embedding
        service, the one model every process of the home shares (ranklock.embed.home_embedder);
        ``False`` loads the model in this process.  An ``embedder`` given is used as it is, here.
        """
        settings = Settings()
        if read_dsns is not None:
            settings.read_dsns = list(read_dsns)
        if home is not None:
            settings.home = Path(home)
        if dsn is not None:
            settings.dsn = dsn
        if log_queries is not None:
            settings.log_queries = log_queries
        restart = diagnose = None
        #: The home's embedded single-node server, when that is the database (not a DSN, not a cluster).
        self.server: EmbeddedServer | None = None
        from .store.cluster import LocalCluster

        cluster = None if settings.dsn else LocalCluster(settings.home).home_dsn()
        #: The home's local Citus cluster, when that is the database (ranklock.store.cluster).
        self.cluster = LocalCluster(settings.home) if cluster else None
        if settings.dsn or cluster:
            uri = settings.dsn or cluster or ""
        else:
            from .store.server import EmbeddedServer

            self.server = server = EmbeddedServer(settings.home)
            uri = server.uri()
            restart = server.restart  # starts it again if it died (not if stopped on purpose), within the seconds given
            diagnose = server.diagnose
        from .store.trace import stderr_timer

        timer = stderr_timer if settings.trace else None
        self.db = Database(
            uri, tracer=tracer, timer=timer, pool_timeout=settings.pool_timeout, restart=restart, diagnose=diagnose
        )
        # Searches go to streaming replicas when there are any (ranklock.store.replicas); writes never do.
        from .store.replicas import open_router

        self.router = open_router(
            self.db, settings.read_dsns, home=settings.home, embedded=restart is not None, wait=settings.replica_wait
        )
        from .embed.loaded import Embedders
        from .rerank import LazyReranker

        # Every process of a home asks its embedding service instead of loading the model itself
        # (ranklock.embed.service): one model in memory per home; the vectors are the same bits either way.
        #: The models this engine has loaded (ranklock.embed.loaded): each once, checked against a collection.
        self.embedders = Embedders(
            settings.home,
            service=settings.embed_service if embed_service is None else embed_service,
            idle_s=settings.embed_idle,
            default=embedder,
        )
        #: What :meth:`warm` did: ``state`` (not started, loading, loaded) and one line per embedder.
        self.warm_state: dict[str, Any] = {"state": "not started", "lines": []}
        self._reranker = LazyReranker(reranker)
        from .search.context import Contexts
        from .search.pipeline import Search

        #: The search pipeline over this engine's database (ranklock.search.pipeline): what :meth:`search`
        #: runs, and what the features that search (Ask, plans, evaluation) are handed instead of the engine.
        self.searching = Search(
            self.db,
            settings,
            Contexts.of(self.db.dsn),
            self.embedders.for_collection,
            router=self.router,
            reranker=self._reranker.get,
        )

    def reranker(self) -> Reranker:
        """The reranker of ``rerank=N`` (Engine(reranker=...), else RANKLOCK_RERANKER), resolved once."""
        return self._reranker.get()

    @property
    def settings(self) -> Settings:
        """This engine's settings: one value with its search pipeline's (replacing it replaces both)."""
        return self.searching.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.searching.settings = value

    def close(self) -> None:
        for emb in self.embedders.loaded():
            release = getattr(emb, "release", None)  # a served embedder lets go of its service (warm())
            if release is not None:
                release()
        if self.router is not None:
            self.router.close()
        self.db.close()

    @property
    def rdb(self) -> Database:
        """Where this thread's reads go: the replica a routed search is bound to, else the primary.

        Sync-only: it is a blocking :class:`~ranklock.store.database.Database` (the route is the
        calling thread's); an AsyncEngine reads on its own async pool, :attr:`AsyncEngine.adb`.
        """
        from .store.replicas import current_route

        route = current_route()
        return self.db if route is None else route.db

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedders ----------------------------------------------------------------

    def embedder_for(self, spec: str | None) -> Embedder:
        """The embedder ``spec`` names (None: this engine's default), loaded once (ranklock.embed.loaded)."""
        return self.embedders.get(spec)

    def _collection_embedder(self, coll: CollectionInfo) -> Embedder:
        return self.embedders.for_collection(coll)

    def warm(self) -> list[str]:
        """Load the embedder of every collection and embed one text, so no first search pays for it.

        A long-lived process (``ranklock serve``, ``ranklock mcp``) runs it in the background while it
        already serves: a lexical search needs no model, and a search that does waits for this load.
        A model of the home's embedding service is then *held* until :meth:`close`: the service's idle
        limit does not unload it under a server (ranklock.embed.served).  Returns one line per
        embedder: what was loaded and how long it took, or why it could not be; :attr:`warm_state`
        says the same to ``/readyz`` meanwhile.
        """
        lines: list[str] = []
        self.warm_state = {"state": "loading", "lines": lines}
        done: set[str] = set()
        for row in self.collections():
            try:
                emb = self._collection_embedder(self.collection(row.name))
                if emb.id in done:
                    continue
                t = time.perf_counter()
                emb.embed(["ranklock"])
                done.add(emb.id)
                hold = getattr(emb, "hold", None)
                held = hold is not None and hold()
                where = f" (in the embedding service of {self.settings.home}, held while this engine is open)"
                lines.append(f"embedder {emb.id} loaded in {time.perf_counter() - t:.1f} s{where if held else ''}")
            except RanklockError as exc:
                lines.append(f"collection {row.name!r}: embedder not loaded: {exc}")
        self.warm_state = {"state": "loaded", "lines": lines}
        return lines

    # -- collections ----------------------------------------------------------------

    def create_collection(
        self,
        name: str,
        *,
        language: str = "english",
        accent: str = "sensitive",
        fields: Sequence[str | FieldSpec] = (),
        index: str = "hnsw",
        index_params: dict[str, Any] | None = None,
        chunker: ChunkerParams | None = None,
        embedder: str | None = None,
        search_defaults: dict[str, Any] | None = None,
        window: str | None = None,
        partition: str | None = None,
        shards: int | None = None,
        if_missing: bool = False,
        field_inference: dict[str, Any] | None = None,
    ) -> CollectionInfo:
        """Create a collection; its language, fields, index and embedder are fixed for its lifetime.

        With ``if_missing`` an existing collection with exactly these settings
        is returned instead of an error (safe when several processes create it
        at once); one with other settings is a ConfigError naming them.
        ``field_inference`` records how ``fields`` were inferred (:meth:`ingest` sets it).
        ``window`` (``FIELD:UNIT``, a date or timestamp field and day, week, month or year) and
        ``partition`` (a keyword or int field) cut its segments (ranklock.segmenting): a search
        whose filter pins the field reads only the segments it can match.
        ``shards`` spreads its segments over a Citus cluster's workers (ranklock.snapshot.shards): by
        default two per worker when the database is a Citus coordinator with workers, none otherwise;
        ``0`` keeps ordinary tables.
        """
        from .collection import insert_new_collection, new_collection_values
        from .snapshot.shards import resolve_shards
        from .store.collections import text_search_configs

        values = new_collection_values(
            name,
            language=language,
            accent=accent,
            fields=fields,
            index=index,
            index_params=index_params,
            chunker=chunker,
            search_defaults=search_defaults,
            configs=text_search_configs(self.db),
            embedder=lambda: self.embedder_for(embedder),
            normalization=NORMALIZATION,
            field_inference=field_inference,
            window=window,
            partition=partition,
            shards=resolve_shards(self.db, shards),
        )
        insert_new_collection(self.db, values, if_missing=if_missing)
        return self.collection(name)

    def drop_collection(self, name: str) -> CollectionDrop:
        """Drop collection ``name``: every snapshot, segment, document version and log entry of it; not undone.

        Under its writer lock (a running ingest finishes first; a waiting one then finds no collection).
        The drop is recorded, so a replay of one of its log entries says it was dropped; its canary
        baselines go too (ranklock.snapshot.collection_drop says what stays: the shared embedding cache).
        """
        from .eval.canary import canary_paths
        from .snapshot.collection_drop import drop_collection

        out = drop_collection(self.db, self.collection(name), lock_wait=self.settings.lock_wait)
        for path in canary_paths(self.settings.home, name):
            path.unlink(missing_ok=True)
        return out

    def collection(self, name: str) -> CollectionInfo:
        return read_collection(self.rdb, name)

    def collections(self) -> list[CollectionSummary]:
        """Every collection by name, with its active snapshot's document and chunk counts.

        A collection whose first ingest died before a snapshot was ready is removed first
        (ranklock.snapshot.abandoned).
        """
        from .snapshot.abandoned import reap_abandoned
        from .store.collections import list_collections

        reap_abandoned(self.db)
        return list_collections(self.db)

    # -- ingest -----------------------------------------------------------------------

    @refusals_as(IngestError)
    def ingest(
        self,
        name: str,
        source: str | Path | Sequence[Document] | FileLoad,
        *,
        replace: bool = False,
        activate: bool = True,
        allow_empty: bool = False,
        progress: Progress | None = None,
        create: dict[str, Any] | None = None,
        allow_purged: bool = False,
        mirror: bool = True,
    ) -> IngestReport:
        """Ingest documents into a new snapshot of ``name`` (created if missing) and activate it.

        By default the new snapshot holds the active snapshot's documents plus
        those given (same id: the given version wins).  ``replace=True`` makes
        the snapshot hold exactly the given documents.  A document whose text
        is empty is skipped (it could never be found) and named in
        ``skipped``.  A snapshot with no document at all is refused unless
        ``allow_empty``.

        Writers of one collection run one at a time (ranklock.snapshot.writer):
        the given documents are chunked and embedded first, with no lock held;
        then, under the collection's writer lock, the new snapshot is built from
        the snapshot active at that moment (its ``parent_id``) and activated.
        A ``activate=False`` build has the same parent; it does not change what
        the next ingest builds from.

        A collection this call creates gets ``create``'s settings; without
        ``create["fields"]`` its typed fields are inferred from the documents'
        metadata (ranklock.ingest.infer), recorded with the collection and in
        its manifests, and reported in ``field_inference``.

        An input the active snapshot already holds builds nothing: ``built`` is
        False and the active snapshot stays.  A document a purge erased is left
        out (``purged_skipped``) unless ``allow_purged``; one deleted earlier is
        added back and named (``deleted_readded``).

        A folder of files (a path, or a read of one: ``ranklock.ingest.formats.load_files``) is a
        *source*, known by its real path, and is mirrored (ranklock.snapshot.sources): the
        documents it gave before whose files are gone are removed from the new snapshot and named
        (``removed_ids``); documents of other sources are untouched; a file that is there but
        cannot be read keeps its version (``kept_unreadable``).  ``mirror=False`` removes nothing.
        A folder that holds nothing now removes nothing unless ``allow_empty`` (a drive not mounted
        looks empty); one that does not exist is refused.  ``replace`` is the mirror of the whole
        collection: what is not given goes, whatever its source.
        """
        from .snapshot.ingest_run import run_ingest

        return run_ingest(
            self.db,
            name,
            source,
            create=self.create_collection,
            embedder=self.embedders.for_collection,
            retain=self._retain,
            lock_wait=self.settings.lock_wait,
            replace=replace,
            activate=activate,
            allow_empty=allow_empty,
            progress=progress,
            create_options=create,
            allow_purged=allow_purged,
            mirror=mirror,
            purge_key=self._purge_key(),
        )

    @refusals_as(IngestError)
    def delete(self, name: str, ids: Sequence[str], *, missing_ok: bool = False) -> DeleteReport:
        """A new active snapshot of ``name`` without the documents ``ids`` (their versions masked, nothing rebuilt).

        An id the active snapshot does not hold is an error (nothing changes) unless ``missing_ok``.
        Other snapshots keep the documents: ``purge`` erases one everywhere.
        """
        from .snapshot.ingest import delete_documents

        coll = self.collection(name)
        out = delete_documents(
            self.db,
            coll,
            list(ids),
            self._collection_embedder(coll),
            lock_wait=self.settings.lock_wait,
            missing_ok=missing_ok,
        )
        return DeleteReport(
            collection=name,
            snapshot_id=out.build.snapshot_id,
            parent_id=out.parent_id,
            deleted=out.deleted,
            missing=out.missing,
            merged=out.merge.build.snapshot_id if out.merge is not None else None,
            snapshots_dropped=self._retain(coll),
        )

    @refusals_as(IngestError)
    def purge(self, name: str, ids: Sequence[str]) -> PurgeOutcome:
        """Erase the documents ``ids`` from every snapshot, segment, cache and log of ``name`` (ranklock.snapshot.purge).

        Unlike :meth:`delete`, no snapshot keeps them: for an owner who asks to be forgotten.
        The purge is recorded (ids hashed, never the content), so a replay of a removed log
        entry says it was purged.  The bytes go too: the tables that held them are rewritten
        and the WAL retired; ``unreached`` says what it could not reach.  The canary records
        under the home forget the ids.
        """
        from .eval.canary import forget_documents
        from .snapshot.purge import PurgeContext, purge_documents
        from .store.horizon import local_standby_nudges

        context = PurgeContext(
            key=self._purge_key(),
            owned=self.server is not None or self.cluster is not None,
            wait=self.settings.purge_wait,
            # The home's local standbys stream from its embedded server (never from a cluster or a DSN's).
            nudges=local_standby_nudges(self.settings.home) if self.server is not None else {},
        )
        out = purge_documents(
            self.db, self.collection(name), list(ids), lock_wait=self.settings.lock_wait, context=context
        )
        records = forget_documents(self.settings.home, name, ids)
        return dataclasses.replace(out, canary_records=tuple(str(p) for p in records))

    def merge(self, name: str, *, everything: bool = False) -> MergeReport:
        """Fold the active snapshot's small segments into one (``everything``: all of them), as a new active snapshot.

        The merge holds the same documents and gives the same exact-mode results
        (ranklock.snapshot.merge); ``snapshot_id`` is None when there was nothing to merge.
        """
        from .snapshot.merge import merge

        coll = self.collection(name)
        t = time.perf_counter()
        out = merge(
            self.db, coll, self._collection_embedder(coll), lock_wait=self.settings.lock_wait, everything=everything
        )
        sid = out.build.snapshot_id if out is not None else None
        dropped = self._retain(coll) if out is not None else ()
        return MergeReport(name, sid, out.segments if out is not None else (), time.perf_counter() - t, dropped)

    # -- snapshot retention (ranklock.snapshot.retention) ------------------------------------

    def _retain(self, coll: CollectionInfo) -> tuple[int, ...]:
        """Apply the collection's snapshot retention after a write; the snapshots it dropped."""
        return self.prune_snapshots(coll.name).dropped

    def _replica_snapshots(self, name: str) -> dict[int, str]:
        return self.router.snapshots_in_use(name) if self.router is not None else {}

    def prune_snapshots(self, name: str, *, dry_run: bool = False) -> RetentionPlan:
        """Drop the snapshots of ``name`` its retention policy no longer keeps (``dry_run``: only say which).

        Every ingest, delete and merge runs it; the plan says why each kept snapshot stays (active,
        previous, pinned by a log entry, named by a replica, one of the newest N, young enough).
        """
        from .snapshot.retention import apply_retention

        coll = self.collection(name)
        return apply_retention(
            self.db, coll, self._replica_snapshots(name), lock_wait=self.settings.lock_wait, dry_run=dry_run
        )

    def set_snapshot_retention(
        self, name: str, *, keep: int | None = SNAPSHOT_KEEP, keep_for: float | str | None = None
    ) -> SnapshotRetention:
        """Keep the newest ``keep`` snapshots of ``name`` and those younger than ``keep_for`` (seconds or
        ``"7d"``); both None: keep every snapshot.  Applies from the next write (or :meth:`prune_snapshots`)."""
        from .settings import parse_duration
        from .snapshot.retention import SnapshotRetention, set_retention

        seconds = parse_duration(keep_for, what="keep_for") if keep_for is not None else None
        policy = SnapshotRetention(keep=keep, keep_for_s=seconds)
        set_retention(self.db, self.collection(name), policy)
        return policy

    # -- snapshots -------------------------------------------------------------------

    def activate(self, name: str, snapshot_id: int) -> Activation:
        """Make ``snapshot_id`` the active snapshot of ``name``, atomically; returns which was active before.

        It holds the collection's writer lock (ranklock.snapshot.writer): it
        runs before or after a concurrent ingest, never in the middle of one.
        """
        from .snapshot import lifecycle

        return lifecycle.activate(self.db, self.collection(name), snapshot_id, self.settings.lock_wait)

    def _snapshot_for(self, coll: CollectionInfo, snapshot: int | None) -> dict[str, Any]:
        # Read where the search reads (a replica once it has replayed the request's position).
        from .snapshot.lifecycle import resolve

        return resolve(self.rdb, coll, snapshot)

    def document(
        self, name: str, doc_id: str, *, snapshot: int | None = None, show_purge: bool = False
    ) -> StoredDocument:
        """The stored version of ``doc_id`` in ``snapshot`` (default: the active one); read-only.

        An id the snapshot lacks is ``NotFound`` with the same message whether it was never stored or
        purged: a reader (MCP's ``get_document``) must not learn that it was there.  ``show_purge``
        (an administrator: ``ranklock document get``) names the purge that erased it instead.
        """
        from .snapshot.document import get_document

        coll = self.collection(name)
        sid = int(self._snapshot_for(coll, snapshot)["id"])
        return get_document(self.db, coll, sid, doc_id, purges=self._purge_key() if show_purge else None)

    def _purge_key(self) -> PurgeKey:
        """The home's purge key (``<home>/purge.key``, made on first use): what purge records' id hashes are keyed with."""
        from .snapshot.purge_key import load_purge_key

        return load_purge_key(self.settings.home)

    # Snapshot operations live in ranklock.snapshot.lifecycle; these are thin doors to them.

    def list_snapshots(self, name: str) -> list[SnapshotInfo]:
        """Every snapshot of ``name``, oldest first, the active and previous ones marked."""
        from .snapshot import lifecycle

        return lifecycle.list_snapshots(self.db, self.collection(name))

    def snapshot_info(self, name: str, snapshot_id: int | None = None) -> SnapshotDetail:
        """One snapshot (default: the active one) with its manifest and build statistics."""
        from .snapshot import lifecycle

        return lifecycle.snapshot_info(self.db, self.collection(name), snapshot_id)

    def rollback(self, name: str) -> Activation:
        """Re-activate the previous snapshot of ``name``, atomically."""
        from .snapshot import lifecycle

        return lifecycle.rollback(self.db, self.collection(name), self.settings.lock_wait)

    def diff_snapshots(self, name: str, old: int, new: int) -> SnapshotDiff:
        """Documents added/removed/changed and manifest fields changed from ``old`` to ``new``."""
        from .snapshot import lifecycle

        return lifecycle.diff_snapshots(self.db, self.collection(name), old, new)

    def drop_snapshot(self, name: str, snapshot_id: int) -> DropReport:
        """Drop a non-active snapshot and collect document versions no snapshot references."""
        from .snapshot import lifecycle

        return lifecycle.drop_snapshot(self.db, self.collection(name), snapshot_id, self.settings.lock_wait)

    def lexical_stats(self, name: str, snapshot_id: int | None = None, *, force: bool = False) -> LexicalStatsReport:
        """Build, complete or (``force``) rebuild the BM25 tables of a snapshot's segments (default: the active one).

        Segments without a filter table (ranklock.snapshot.filter_table) get one.
        The tables are derived from each segment's immutable chunk table alone:
        building them changes no score (scores use the snapshot's statistics,
        see ranklock.snapshot.lexical_stats).  A segment of an older layout is
        rebuilt.
        """
        from .snapshot import lifecycle

        return lifecycle.lexical_stats(self.db, self.collection(name), snapshot_id, force=force)

    def manifest(self, name: str, snapshot_id: int | None = None) -> dict[str, Any]:
        """The manifest of a snapshot (default: the active one)."""
        from .snapshot import lifecycle

        return lifecycle.manifest(self.db, self.collection(name), snapshot_id)

    def activate_gated(
        self, name: str, snapshot_id: int, golden: str | Path, *, rsi_threshold: float = 0.9
    ) -> GatedActivation:
        """Activate ``snapshot_id`` only if the promotion gate on ``golden`` passes; returns the gate report."""
        from .eval.gate import promotion_gate
        from .snapshot import lifecycle
        from .snapshot.writer import writing

        coll = self.collection(name)
        # The gate compares against the active snapshot: hold the writer lock from
        # the comparison to the switch, so no ingest changes the active one between.
        with writing(self.db, coll.id, name, self.settings.lock_wait):
            report = promotion_gate(self, name, snapshot_id, golden, rsi_threshold=rsi_threshold)
            passed = bool(report.passed)
            previous = self.collection(name).active_snapshot_id
            if passed:
                previous = lifecycle.activate(self.db, coll, snapshot_id, self.settings.lock_wait).before
        return GatedActivation(name, snapshot_id, passed, report.to_dict(), previous)

    def log_status(self) -> LogStatus:
        """The query log: rows, bytes, oldest entry, retention watermark and policy (``ranklock db status``)."""
        from .store.log_retention import RetentionPolicy, log_status

        return log_status(self.db, RetentionPolicy.from_settings(self.settings))

    def logs_status(self) -> dict[str, LogStatus]:
        """:meth:`log_status` of the query log and of the answer log, by name (``query_log``, ``answer_log``)."""
        from .store.log_retention import RetentionPolicy, logs_status

        return logs_status(self.db, RetentionPolicy.from_settings(self.settings))

    def prune_log(self, *, older_than: float | None = None, max_bytes: int | None = None) -> PruneReport:
        """Delete entries of both logs beyond the retention policy (or the stricter limits given), oldest first.

        ``older_than=0`` deletes every entry (in the settings a 0 means no limit); pinned entries stay.
        """
        from .store.log_retention import RetentionPolicy, prune_all

        base = RetentionPolicy.from_settings(self.settings)
        policy = RetentionPolicy(
            max_age_s=base.max_age_s if older_than is None else older_than,
            max_bytes=base.max_bytes if max_bytes is None else max_bytes,
            everything=older_than == 0,
        )
        return prune_all(self.db, policy)

    def pin(self, *, query_id: int | None = None, answer_id: str | None = None, pinned: bool = True) -> int:
        """Pin (``pinned=False``: unpin) a logged query or answer: log retention keeps it and snapshot
        retention the snapshot it ran against, so it stays replayable.  Returns that snapshot's id."""
        from .store.log_retention import pin_entry

        return pin_entry(self.db, query_id=query_id, answer_id=answer_id, pinned=pinned)

    # -- API tokens (ranklock.store.tokens): who may call `ranklock serve` ------------------

    def create_token(self, name: str, scopes: Sequence[str] = ("read",)) -> tuple[TokenInfo, str]:
        """A new API token with ``scopes``; returns its record and its secret, which is shown only now."""
        from .store.tokens import create_token

        return create_token(self.db, name, scopes)

    def list_tokens(self) -> list[TokenInfo]:
        """Every API token, live and revoked (never their secrets)."""
        from .store.tokens import list_tokens

        return list_tokens(self.db)

    def revoke_token(self, which: str) -> TokenInfo:
        """Revoke the live token named (or numbered) ``which``; a running server refuses it from its next request."""
        from .store.tokens import revoke_token

        return revoke_token(self.db, which)

    def replica_status(self) -> list[ReplicaStatus]:
        """The primary and each read replica: state, replay position, lag in bytes and seconds."""
        from .store.replicas import ReadRouter

        return (self.router or ReadRouter(self.db, [], wait=0)).status()

    def readiness(self) -> Readiness:
        """Whether the database answers and every active snapshot can be read (``GET /readyz``)."""
        from dataclasses import replace

        from .snapshot.health import readiness

        return replace(readiness(self.db, self.settings.statement_timeout), models=dict(self.warm_state))

    def replay(self, query_id: int, *, query: str | None = None) -> ReplayReport | RerankedReplay:
        """Re-run logged query ``query_id`` on its snapshot; a :class:`ReplayReport` says if it is identical.

        ``query``: the text of an entry logged with hashes only (RANKLOCK_LOG_TEXT=hash), checked against its sha256.
        """
        from .search.replay import replay_steps
        from .store.steps import run_steps

        steps = replay_steps(
            self.db, self.settings, self.searching.steps, query_id, query=query, reranker=self.reranker
        )
        return run_steps(self.db, steps)

    # -- search ------------------------------------------------------------------------

    def _query_vector(self, coll: CollectionInfo, text: str) -> np.ndarray:
        """The query's embedding, from the cache when this exact text was embedded before (benchmarks use it)."""
        from .search.embedding import query_vector

        # Check the loaded embedder's checksum first, even when the vector is
        # cached: a query must be refused with a model other than the snapshot's.
        return query_vector(self.rdb, coll, self._collection_embedder(coll), text, primary=self.db)

    @refusals_as(QueryError)
    def search_sql(
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
        from .store.steps import run_steps

        req = SearchRequest.of(name, query, k=k, mode=mode, filter=filter, snapshot=snapshot, as_of=as_of, **params)
        q, p = run_steps(self.rdb, sql_steps(self.searching.services(), req))
        with self.rdb.connection() as conn:
            return q.as_string(conn), p

    @refusals_as(QueryError)
    def search(
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
        """Search ``name`` and return the fused, tie-broken top ``k`` documents.

        ``filter`` (hard constraints), ``snapshot`` (default: the active one), ``as_of``, and any
        :class:`~ranklock.settings.SearchParams` field (``depth=100``, ``ef_search=200``, ...).
        With read replicas the search runs on one that has replayed the primary's position
        (ranklock.store.replicas); ``served_by`` says where.  ``rerank=N`` reorders the top N
        fused hits with :meth:`reranker` (ranklock.search.rerank).  ``offset`` skips that many
        results: the page of a search of ``offset + k`` (:meth:`SearchResult.page`).  Both are
        stages of the one search (ranklock.search.pipeline), logged once, as served.
        """
        from .search.pipeline import Stages

        req = SearchRequest.of(name, query, k=k, mode=mode, filter=filter, snapshot=snapshot, as_of=as_of, **params)
        return self.searching.run(req, Stages(rerank, offset))

    # -- ask (ranklock.ask) -----------------------------------------------------------------

    def ask(
        self,
        name: str,
        question: str,
        *,
        filter: Any = None,
        as_of: datetime | str | None = None,
        snapshot: int | None = None,
        chunks: int = REQUEST.chunks,
        generator: str | Generator = "extractive",
        mode: str = REQUEST.mode,
        rerank: int | None = None,
    ) -> Answer:
        """Answer ``question`` from the top ``chunks`` chunks of ``search``, with citations; logged for replay.

        ``mode`` (evaluation only: ``eval --answers`` compares Ask over each retrieval mode) replaces hybrid.
        ``rerank=N`` reranks the top N fused chunks (:meth:`reranker`) before the top ``chunks`` are taken.

        >>> eng.ask("journal", "who reviewed XJ-900?").to_json()   # doctest: +SKIP
        """
        from .ask.log import LogPolicy
        from .ask.run import ask
        from .store.log_retention import ANSWER_LOG, RetentionPolicy, after_logging

        coll = self.collection(name)
        policy = LogPolicy(
            hashed=self.settings.log_text == "hash",
            logged=after_logging(self.db, ANSWER_LOG, RetentionPolicy.from_settings(self.settings)),
        )
        return ask(
            self.db,
            coll,
            self.searching,
            question,
            filter=filter,
            as_of=as_of,
            snapshot=snapshot,
            chunks=chunks,
            generator=generator,
            log=bool(self.settings.log_queries),
            mode=mode,
            embedder=functools.partial(self.embedders.for_collection, coll),
            rerank=rerank,
            log_policy=policy,
        )

    def replay_answer(self, answer_id: str, *, question: str | None = None) -> AnswerReplay:
        """Re-run logged answer ``answer_id``; the report says per layer (retrieval, prompt, answer) what changed.

        ``question``: the question of an answer logged with hashes only (RANKLOCK_LOG_TEXT=hash).
        """
        from .ask.log import replay_answer

        return replay_answer(
            self.db,
            functools.partial(read_collection, self.db),
            self.searching,
            answer_id,
            self.embedders.for_collection,
            question=question,
        )

    # -- structured requests (ranklock.plan) ---------------------------------------------

    def plan(self, name: str, request: str, *, extractor: Any = None) -> Plan:
        """Turn ``request`` into an answer, a clarification request or a refusal for collection ``name``.

        >>> eng.plan("resumes", "python, 3+ years, no agency recruiters").kind   # doctest: +SKIP
        'answer'
        """
        from .domains import pack_for
        from .plan.run import check_request, plan_request, read_schema

        check_request(request)
        coll = self.collection(name)
        return plan_request(read_schema(self.db, coll, pack_for(coll)), request, extractor, name)

    def search_request(
        self,
        /,  # positional-only: ``**params`` takes any name, and AsyncEngine's twin is derived from this signature
        name: str,
        request: str,
        *,
        k: int = REQUEST.k,
        explain: bool = False,
        extractor: Any = None,
        **params: Any,
    ) -> PlannedSearch:
        """Plan ``request`` and run it when it is an answer (constraints as the filter, preferences as ranking)."""
        from .domains import pack_for
        from .plan.run import check_request, read_schema, search_request

        check_request(request)
        coll = self.collection(name)
        schema = read_schema(self.db, coll, pack_for(coll))
        return search_request(
            self.searching, self.db, coll, schema, request, k=k, explain=explain, extractor=extractor, **params
        )
