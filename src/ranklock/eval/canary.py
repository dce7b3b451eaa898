"""The canary: replay a saved query set against the active snapshot, compare with the last run.

Meant for a scheduled job.  Each run searches every query once on the active
snapshot and records, per query, the ranked ids and a digest of the response
bytes in a JSON record file.  The next run compares with that record:

* same snapshot, same manifest hash, same search parameters, but different
  results: **drift**, the engine is not reproducible; the canary fails;
* a different snapshot (or parameters): the change is expected to move some
  answers; the canary fails only when the top-k overlap (RSI) falls below the
  threshold, and it says which manifest fields differ.

A failed run does not replace the record, so the alarm keeps ringing until
someone looks (``accept=True`` records it anyway).

    >>> rep = run_canary(eng, "docs", load_queries("canary.txt"))   # doctest: +SKIP
    >>> rep.passed, rep.verdict                                     # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..settings import REQUEST
from .run import ALL_MODES, snapshot_info
from .stability import DEFAULT_THRESHOLD, Query, collect_runs, stability_of_runs
from .target import EvalTarget

__all__ = ["CANARY_SCHEMA", "CanaryReport", "default_record_path", "forget_documents", "run_canary"]

CANARY_SCHEMA = "ranklock.canary/1"


@dataclass
class CanaryReport:
    passed: bool
    verdict: str
    record: str
    collection: str
    snapshot: dict[str, Any]
    previous: dict[str, Any] | None = None
    rsi: float | None = None
    rbo: float | None = None
    identical_share: float | None = None
    changed: list[dict[str, Any]] = field(default_factory=list)
    manifest_diff: dict[str, Any] = field(default_factory=dict)
    params_diff: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def default_record_path(target: EvalTarget, collection: str, mode: str) -> Path:
    """Where the last run is kept when no path is given: ``<home>/canary/<collection>-<mode>.json``."""
    return _record_path(Path(target.settings.home), collection, mode)


def _folder(home: str | Path) -> Path:
    return Path(home) / "canary"


def _record_path(home: Path, collection: str, mode: str) -> Path:
    return _folder(home) / f"{collection}-{mode}.json"


def canary_paths(home: Path, collection: str) -> list[Path]:
    """The default records of ``collection`` in ``home``, one per mode (a dropped collection's go with it)."""
    return [_record_path(home, collection, mode) for mode in ALL_MODES]


def forget_documents(home: str | Path, collection: str, ids: Sequence[str]) -> list[Path]:
    """Take purged document ids out of the collection's canary records under ``home``; return the records changed.

    A record keeps each query's ranked ids in clear (ranklock.snapshot.purge erases them everywhere
    else).  The ids go from the lists; the response digests stay (hashes: they name no document).
    The next run finds the purge in the manifest (a changed configuration) and compares by overlap,
    which the missing id no longer lowers.  A record kept elsewhere (``--record PATH``) is not found.
    """
    gone = set(ids)
    changed: list[Path] = []
    folder = _folder(home)
    if not folder.is_dir():
        return changed
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not a record this function wrote; `ranklock canary` names it when it reads it
        if not isinstance(data, dict) or data.get("schema") != CANARY_SCHEMA or data.get("collection") != collection:
            continue
        results = data.get("results") or {}
        if not any(gone & set(r.get("ids") or []) for r in results.values()):
            continue
        for r in results.values():
            r["ids"] = [i for i in r.get("ids") or [] if i not in gone]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)  # the old file's blocks are freed, not overwritten (docs/reliability.md)
        changed.append(path)
    return changed


