"""Exact replay of a logged query: the same request on the same snapshot, every recorded list compared.

:func:`replay_steps` re-runs a logged request against the snapshot it ran on, through the one
pipeline (ranklock.search.pipeline) with the result cache bypassed and nothing logged, and
compares every recorded list (each branch's candidates, the final order) and the result digest::

    >>> res = eng.search("docs", "how do vaccines work", k=5)
    >>> eng.replay(res.query_id).identical
    True

An entry of a reranked search also gets its rerank layer compared (:class:`RerankedReplay`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, QueryError
from ..store.steps import Fetch, Offload, Steps
from ..validation import short_repr
from .log import replaying, text_sha256
from .pipeline import Stages
from .request import SearchRequest
from .rerank import rerank_result

if TYPE_CHECKING:
    from ..rerank.base import Reranker
    from ..settings import Settings
    from ..store.database import Database
    from .results import SearchResult

__all__ = ["RerankedReplay", "ReplayReport", "replay_rerank_steps", "replay_steps", "replay_text"]


@dataclass
class ReplayReport:
    query_id: int
    collection: str
    snapshot_id: int | None
    identical: bool
    logged_digest: str
    replayed_digest: str
    manifest_hash: dict[str, str | None]
    differences: list[dict[str, Any]]
    request: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "collection": self.collection,
            "snapshot_id": self.snapshot_id,
            "identical": self.identical,
            "logged_digest": self.logged_digest,
            "replayed_digest": self.replayed_digest,
            "manifest_hash": self.manifest_hash,
            "differences": self.differences,
            "request": self.request,
        }


def _diff_lists(where: str, logged: list[Any], replayed: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(max(len(logged), len(replayed))):
        a = logged[i] if i < len(logged) else None
        b = replayed[i] if i < len(replayed) else None
        if a != b:
            out.append({"where": where, "position": i + 1, "logged": a, "replayed": b})
    return out


def replay_text(req: dict[str, Any], key: str, given: str | None, *, entry: str, option: str, stored: str) -> str:
    """The text a replay re-runs: ``req[key]``, or for an entry logged with hashes only ``given``, once its sha256
    matches ``req[key + "_sha256"]``; QueryError otherwise, saying what is stored (``stored``) and how to replay.

    ``entry`` names the entry ("query 12", "answer 3f2c…"), ``option`` the CLI option that gives the text.
    Shared by the query log and the answer log (ranklock.ask.log).
    """
    what = key.replace("_", " ")
    if key in req:
        if given is not None and given != req[key]:
            raise QueryError(f"{entry} was logged with its {what} {short_repr(req[key])}; replay it without {option}.")
        return str(req[key])
    digest = str(req.get(f"{key}_sha256"))
    if given is None:
        raise QueryError(
            f"{entry} was logged with hashes only (RANKLOCK_LOG_TEXT=hash): its {what} is not stored, only its "
            f"sha256 {digest[:12]}…. {stored} replays once the {what} is given again ({option} TEXT); its sha256 "
            "must match."
        )
    if text_sha256(given) != digest:
        raise QueryError(
            f"the {what} given for {entry} is not the one logged: its sha256 is {text_sha256(given)[:12]}…, the "
            f"log's {digest[:12]}…. Give the exact {what} (same spaces and case)."
        )
    return given


def replay_steps(
    db: Database,
    settings: Settings,
    search: Callable[[SearchRequest, Stages], Steps[SearchResult]],
    query_id: int,
    *,
    query: str | None = None,
    reranker: Callable[[], Reranker] | None = None,
) -> Steps[ReplayReport | RerankedReplay]:
    """Re-run logged query ``query_id`` against its snapshot (``search``: the pipeline as steps) and compare it.

    ``query``: the text of an entry logged with hashes only (checked against its sha256).  An entry of
    a reranked search also gets its rerank layer compared (ranklock.search.rerank; ``reranker`` reranks
    an entry logged before the stage was logged with its search).  ``db`` (the sync
    primary) only serves the rare message of a pruned entry, off the event loop.
    """
    if not isinstance(query_id, int) or query_id < 1:
        raise QueryError(f"query id must be a positive integer, got {query_id!r}.")
    rows = yield Fetch("SELECT * FROM ranklock.query_log WHERE id = %s", [query_id], primary=True)
    if not rows:
        purged = yield Fetch(
            "SELECT id, at FROM ranklock.purges WHERE %s = ANY (query_ids) ORDER BY id LIMIT 1",
            [query_id],
            primary=True,
        )
        if purged:
            raise NotFound(
                f"query {query_id} touched a document that purge {purged[0]['id']} erased at "
                f"{purged[0]['at'].isoformat(timespec='seconds')}; its log entry was removed with the document, "
                "so it cannot be replayed (`ranklock purge` erases a document from every snapshot and log)."
            )
        dropped = yield Fetch(
            "SELECT collection, at FROM ranklock.collection_drops WHERE %s = ANY (query_ids) ORDER BY id LIMIT 1",
            [query_id],
            primary=True,
        )
        if dropped:
            raise NotFound(
                f"query {query_id} searched collection {dropped[0]['collection']!r}, which was dropped at "
                f"{dropped[0]['at'].isoformat(timespec='seconds')} with its snapshots and log entries; it cannot be "
                "replayed."
            )
        from ..store.log_retention import RetentionPolicy, pruned_through

        watermark: int = yield Offload(lambda: pruned_through(db))
        if query_id <= watermark:
            policy = RetentionPolicy.from_settings(settings).describe()
            raise NotFound(
                f"query {query_id} was pruned from the query log by its retention policy (every entry up to id "
                f"{watermark} is gone; the policy keeps {policy}). Its request and recorded results are no longer "
                "stored, so it cannot be replayed or compared. Run the search again to log it anew; raise "
                "RANKLOCK_LOG_RETENTION or RANKLOCK_LOG_MAX_BYTES to keep entries longer."
            )
        last = yield Fetch("SELECT max(id) AS m FROM ranklock.query_log", primary=True)
        raise NotFound(
            f"no logged query with id {query_id} (the log holds ids up to {last[0]['m'] if last else None}); "
            "searches are logged unless log_queries is off."
        )
    row = rows[0]
    req: dict[str, Any] = row["request"]
    text = replay_text(
        req,
        "query",
        query,
        entry=f"query {query_id}",
        option="--query",
        stored="What is still stored (the snapshot, the parameters, the filter, every branch's ids, ranks and scores, "
        "the result digest)",
    )
    sid = row["snapshot_id"]
    exists = yield Fetch("SELECT status, manifest_hash FROM ranklock.snapshots WHERE id = %s", [sid], primary=True)
    if not exists:
        raise NotFound(
            f"query {query_id} ran against snapshot {sid} of {row['collection']!r}, which has been dropped (by "
            "`snapshot drop` or by snapshot retention); a replay needs the snapshot it ran against. Pin an entry "
            "whose replay must keep working: `ranklock log pin ID` keeps it and its snapshot."
        )
    from ..store.timeout import timeout_override

    logged_timeout = ((row["result"] or {}).get("params") or {}).get("statement_timeout_s")
    # The entry's stages, as logged beside the request (an entry from before they were logged there has none:
    # its rerank layer is in the rerank column, replayed below from the fused result).
    stages = Stages(req.get("rerank"), int(req.get("offset") or 0))
    request = SearchRequest.of(
        row["collection"],
        text,
        k=req["k"],
        mode=req["mode"],
        filter=req.get("filter"),
        snapshot=sid,
        as_of=req.get("as_of"),
        **req.get("params", {}),
    )
    # The context variables are set while the generator runs: in the driver's thread or task.
    with replaying() as captured, timeout_override(logged_timeout):
        replayed = yield from search(request, stages)
    fresh = captured[-1]
    logged: dict[str, Any] = row["result"]
    diffs = _diff_lists("final", logged.get("final") or [], fresh["final"])
    lb: dict[str, Any] = logged.get("branches") or {}
    fb: dict[str, Any] = fresh["branches"] or {}
    for branch in sorted(set(lb) | set(fb)):
        diffs += _diff_lists(f"branch:{branch}", lb.get(branch) or [], fb.get(branch) or [])
    if row["manifest_hash"] != fresh["manifest_hash"]:
        diffs.append(
            {
                "where": "manifest_hash",
                "position": None,
                "logged": row["manifest_hash"],
                "replayed": fresh["manifest_hash"],
            }
        )
        # A purge since the query ran corrected the snapshot (and its manifest): say so.
        later = yield Fetch(
            "SELECT id FROM ranklock.purges WHERE %s = ANY (snapshots) AND at > %s ORDER BY id",
            [sid, row["logged_at"]],
            primary=True,
        )
        if later:
            diffs.append(
                {"where": "purge", "position": None, "logged": None, "replayed": [int(r["id"]) for r in later]}
            )
    if row["result_digest"] != fresh["digest"] and not diffs:
        # Same ids, ranks and scores but other bytes: texts, warnings or echoed parameters.
        diffs.append(
            {"where": "result_json", "position": None, "logged": row["result_digest"], "replayed": fresh["digest"]}
        )
    report = ReplayReport(
        query_id=query_id,
        collection=row["collection"],
        snapshot_id=sid,
        identical=not diffs,
        logged_digest=row["result_digest"],
        replayed_digest=fresh["digest"],
        manifest_hash={"logged": row["manifest_hash"], "replayed": fresh["manifest_hash"]},
        differences=diffs,
        request=req,
    )
    if row.get("rerank") is None:
        return report
    layered: RerankedReplay = yield from replay_rerank_steps(
        report, row["rerank"], replayed, fresh.get("rerank"), reranker
    )
    return layered


@dataclass
class RerankedReplay:
    """A search replay with its rerank layer: the fusion's report and the rerank comparison."""

    report: ReplayReport
    rerank: dict[str, Any]

    @property
    def identical(self) -> bool:
        return self.report.identical and bool(self.rerank["identical"])

    @property
    def differences(self) -> list[dict[str, Any]]:
        """The fusion's differences, then the rerank layer's (``where`` starts with ``rerank:``)."""
        return [*self.report.differences, *({"position": None, **d} for d in self.rerank["differences"])]

    def __getattr__(self, name: str) -> Any:
        # Everything else (query_id, snapshot_id, digests, differences) is the fusion's report.
        return getattr(self.report, name)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.report.to_dict(),
            "identical": self.identical,
            "differences": self.differences,
            "rerank": self.rerank,
        }


