"""Run a golden set against one snapshot, in several modes at once, and write the reports.

For every mode (hybrid, lexical, semantic by default) each golden query is
searched once with ``k = max(ks)`` on one pinned snapshot (the active one,
resolved once at the start, so an activation during the run cannot mix two
snapshots).  Outputs, all in one folder:

* ``report.json``: snapshot id, manifest and its hash, golden-set digest, the
  search parameters each mode ran with (including the lexical ranker), overall
  metrics under ``modes.<mode>`` (``recall@k``, ``ndcg@k``, ``mrr``), per-query
  metrics with the ranks of the relevant documents found, and mean recall at
  every cutoff from 1 to ``max(ks)``;
* ``summary.md``: the same in a table;
* ``run-<mode>.trec``: TREC run files (``qid Q0 doc rank score tag``).  The
  score column is ``max(ks) + 1 - rank``, strictly decreasing, because
  trec_eval re-sorts by score and breaks ties by document id, which would
  reorder ranklock's tie-broken ranking; the engine's own scores are in the
  search results, not needed to score a run;
* ``plot.png``: mean recall@k per mode, and per-query nDCG deltas between modes.

    >>> rep = evaluate(eng, "scifact", "data/scifact", ks=(10, 100))   # doctest: +SKIP
    >>> rep.report["modes"]["hybrid"]["ndcg@10"]                        # doctest: +SKIP
    >>> rep.write("out/")                                               # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, QueryError
from ..phrasing import trec_token
from ..search.branches import modes
from .golden import GoldenSet, load_golden
from .metrics import mean, ndcg_at_k, recall_at_k, reciprocal_rank
from .target import EvalTarget

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..store.database import Database

__all__ = ["DEFAULT_KS", "REPORT_SCHEMA", "EvalRun", "evaluate", "parse_ks", "snapshot_info"]

REPORT_SCHEMA = "ranklock.eval/1"
DEFAULT_KS = (10, 50, 100)
#: Every search mode, hybrid first (ranklock.search.branches).
ALL_MODES = modes()

Progress = Callable[[str, int, int], None]


def parse_ks(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"10,50,100"`` -> ``(10, 50, 100)``, sorted and deduplicated; an error names the bad item."""
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    out: set[int] = set()
    for item in items:
        try:
            k = int(item)
        except (TypeError, ValueError):
            raise InputError(f"cutoff {item!r} is not an integer; write cutoffs like --k 10,50,100.") from None
        if k < 1 or k > 10000:
            raise InputError(f"cutoff {k} is out of range; cutoffs go from 1 to 10000.")
        out.add(k)
    if not out:
        raise InputError("no cutoff given; write cutoffs like --k 10,50,100.")
    return tuple(sorted(out))


def parse_modes(text: str | Sequence[str]) -> tuple[str, ...]:
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    bad = sorted(m for m in items if m not in ALL_MODES)
    if bad or not items:
        raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'}; use any of hybrid, lexical, semantic.")
    return tuple(dict.fromkeys(items))


def snapshot_info(target: EvalTarget, collection: str, snapshot: int | None) -> dict[str, Any]:
    """``{"id", "manifest_hash", "manifest"}`` of ``snapshot`` (default: the active one)."""
    return pinned_snapshot(target.db, target.collection(collection), snapshot)


def pinned_snapshot(db: Database, coll: CollectionInfo, snapshot: int | None) -> dict[str, Any]:
    """``{"id", "manifest_hash", "manifest"}`` of ``snapshot`` of ``coll`` (default: the active one)."""
    from ..errors import NotFound

    collection = coll.name
    sid = snapshot if snapshot is not None else coll.active_snapshot_id
    if sid is None:
        raise NotFound(f"collection {collection!r} has no active snapshot yet; ingest documents first.")
    row = db.fetchone(
        "SELECT id, manifest_hash, manifest FROM ranklock.snapshots WHERE id = %s AND collection_id = %s",
        [sid, coll.id],
    )
    if row is None:
        raise NotFound(f"collection {collection!r} has no snapshot {sid}; see `ranklock snapshot list {collection}`.")
    return {"id": int(row["id"]), "manifest_hash": row["manifest_hash"], "manifest": row["manifest"] or {}}


