"""Byte-identical check for refactors: ``search --json`` on SciFact, before and after.

``record`` runs a fixed set of searches through the CLI (in process, ``typer.testing.CliRunner``)
against one pinned SciFact snapshot and writes every stdout, with its sha256, to a JSONL file.
``compare`` runs the same searches with the code it is run with and fails (exit 1) when one
output differs by a single byte.  It also compares ``Engine.search_sql()`` texts and parameters.

    python bench/identical.py record  --home /work/bench-identical --out /work/bench-identical/baseline.jsonl
    python bench/identical.py compare --home /work/bench-identical --baseline /work/bench-identical/baseline.jsonl

The searches (state the scale you change):
- the first ``--queries`` SciFact test queries (300 = all of them, in query-id order)
  x modes {hybrid, lexical, semantic} at k=10;
- k=100 for the first ``--deep`` of them in the three modes;
- ``--ranker ts_rank_cd`` and ``--syntax websearch`` on the first ``--variants`` (hybrid, k=10);
- 3 hybrid queries that take the warning paths (only stop words, only an exclusion);
- ``search_sql()`` text and parameters for the first ``--variants`` (hybrid, k=10);
- on two more collections of the first ``FILTERED_DOCS`` SciFact documents with typed fields
  (``year:int``, ``tags:keyword[]``) and effective dates, one with an HNSW index and one exact
  (``ident_hnsw``, ``ident_exact``): the first ``--variants`` queries under each of ``FILTERS`` in
  the three modes, hybrid with ``--as-of``, and ``search_sql()`` with a filter and ``as_of``.

Every search passes ``--snapshot <id>`` (pinned in the baseline's header line) with
``RANKLOCK_LOG_QUERIES=0`` and ``RANKLOCK_RESULT_CACHE=0``; ``--json`` without ``--timings``
leaves out the run-to-run fields.  The first run writes the query embeddings to the embedding
cache and later runs read the same float32s back, so the model cannot make a difference.
``record`` ingests SciFact into collection ``scifact`` only when it is missing.
Not a latency benchmark: a busy machine doesn't matter.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Set before ranklock reads its settings: no log writes, no cached results.
os.environ["RANKLOCK_LOG_QUERIES"] = "0"
os.environ["RANKLOCK_RESULT_CACHE"] = "0"

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import ranklock  # noqa: E402
from ranklock import Engine, NotFound  # noqa: E402

DATA = Path("/work/shared/data/scifact")
COLLECTION = "scifact"
MODES = ("hybrid", "lexical", "semantic")
WARNING_QUERIES = ("the of and", "-alpha", "to be or not")
#: Documents of the filtered collections, their indexes, filters (broad, tag, selective) and as_of.
FILTERED_DOCS = 1500
FILTERED = {"ident_hnsw": "hnsw", "ident_exact": "exact"}
FILTERS = ("year >= 2010", 'tags has "even"', "year < 2002")
AS_OF = "2015-06-01T00:00:00Z"


def load_queries(n: int) -> list[tuple[str, str]]:
    """The first ``n`` SciFact test queries (id, text), in numeric query-id order."""
    texts: dict[str, str] = {}
    with open(DATA / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            texts[str(rec["_id"])] = rec["text"]
    with open(DATA / "qrels" / "test.tsv", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)
        qids = sorted({row[0] for row in reader if row[0] in texts}, key=int)
    return [(q, texts[q]) for q in qids[:n]]


def cases(n: int, deep: int, variants: int) -> Iterator[dict[str, Any]]:
    """Every search of the check, in a fixed order: qid, query, mode, k, variant (extra CLI args)."""
    queries = load_queries(n)
    for qid, text in queries:
        for mode in MODES:
            yield {"qid": qid, "query": text, "mode": mode, "k": 10, "variant": ""}
    for qid, text in queries[:deep]:
        for mode in MODES:
            yield {"qid": qid, "query": text, "mode": mode, "k": 100, "variant": ""}
    for qid, text in queries[:variants]:
        yield {"qid": qid, "query": text, "mode": "hybrid", "k": 10, "variant": "--ranker ts_rank_cd"}
        yield {"qid": qid, "query": text, "mode": "hybrid", "k": 10, "variant": "--syntax websearch"}
    for i, text in enumerate(WARNING_QUERIES):
        yield {"qid": f"warn{i}", "query": text, "mode": "hybrid", "k": 10, "variant": ""}
    for qid, text in queries[:variants]:
        yield {"qid": qid, "query": text, "mode": "hybrid", "k": 10, "variant": "search_sql"}
    for name in FILTERED:
        for qid, text in queries[:variants]:
            for f in FILTERS:
                for mode in MODES:
                    yield {
                        "qid": qid,
                        "query": text,
                        "mode": mode,
                        "k": 10,
                        "variant": "",
                        "collection": name,
                        "filter": f,
                    }
            yield {
                "qid": qid,
                "query": text,
                "mode": "hybrid",
                "k": 10,
                "variant": "",
                "collection": name,
                "as_of": AS_OF,
            }
            yield {
                "qid": qid,
                "query": text,
                "mode": "hybrid",
                "k": 10,
                "variant": "search_sql",
                "collection": name,
                "filter": FILTERS[0],
                "as_of": AS_OF,
            }


def _key(c: dict[str, Any]) -> str:
    key = f"{c['qid']}|{c['mode']}|{c['k']}|{c['variant']}"
    if c.get("collection", COLLECTION) != COLLECTION:
        key += f"|{c['collection']}|{c.get('filter')}|{c.get('as_of')}"
    return key


def filtered_documents() -> list[Any]:
    """The first FILTERED_DOCS SciFact documents (corpus order) with typed fields and effective dates from their id."""
    from ranklock import Document

    docs = []
    with open(DATA / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            n = int(rec["_id"])
            year = 2000 + n % 25
            meta = {
                "year": year,
                "tags": ["even" if n % 2 == 0 else "odd"],
                "effective_from": f"{year}-01-01T00:00:00Z",
            }
            docs.append(Document(str(rec["_id"]), rec.get("title", ""), rec["text"], meta))
            if len(docs) == FILTERED_DOCS:
                break
    return docs


def _memoise_embedder() -> None:
    """One MiniLM per process: each CLI call makes an Engine, which would reload and re-hash the model.

    The embedder object is the same either way, so the output bytes are not affected.
    """
    import ranklock.engine as engine_mod

    real = getattr(engine_mod, "resolve_embedder", None)
    if real is None:  # the facade no longer resolves embedders by this name: run unmemoised (slower, same bytes)
        return
    cache: dict[str | None, Any] = {}

    def resolve(spec: str | None) -> Any:
        if spec not in cache:
            cache[spec] = real(spec)
        return cache[spec]

    engine_mod.resolve_embedder = resolve  # type: ignore[assignment]


def ensure_snapshot(home: str) -> dict[str, int]:
    """The active snapshot id of every collection the check reads, ingesting a missing one first."""
    out: dict[str, int] = {}
    with Engine(home=home, log_queries=False) as eng:
        sources: dict[str, tuple[Any, dict[str, Any] | None]] = {COLLECTION: (DATA / "corpus.jsonl", None)}
        for name, index in FILTERED.items():
            sources[name] = (filtered_documents(), {"fields": ["year:int", "tags:keyword[]"], "index": index})
        for name, (source, create) in sources.items():
            try:
                info = eng.collection(name)
                if info.active_snapshot_id is None:
                    raise NotFound(name)
            except NotFound:
                t = time.perf_counter()
                eng.ingest(name, source, create=create)
                print(f"ingested {name} in {time.perf_counter() - t:.0f}s", flush=True)
                info = eng.collection(name)
            assert info.active_snapshot_id is not None
            out[name] = int(info.active_snapshot_id)
    return out


def run_case(c: dict[str, Any], home: str, sids: dict[str, int], eng: Engine) -> str:
    """The bytes of one case: the CLI's stdout (and exit code), or search_sql's text and parameters."""
    name = c.get("collection", COLLECTION)
    sid = sids[name]
    if c["variant"] == "search_sql":
        extra = {key: c[key] for key in ("filter", "as_of") if c.get(key)}
        text, params = eng.search_sql(name, c["query"], k=c["k"], mode=c["mode"], snapshot=sid, **extra)
        return json.dumps({"sql": text, "params": params}, sort_keys=True, default=str)
    from typer.testing import CliRunner

    from ranklock.cli import app

    args = ["search", name, "--json", "--snapshot", str(sid), "--mode", c["mode"], "-k", str(c["k"])]
    if c.get("filter"):
        args += ["--filter", c["filter"]]
    if c.get("as_of"):
        args += ["--as-of", c["as_of"]]
    args += [*c["variant"].split(), "--home", home, "--", c["query"]]
    res = CliRunner().invoke(app, args)
    return f"exit={res.exit_code}\n{res.stdout}"


def run_all(args: argparse.Namespace, sids: dict[str, int]) -> Iterator[dict[str, Any]]:
    _memoise_embedder()
    with Engine(home=args.home, log_queries=False) as eng:
        for c in cases(args.queries, args.deep, args.variants):
            out = run_case(c, args.home, sids, eng)
            yield {
                **{key: c[key] for key in ("collection", "filter", "as_of") if key in c},
                "qid": c["qid"],
                "mode": c["mode"],
                "k": c["k"],
                "variant": c["variant"],
                "sha256": hashlib.sha256(out.encode("utf-8")).hexdigest(),
                "stdout": out,
            }


def record(args: argparse.Namespace) -> int:
    sids = ensure_snapshot(args.home)
    t = time.perf_counter()
    n = 0
    with open(args.out, "w", encoding="utf-8") as fh:
        header = {
            "snapshot": sids[COLLECTION],
            "snapshots": sids,
            "queries": args.queries,
            "deep": args.deep,
            "variants": args.variants,
            "code": str(Path(ranklock.__file__).parent),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        fh.write(json.dumps(header) + "\n")
        for row in run_all(args, sids):
            fh.write(json.dumps(row) + "\n")
            n += 1
    print(f"recorded {n} outputs of snapshots {sids} in {time.perf_counter() - t:.0f}s -> {args.out}")
    return 0


def _pretty(out: str) -> list[str]:
    head, _, body = out.partition("\n")
    try:
        return [head, *json.dumps(json.loads(body), indent=2, sort_keys=False).splitlines()]
    except ValueError:
        return out.splitlines()


def _without(out: str, fields: list[str]) -> str:
    """``out`` with the top-level JSON keys ``fields`` dropped (key order kept), for ``--ignore-field``."""
    head, _, body = out.partition("\n")
    try:
        doc = json.loads(body)
    except ValueError:
        return out
    if not isinstance(doc, dict):
        return out
    return head + "\n" + json.dumps({k: v for k, v in doc.items() if k not in fields}, ensure_ascii=False)


def compare(args: argparse.Namespace) -> int:
    with open(args.baseline, encoding="utf-8") as fh:
        header = json.loads(fh.readline())
        base = {_key(r): r for r in map(json.loads, fh)}
    args.queries, args.deep, args.variants = header["queries"], header["deep"], header["variants"]
    sids = {k: int(v) for k, v in header.get("snapshots", {COLLECTION: header["snapshot"]}).items()}
    sid = sids[COLLECTION]
    t = time.perf_counter()
    stats = {"searches": 0, "identical": 0, "different": 0, "missing": 0, "sql_texts": 0, "sql_identical": 0}
    diffs: list[str] = []
    seen = set()
    for row in run_all(args, sids):
        key = _key(row)
        seen.add(key)
        is_sql = row["variant"] == "search_sql"
        stats["sql_texts" if is_sql else "searches"] += 1
        old = base.get(key)
        if old is None:
            stats["missing"] += 1
        elif old["sha256"] == row["sha256"] or (
            args.ignore_field
            and not is_sql
            and _without(old["stdout"], args.ignore_field) == _without(row["stdout"], args.ignore_field)
        ):
            stats["sql_identical" if is_sql else "identical"] += 1
        else:
            stats["different"] += 1
            if len(diffs) < 3:
                diffs.append(
                    "\n".join(
                        difflib.unified_diff(
                            _pretty(old["stdout"]), _pretty(row["stdout"]), f"baseline {key}", f"now {key}", lineterm=""
                        )
                    )
                )
    stats["missing"] += len(set(base) - seen)
    seconds = time.perf_counter() - t
    print(f"{'searches':>9} {'identical':>9} {'sql texts':>9} {'sql same':>9} {'different':>9} {'missing':>8}")
    print(
        f"{stats['searches']:>9} {stats['identical']:>9} {stats['sql_texts']:>9} {stats['sql_identical']:>9} "
        f"{stats['different']:>9} {stats['missing']:>8}"
    )
    for d in diffs:
        print(d)
    summary = {
        **stats,
        "snapshot": sid,
        "baseline": str(args.baseline),
        "ignored_fields": args.ignore_field,
        "baseline_recorded": header.get("date"),
        "baseline_code": header.get("code"),
        "code": str(Path(ranklock.__file__).parent),
        "seconds": round(seconds, 1),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
    }
    out = Path(args.summary)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    ok = stats["different"] == 0 and stats["missing"] == 0
    print(f"{'IDENTICAL' if ok else 'DIFFERENT'} in {seconds:.0f}s; summary -> {out}")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description="search --json byte-identical check on SciFact")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run the searches and write the baseline JSONL")
    rec.add_argument("--home", default="/work/bench-identical")
    rec.add_argument("--out", default="/work/bench-identical/baseline.jsonl")
    rec.add_argument("--queries", type=int, default=300, help="test queries x 3 modes at k=10")
    rec.add_argument("--deep", type=int, default=50, help="of them, also at k=100 (3 modes)")
    rec.add_argument("--variants", type=int, default=50, help="of them, ts_rank_cd/websearch and search_sql")
    cmp_ = sub.add_parser("compare", help="run the same searches and compare with the baseline")
    cmp_.add_argument("--home", default="/work/bench-identical")
    cmp_.add_argument("--baseline", default="/work/bench-identical/baseline.jsonl")
    cmp_.add_argument("--summary", default=str(ROOT / "bench" / "out" / "identical.json"))
    cmp_.add_argument(
        "--ignore-field",
        action="append",
        default=[],
        help="a top-level JSON key a later, deliberate change added (e.g. served_by); repeatable. Byte-identical "
        "outputs count as identical as always; the others are compared without these keys",
    )
    args = ap.parse_args()
    return record(args) if args.cmd == "record" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
