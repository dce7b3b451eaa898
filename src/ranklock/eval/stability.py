"""The Retrieval Stability Index: does the same query give the same answer, run after run?

Each query is searched ``runs`` times (``concurrency`` threads at once, runs
interleaved, all on one pinned snapshot).  Per query we take every pair of
runs and compute the Jaccard similarity of their top-k id sets, and the
rank-biased overlap of their rankings; the query's value is the mean over
pairs.  Then:

* ``rsi``: the mean over queries of the pairwise Jaccard, the Retrieval
  Stability Index (1.0: every run returned the same top-k set);
* ``rbo``: the same with rank-biased overlap, which also sees reordering;
* ``identical_share``: the share of queries whose responses were byte-identical
  in every run (the canonical JSON of the result, timings left out).

:func:`compare_configurations` measures the same overlap between two
configurations instead of between repeated runs: two snapshots, or two sets
of search parameters (``ef_search`` 40 vs 400, HNSW vs an exact scan where the
engine offers one).

    >>> rep = measure_stability(eng, "scifact", load_queries("data/scifact"), runs=20, concurrency=4)  # doctest: +SKIP
    >>> rep.rsi, rep.passed                                                                            # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError, QueryError
from ..settings import REQUEST
from .metrics import mean
from .overlap import jaccard, rank_biased_overlap
from .run import snapshot_info
from .target import EvalTarget

if TYPE_CHECKING:
    from ..search.protocol import Searcher
    from ..settings import Settings

__all__ = [
    "DEFAULT_THRESHOLD",
    "StabilityReport",
    "collect_runs",
    "compare_configurations",
    "measure_stability",
    "stability_of_runs",
]

DEFAULT_THRESHOLD = 0.9

Query = tuple[str, str, Any]  # (qid, text, filter)


@dataclass
class StabilityReport:
    """Overlap between repeated runs (or two configurations) and the verdict against a threshold."""

    rsi: float
    rbo: float
    identical_share: float
    queries: int
    runs: int
    k: int
    threshold: float
    passed: bool
    kind: str = "repeat"
    concurrency: int = 1
    mode: str = REQUEST.mode
    collection: str = ""
    snapshot: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    unstable: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "collection": self.collection,
            "mode": self.mode,
            "k": self.k,
            "runs": self.runs,
            "concurrency": self.concurrency,
            "queries": self.queries,
            "rsi": self.rsi,
            "rbo": self.rbo,
            "identical_share": self.identical_share,
            "threshold": self.threshold,
            "passed": self.passed,
            "snapshot": self.snapshot,
            "params": self.params,
            "unstable": self.unstable,
            "seconds": round(self.seconds, 3),
            **self.extra,
        }


def stability_of_runs(
    runs: Sequence[Mapping[str, Sequence[str]]],
    *,
    k: int,
    payloads: Sequence[Mapping[str, bytes]] | None = None,
    p: float = 0.9,
) -> dict[str, Any]:
    """Pure core: RSI, RBO and identical share of several runs (each: qid -> ranked ids).

    Queries are those of the first run.  Without ``payloads`` "identical" means
    the same ranked id list; with them, the same bytes.

        >>> stability_of_runs([{"q": ["a", "b"]}, {"q": ["b", "c"]}], k=2)["rsi"]
        0.3333333333333333
    """
    if len(runs) < 2:
        raise InputError(f"stability needs at least 2 runs to compare, got {len(runs)}; pass --runs 2 or more.")
    per_query: dict[str, dict[str, float]] = {}
    for qid in runs[0]:
        tops = [list(r.get(qid, []))[:k] for r in runs]
        pairs = list(itertools.combinations(range(len(tops)), 2))
        jac = mean(jaccard(tops[i], tops[j]) for i, j in pairs)
        rbo = mean(rank_biased_overlap(tops[i], tops[j], p) for i, j in pairs)
        if payloads is not None:
            same = len({pl.get(qid, b"") for pl in payloads}) == 1
        else:
            same = all(t == tops[0] for t in tops)
        per_query[qid] = {"jaccard": jac, "rbo": rbo, "identical": float(same)}
    return {
        "rsi": mean(v["jaccard"] for v in per_query.values()),
        "rbo": mean(v["rbo"] for v in per_query.values()),
        "identical_share": mean(v["identical"] for v in per_query.values()),
        "per_query": per_query,
    }


@contextmanager
def real_searches(settings: Settings | None) -> Iterator[None]:
    """Turn the result cache of ``settings`` (the searching engine's) off for the duration.

    A cached answer is the same bytes by construction, so measuring stability
    through the cache would measure the cache, not the search.
    """
    before = getattr(settings, "result_cache", False)
    if settings is not None and before:
        settings.result_cache = False
    try:
        yield
    finally:
        if settings is not None and before:
            settings.result_cache = before


def collect_runs(
    search: Searcher,
    settings: Settings | None,
    collection: str,
    queries: Sequence[Query],
    *,
    runs: int,
    concurrency: int,
    k: int,
    mode: str,
    snapshot: int,
    params: dict[str, Any],
) -> tuple[list[dict[str, list[str]]], list[dict[str, bytes]], dict[str, Any]]:
    """Search every query ``runs`` times on ``concurrency`` threads; rankings and response bytes per run."""

    def one(q: Query) -> tuple[list[str], bytes, dict[str, Any]]:
        _qid, text, flt = q
        try:
            res = search(collection, text, k=k, mode=mode, filter=flt, snapshot=snapshot, **params)
        except QueryError as exc:
            # Refused the same way every time (a stop-word-only lexical query):
            # stable, and recorded as an empty ranking.
            return [], f"error: {exc}".encode(), {}
        return [h.doc_id for h in res.hits], res.to_json().encode("utf-8"), dict(res.params)

    tasks = [(r, q) for r in range(runs) for q in queries]
    rankings: list[dict[str, list[str]]] = [{} for _ in range(runs)]
    payloads: list[dict[str, bytes]] = [{} for _ in range(runs)]
    with real_searches(settings), ThreadPoolExecutor(max_workers=concurrency) as pool:
        # One search before the threads start loads the embedding model once,
        # instead of several threads racing to load it.
        _, _, first_params = one(queries[0])
        for (r, q), (ids, raw, _) in zip(tasks, pool.map(lambda t: one(t[1]), tasks), strict=True):
            rankings[r][q[0]] = ids
            # Only a digest is kept: 20 runs of full responses add up.
            payloads[r][q[0]] = hashlib.sha256(raw).digest()
    return rankings, payloads, first_params


def _check_args(queries: Sequence[Query], runs: int, concurrency: int, k: int, threshold: float) -> None:
    if not queries:
        raise InputError("no queries to run; pass a query file with at least one query.")
    if runs < 1:
        raise InputError(f"runs must be at least 1, got {runs}.")
    if not 1 <= concurrency <= 64:
        raise InputError(f"concurrency must be from 1 to 64 threads, got {concurrency}.")
    if not 1 <= k <= 10000:
        raise InputError(f"k must be from 1 to 10000, got {k}.")
    if not 0 <= threshold <= 1:
        raise InputError(f"threshold must be from 0 to 1, got {threshold}; the default is {DEFAULT_THRESHOLD}.")


def measure_stability(
    target: EvalTarget,
    collection: str,
    queries: Sequence[Query],
    *,
    runs: int = 10,
    concurrency: int = 1,
    k: int = REQUEST.k,
    mode: str = REQUEST.mode,
    snapshot: int | None = None,
    params: dict[str, Any] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> StabilityReport:
    """Run every query ``runs`` times and measure how much the answers agree."""
    _check_args(queries, runs, concurrency, k, threshold)
    if runs < 2:
        raise InputError(f"stability needs at least 2 runs to compare, got {runs}; pass --runs 2 or more.")
    snap = snapshot_info(target, collection, snapshot)
    t0 = time.perf_counter()
    rankings, payloads, used = collect_runs(
        target.search,
        target.settings,
        collection,
        queries,
        runs=runs,
        concurrency=concurrency,
        k=k,
        mode=mode,
        snapshot=snap["id"],
        params=dict(params or {}),
    )
    stats = stability_of_runs(rankings, k=k, payloads=payloads)
    return _report(stats, "repeat", collection, snap, used, queries, runs, concurrency, k, mode, threshold, t0)


def compare_configurations(
    target: EvalTarget,
    collection: str,
    queries: Sequence[Query],
    *,
    a: dict[str, Any],
    b: dict[str, Any],
    k: int = REQUEST.k,
    mode: str = REQUEST.mode,
    concurrency: int = 1,
    threshold: float = DEFAULT_THRESHOLD,
) -> StabilityReport:
    """Overlap between two configurations, each ``{"snapshot": id or None, **search params}``.

    The RSI here is the mean Jaccard of configuration A's top-k against B's, per
    query: how much of the answer a change of snapshot, index or ``ef_search``
    moves; ``identical_share`` counts queries with the same ranked ids (the
    response bytes differ anyway, since each echoes its own parameters).
    ``extra`` holds both configurations as run.
    """
    _check_args(queries, 1, concurrency, k, threshold)
    t0 = time.perf_counter()
    sides = []
    for cfg in (a, b):
        c = dict(cfg)
        snap = snapshot_info(target, collection, c.pop("snapshot", None))
        rankings, payloads, used = collect_runs(
            target.search,
            target.settings,
            collection,
            queries,
            runs=1,
            concurrency=concurrency,
            k=k,
            mode=mode,
            snapshot=snap["id"],
            params=c,
        )
        sides.append((snap, rankings[0], payloads[0], used))
    # Two configurations echo different parameters in every response, so their
    # bytes always differ; "identical" here means the same ranked ids.
    stats = stability_of_runs([sides[0][1], sides[1][1]], k=k)
    rep = _report(
        stats, "configurations", collection, sides[0][0], sides[0][3], queries, 2, concurrency, k, mode, threshold, t0
    )
    rep.extra = {
        "a": {"snapshot": _snap_ref(sides[0][0]), "params": sides[0][3], "overrides": a},
        "b": {"snapshot": _snap_ref(sides[1][0]), "params": sides[1][3], "overrides": b},
    }
    return rep


def _snap_ref(snap: dict[str, Any]) -> dict[str, Any]:
    return {"id": snap["id"], "manifest_hash": snap["manifest_hash"]}


def _report(
    stats: dict[str, Any],
    kind: str,
    collection: str,
    snap: dict[str, Any],
    params: dict[str, Any],
    queries: Sequence[Query],
    runs: int,
    concurrency: int,
    k: int,
    mode: str,
    threshold: float,
    t0: float,
) -> StabilityReport:
    unstable = [
        {"qid": qid, "jaccard": round(v["jaccard"], 6), "rbo": round(v["rbo"], 6), "identical": bool(v["identical"])}
        for qid, v in stats["per_query"].items()
        if v["identical"] < 1.0
    ]
    return StabilityReport(
        rsi=stats["rsi"],
        rbo=stats["rbo"],
        identical_share=stats["identical_share"],
        queries=len(queries),
        runs=runs,
        k=k,
        threshold=threshold,
        passed=stats["rsi"] >= threshold,
        kind=kind,
        concurrency=concurrency,
        mode=mode,
        collection=collection,
        snapshot=_snap_ref(snap),
        params=params,
        unstable=unstable,
        seconds=time.perf_counter() - t0,
    )