@dataclass
class EvalRun:
    """An evaluation: the JSON report and the rankings behind it (for the run files)."""

    report: dict[str, Any]
    rankings: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def trec_run(self, mode: str) -> str:
        """The TREC run file text for ``mode``; see the module docstring for the score column."""
        depth = int(self.report["depth"])
        lines = []
        for qid, ranking in self.rankings[mode].items():
            for rank, doc in enumerate(ranking, 1):
                # One line a hit: trec_eval splits on whitespace, so ids are percent-encoded where they hold any.
                lines.append(f"{trec_token(qid)} Q0 {trec_token(doc)} {rank} {depth + 1 - rank} ranklock-{mode}\n")
        return "".join(lines)

    def write(self, out: str | Path) -> list[Path]:
        """Write report.json, summary.md, run-<mode>.trec and plot.png into ``out``; return the paths."""
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        paths = [d / "report.json", d / "summary.md"]
        paths[0].write_text(json.dumps(self.report, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        paths[1].write_text(markdown_summary(self.report), encoding="utf-8")
        for mode in self.rankings:
            p = d / f"run-{mode}.trec"
            p.write_text(self.trec_run(mode), encoding="utf-8")
            paths.append(p)
        from .plot import plot_report

        paths.append(plot_report(self.report, d / "plot.png"))
        return paths


def evaluate(
    target: EvalTarget,
    collection: str,
    golden: GoldenSet | str | Path,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    modes: Sequence[str] = ALL_MODES,
    snapshot: int | None = None,
    params: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> EvalRun:
    """Search every golden query in every mode on one snapshot and score the rankings."""
    gs = golden if isinstance(golden, GoldenSet) else load_golden(golden)
    ks = parse_ks(ks)
    modes = parse_modes(modes)
    depth = max(ks)
    snap = snapshot_info(target, collection, snapshot)
    extra = dict(params or {})
    # Checked once, up front: below, a lexical QueryError is read as "no searchable words"
    # and would turn a mistyped override into an empty ranking for every query.
    from ..validation import parse_search_params

    parse_search_params({k: v for k, v in extra.items() if v is not None})
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "collection": collection,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "snapshot": {"id": snap["id"], "manifest_hash": snap["manifest_hash"]},
        "manifest": snap["manifest"],
        "golden": gs.describe(),
        # The query texts, so a report alone can say (and the page can re-run) what each qid asked.
        "queries": {q.qid: {"text": q.text, "filter": q.filter} for q in gs.queries},
        "ks": list(ks),
        "depth": depth,
        "overrides": extra,
        "modes": {},
        "params": {},
        "per_query": {},
        "recall_curve": {},
        "timing": {},
        "warnings": {},
    }
    run = EvalRun(report=report)
    for mode in modes:
        rankings: dict[str, list[str]] = {}
        per_query: dict[str, dict[str, Any]] = {}
        warnings: dict[str, list[str]] = {}
        latencies: list[float] = []
        mode_params: dict[str, Any] | None = None
        t0 = time.perf_counter()
        for i, q in enumerate(gs.queries):
            t = time.perf_counter()
            try:
                res = target.search(
                    collection, q.text, k=depth, mode=mode, filter=q.filter, snapshot=snap["id"], **extra
                )
            except QueryError as exc:
                # A lexical search of a stop-word-only query is refused by the
                # engine; for evaluation it is an empty ranking, and it is said.
                if mode != "lexical":
                    raise
                ranking: list[str] = []
                warnings[q.qid] = [str(exc)]
            else:
                ranking = [h.doc_id for h in res.hits]
                if res.warnings:
                    warnings[q.qid] = list(res.warnings)
                if mode_params is None:
                    mode_params = dict(res.params)
            latencies.append((time.perf_counter() - t) * 1000)
            rankings[q.qid] = ranking
            per_query[q.qid] = score_query(ranking, q.judgments, ks)
            if progress is not None:
                progress(mode, i + 1, len(gs.queries))
        seconds = time.perf_counter() - t0
        run.rankings[mode] = rankings
        report["per_query"][mode] = per_query
        report["modes"][mode] = aggregate(per_query, ks)
        report["params"][mode] = mode_params or {}
        report["recall_curve"][mode] = recall_curve(rankings, gs, depth)
        report["timing"][mode] = {"seconds": round(seconds, 3), **_percentiles(latencies)}
        if warnings:
            report["warnings"][mode] = warnings
    return run


def score_query(ranking: Sequence[str], judgments: Mapping[str, int], ks: Sequence[int]) -> dict[str, Any]:
    """Per-query metrics plus what the gate needs: where each relevant document was found."""
    out: dict[str, Any] = {}
    for k in ks:
        out[f"recall@{k}"] = recall_at_k(ranking, judgments, k)
    for k in ks:
        out[f"ndcg@{k}"] = ndcg_at_k(ranking, judgments, k)
    out["rr"] = reciprocal_rank(ranking, judgments)
    out["returned"] = len(ranking)
    out["relevant"] = sum(1 for g in judgments.values() if g > 0)
    out["relevant_ranks"] = {d: r for r, d in enumerate(ranking, 1) if judgments.get(d, 0) > 0}
    return out


def aggregate(per_query: dict[str, dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """Means over all golden queries: ``recall@k``, ``ndcg@k`` and ``mrr`` (the mean of ``rr``)."""
    rows = list(per_query.values())
    out: dict[str, Any] = {}
    for k in ks:
        out[f"recall@{k}"] = mean(r[f"recall@{k}"] for r in rows)
    for k in ks:
        out[f"ndcg@{k}"] = mean(r[f"ndcg@{k}"] for r in rows)
    out["mrr"] = mean(r["rr"] for r in rows)
    out["queries"] = len(rows)
    depth = max(ks)
    out["short_results"] = sum(1 for r in rows if r["returned"] < depth)
    return out


def recall_curve(rankings: dict[str, list[str]], gs: GoldenSet, depth: int) -> list[float]:
    """Mean recall at every cutoff 1..depth (index 0 is recall@1)."""
    sums = [0.0] * depth
    for q in gs.queries:
        rel = q.relevant
        ranking = rankings.get(q.qid, [])
        found = 0
        for i in range(depth):
            if i < len(ranking) and ranking[i] in rel:
                found += 1
            sums[i] += found / len(rel)
    n = len(gs.queries)
    return [round(s / n, 6) for s in sums]


def _percentiles(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {}
    s = sorted(ms)

    def pct(p: float) -> float:
        return round(s[min(len(s) - 1, math.ceil(p * len(s)) - 1)], 2)

    return {"p50_ms": pct(0.5), "p95_ms": pct(0.95), "max_ms": round(s[-1], 2)}


def markdown_summary(report: dict[str, Any]) -> str:
    """A Markdown page: what ran, on which snapshot, and the overall metrics per mode."""
    ks = report["ks"]
    cols = [f"recall@{k}" for k in ks] + [f"ndcg@{k}" for k in ks] + ["mrr"]
    g = report["golden"]
    skipped = g["skipped_no_relevant"]
    lines = [
        f"# Evaluation of `{report['collection']}`",
        "",
        f"- snapshot {report['snapshot']['id']}, manifest `{report['snapshot']['manifest_hash']}`",
        f"- golden set `{g['path']}` ({g['format']}): {g['queries']} queries, {g['relevant']} relevant judgments"
        + (f", {skipped} queries without a relevant document skipped" if skipped else ""),
        f"- ranking depth {report['depth']}; metrics as trec_eval (recall.k, ndcg_cut.k, recip_rank), "
        "mean over all golden queries",
        f"- created {report['created_at']}",
        "",
        "| mode | " + " | ".join(cols) + " | queries | p50 ms |",
        "|---|" + "---:|" * (len(cols) + 2),
    ]
    for mode, m in report["modes"].items():
        vals = " | ".join(f"{m[c]:.4f}" for c in cols)
        lines.append(f"| {mode} | {vals} | {m['queries']} | {report['timing'][mode].get('p50_ms', 0):.1f} |")
    lines += ["", "Search parameters per mode:", ""]
    for mode, p in report["params"].items():
        keys = ("lexical_ranker", "k1", "b", "depth", "rrf_k", "vector_strategy", "ef_search", "query_syntax")
        shown = ", ".join(f"{k}={p[k]}" for k in keys if p.get(k) is not None)
        lines.append(f"- {mode}: {shown}")
    short = {m: v["short_results"] for m, v in report["modes"].items() if v["short_results"]}
    if short:
        lines += [
            "",
            "Queries that returned fewer than "
            f"{report['depth']} documents: " + ", ".join(f"{m} {n}" for m, n in short.items()),
        ]
    return "\n".join(lines) + "\n"