def run_canary(
    target: EvalTarget,
    collection: str,
    queries: Sequence[Query],
    *,
    record: str | Path | None = None,
    k: int = REQUEST.k,
    mode: str = REQUEST.mode,
    params: dict[str, Any] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    accept: bool = False,
) -> CanaryReport:
    """Replay ``queries`` on the active snapshot and compare with the recorded previous run."""
    if not queries:
        raise InputError("no queries to replay; pass a query file with at least one query.")
    path = Path(record) if record is not None else default_record_path(target, collection, mode)
    previous = _read_record(path) if path.exists() else None
    snap = snapshot_info(target, collection, None)
    rankings, payloads, used = collect_runs(
        target.search,
        target.settings,
        collection,
        queries,
        runs=1,
        concurrency=1,
        k=k,
        mode=mode,
        snapshot=snap["id"],
        params=dict(params or {}),
    )
    current = {
        "schema": CANARY_SCHEMA,
        "collection": collection,
        "mode": mode,
        "k": k,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "snapshot": {"id": snap["id"], "manifest_hash": snap["manifest_hash"]},
        "manifest": snap["manifest"],
        "params": used,
        "results": {qid: {"ids": ids, "digest": payloads[0][qid].hex()} for qid, ids in rankings[0].items()},
    }
    rep = CanaryReport(
        passed=True, verdict="recorded", record=str(path), collection=collection, snapshot=current["snapshot"]
    )
    if previous is None:
        rep.notes.append(f"no previous run at {path}; this run is the baseline")
    else:
        _compare(previous, current, rep, k=k, threshold=threshold)
    if rep.passed or accept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(current, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    else:
        failed = path.with_suffix(".failed.json")
        failed.write_text(json.dumps(current, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        rep.notes.append(f"the record was kept; this run is in {failed} (pass --accept to make it the baseline)")
    return rep


def _compare(prev: dict[str, Any], cur: dict[str, Any], rep: CanaryReport, *, k: int, threshold: float) -> None:
    from ..snapshot.manifest import diff_manifests

    rep.previous = {"snapshot": prev["snapshot"], "created_at": prev.get("created_at")}
    common = [q for q in cur["results"] if q in prev["results"]]
    if len(common) != len(cur["results"]) or len(common) != len(prev["results"]):
        rep.notes.append(f"the query set changed: {len(common)} queries in common with the previous run are compared")
    if not common:
        rep.verdict = "no common queries"
        rep.notes.append("nothing to compare; this run becomes the baseline")
        return
    if prev.get("k") != k:
        rep.notes.append(f"the previous run used k={prev.get('k')}, this one k={k}; top-{k} prefixes are compared")
    a = {q: prev["results"][q]["ids"] for q in common}
    b = {q: cur["results"][q]["ids"] for q in common}
    pa = {q: bytes.fromhex(prev["results"][q]["digest"]) for q in common}
    pb = {q: bytes.fromhex(cur["results"][q]["digest"]) for q in common}
    stats = stability_of_runs([a, b], k=k, payloads=[pa, pb])
    rep.rsi, rep.rbo, rep.identical_share = stats["rsi"], stats["rbo"], stats["identical_share"]
    rep.changed = [
        {"qid": q, "jaccard": round(v["jaccard"], 6), "rbo": round(v["rbo"], 6), "before": a[q][:k], "after": b[q][:k]}
        for q, v in stats["per_query"].items()
        if not v["identical"]
    ]
    rep.manifest_diff = diff_manifests(prev.get("manifest") or {}, cur.get("manifest") or {})
    pp, cp = prev.get("params") or {}, cur.get("params") or {}
    rep.params_diff = {
        x: {"old": pp.get(x), "new": cp.get(x)} for x in sorted(set(pp) | set(cp)) if pp.get(x) != cp.get(x)
    }
    same_config = prev["snapshot"] == cur["snapshot"] and not rep.params_diff and prev.get("mode") == cur["mode"]
    if same_config:
        if rep.changed:
            rep.passed = False
            rep.verdict = "drift"
            rep.notes.append(
                f"{len(rep.changed)} queries answered differently on the same snapshot and parameters: "
                "results are not reproducible"
            )
        else:
            rep.verdict = "identical"
    else:
        rep.verdict = "changed config"
        if rep.rsi < threshold:
            rep.passed = False
            rep.verdict = "overlap below threshold"
            rep.notes.append(f"RSI against the previous run {rep.rsi:.4f} is below {threshold:g}")


def _read_record(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}:{exc.lineno}: canary record is not valid JSON ({exc.msg}); delete it to start a new baseline."
        ) from None
    if not isinstance(data, dict) or data.get("schema") != CANARY_SCHEMA:
        raise InputError(f"{path}: not a canary record ({CANARY_SCHEMA}); pass another --record path or delete it.")
    return data