def replay_rerank_steps(
    report: ReplayReport,
    logged: Mapping[str, Any],
    replayed: SearchResult,
    fresh: Mapping[str, Any] | None,
    reranker: Callable[[], Reranker] | None,
) -> Steps[RerankedReplay]:
    """``report`` with its rerank layer: the ``logged`` record against the replay's (``fresh``, when the replay ran
    the stage), or, for an entry logged before the stage was (its ``replayed`` result the fused one), the
    reranker run again on it."""
    if fresh is None:
        if reranker is None:
            raise QueryError("this entry was reranked; replay it with an engine that has the reranker.")
        ranker = reranker()
        n, k = int(logged["n"]), int(logged["k"])
        again: SearchResult = yield Offload(lambda: rerank_result(replayed, ranker, n, k))
        record = dict(again.params["rerank"])
        fresh = {**record, "k": again.k, "digest": hashlib.sha256(again.to_json().encode("utf-8")).hexdigest()}
    differences = [
        {"where": f"rerank:{key}", "logged": logged.get(key), "replayed": fresh.get(key)}
        for key in ("reranker", "n", "k", "order", "digest")
        if logged.get(key) != fresh.get(key)
    ]
    layer = {"identical": not differences, "differences": differences, "logged": dict(logged), "replayed": dict(fresh)}
    return RerankedReplay(report=report, rerank=layer)
