"""Byte-identical check for refactors: ``search --json``, the HTTP API and the MCP tools on SciFact, before and after.

``record`` runs a fixed set of searches through the CLI (in process, ``typer.testing.CliRunner``)
against one pinned SciFact snapshot and writes every stdout, with its sha256, to a JSONL file.
``compare`` runs the same searches with the code it is run with and fails (exit 1) when one
output differs by a single byte.  It also compares ``Engine.search_sql()`` texts and parameters.
``--surfaces`` adds the served interfaces (:func:`api_cases`): ``http``, responses of the FastAPI
app in process (``TestClient``: status and body bytes), and ``mcp``, tool results of ``ranklock mcp``
over stdio driven by the MCP SDK's client (error flag, text and structured content).

    python bench/identical.py record  --home /work/bench-identical --out /work/bench-identical/baseline.jsonl
    python bench/identical.py compare --home /work/bench-identical --baseline /work/bench-identical/baseline.jsonl
    python bench/identical.py record  --surfaces http,mcp --out /work/bench-identical/api.jsonl   # the served APIs

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

The served interfaces (``--surfaces http,mcp``, each the same list of calls): the first
``--variants`` queries in the three modes (POST, with ``snapshot``), GET ``/api/search`` with an
``offset``, filtered and ``as_of`` searches on ``ident_hnsw``, errors (an unknown mode, collection
and filter field, a bad argument), the collection list and detail, a document, and Ask (extractive)
on the first 5 queries.  A search response's ``timings`` (run-to-run milliseconds) are cut out of
its bytes before hashing; nothing else is touched.

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
import re
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
    import importlib

    # Where the code being compared resolves a spec to a model: the engine's embedders (issue 49 on),
    # or the facade itself (before).
    try:
        engine_mod: Any = importlib.import_module("ranklock.embed.loaded")
    except ImportError:
        engine_mod = importlib.import_module("ranklock.engine")
    real = getattr(engine_mod, "resolve_embedder", None)
    if real is None:  # nothing resolves embedders by this name: run unmemoised (slower, same bytes)
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


#: The interfaces the check can drive: the CLI's ``search --json`` (:func:`cases`), the HTTP API and MCP.
SURFACES = ("cli", "http", "mcp")
#: How many of the first queries Ask answers on the served interfaces (extractive: no model, same bytes).
ASK_QUERIES = 5


def api_cases(variants: int, sids: dict[str, int]) -> list[dict[str, Any]]:
    """The calls of the served interfaces, in a fixed order: a name, then what each interface sends.

    ``search`` (POST /api/search, tool ``search``) and ``ask`` (POST /api/ask, tool ``ask``) take the
    same arguments on both (ranklock.api); ``get`` is HTTP's GET /api/search, ``path`` another GET
    route, ``tool`` another MCP tool.  A case without an entry for an interface is not sent there.
    """
    queries = load_queries(variants)
    sid, hnsw = sids[COLLECTION], "ident_hnsw"
    out: list[dict[str, Any]] = []
    for qid, text in queries:
        for mode in MODES:
            out.append(
                {"name": f"search|{qid}|{mode}", "search": {"collection": COLLECTION, "query": text, "mode": mode}}
            )
            out[-1]["search"].update({"k": 10, "snapshot": sid})
    for qid, text in queries[:5]:
        page = {"collection": COLLECTION, "k": 5, "offset": 5, "snapshot": sid}
        out.append({"name": f"page|{qid}", "search": {**page, "query": text}, "get": {**page, "q": text}})
    for qid, text in queries[:10]:
        for f in FILTERS:
            for mode in MODES:
                args = {"collection": hnsw, "query": text, "mode": mode, "filter": f, "snapshot": sids[hnsw]}
                out.append({"name": f"filter|{qid}|{f}|{mode}", "search": args})
        args = {"collection": hnsw, "query": text, "as_of": AS_OF, "snapshot": sids[hnsw]}
        out.append({"name": f"as_of|{qid}", "search": args})
    text = queries[0][1]
    for name, bad in (
        ("mode", {"collection": COLLECTION, "query": text, "mode": "sideways"}),
        ("collection", {"collection": "no_such_collection", "query": text}),
        ("field", {"collection": hnsw, "query": text, "filter": "colour = 'red'"}),
        ("empty", {"collection": COLLECTION, "query": ""}),
        ("k", {"collection": COLLECTION, "query": text, "k": True}),
        ("key", {"collection": COLLECTION, "query": text, "ef": 40}),
        ("params", {"collection": COLLECTION, "query": text, "params": {"depth": -1}}),
    ):
        out.append({"name": f"error|{name}", "search": bad})
    out.append({"name": "collections", "path": "/api/collections", "tool": ("list_collections", {})})
    for name in sids:
        out.append({"name": f"collection|{name}", "path": f"/api/collections/{name}"})
    first_doc = json.loads((DATA / "corpus.jsonl").open(encoding="utf-8").readline())["_id"]
    for doc_id in (str(first_doc), "no_such_document"):
        args = {"collection": COLLECTION, "doc_id": doc_id, "snapshot": sid}
        out.append({"name": f"document|{doc_id}", "tool": ("get_document", args)})
    for qid, text in queries[:ASK_QUERIES]:
        out.append({"name": f"ask|{qid}", "ask": {"collection": COLLECTION, "question": text, "snapshot": sid}})
    out.append({"name": "ask|error", "ask": {"collection": COLLECTION, "question": text, "chunks": 0}})
    return out


def _without_timings(body: str) -> str:
    """``body`` with a search response's ``"timings":{...}`` cut out (its values are milliseconds of this run)."""
    return re.sub(r',"timings":\{[^{}]*\}', "", body)


def run_http(eng: Engine, calls: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Each call's status and body bytes from the HTTP app in process (FastAPI's TestClient)."""
    from fastapi.testclient import TestClient

    from ranklock.http import create_app

    with TestClient(create_app(eng)) as client:
        for c in calls:
            if "search" in c:
                r = client.post("/api/search", json=c["search"])
            elif "ask" in c:
                r = client.post("/api/ask", json=c["ask"])
            elif "path" in c:
                r = client.get(c["path"])
            else:
                continue
            yield f"http|{c['name']}", f"status={r.status_code}\n{_without_timings(r.text)}"
            if "get" in c:
                r = client.get("/api/search", params=c["get"])
                yield f"http-get|{c['name']}", f"status={r.status_code}\n{_without_timings(r.text)}"


def run_mcp(home: str, calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each call's tool result from ``python -m ranklock mcp`` over stdio (the MCP SDK's client), in order.

    The server runs the code this process imported (its ``src`` on ``PYTHONPATH``), with this
    process's environment (no query log, no result cache).
    """
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    src = str(Path(ranklock.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ranklock", "mcp", "--home", home], env=env)
    tools: list[tuple[str, str, dict[str, Any]]] = []
    for c in calls:
        if "tool" in c:
            tools.append((c["name"], *c["tool"]))
        tools += [(c["name"], kind, c[kind]) for kind in ("search", "ask") if kind in c]

    def shown(result: Any) -> str:
        text = result.content[0].text if result.content else ""
        structured = result.structured_content
        if isinstance(structured, dict):
            structured = {k: v for k, v in structured.items() if k != "timings"}
            text = json.dumps(structured, ensure_ascii=False)
        return f"error={bool(result.is_error)}\n{text}"

    async def main() -> list[tuple[str, str]]:
        got: list[tuple[str, str]] = []
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                for name, tool, args in tools:
                    got.append((f"mcp|{name}", shown(await s.call_tool(tool, args))))
        return got

    return list(anyio.run(main))


def run_all(args: argparse.Namespace, sids: dict[str, int]) -> Iterator[dict[str, Any]]:
    _memoise_embedder()
    with Engine(home=args.home, log_queries=False) as eng:
        if "cli" in args.surfaces:
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
        calls = api_cases(args.variants, sids)
        served: list[tuple[str, str]] = []
        if "http" in args.surfaces:
            served += run_http(eng, calls)
        if "mcp" in args.surfaces:
            served += run_mcp(args.home, calls)
        for name, out in served:
            surface, _, case = name.partition("|")
            yield {
                "qid": case,
                "mode": "",
                "k": 0,
                "variant": surface,
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
            "surfaces": args.surfaces,
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
    args.surfaces = header.get("surfaces", ["cli"])  # a baseline of before --surfaces holds the CLI's alone
    sids = {k: int(v) for k, v in header.get("snapshots", {COLLECTION: header["snapshot"]}).items()}
    sid = sids[COLLECTION]
    t = time.perf_counter()
    stats = {"searches": 0, "identical": 0, "different": 0, "missing": 0, "sql_texts": 0, "sql_identical": 0}
    #: Outputs compared per interface (``cli`` counts search_sql texts too), and how many of them differ.
    surfaces = {name: {"outputs": 0, "different": 0} for name in args.surfaces}
    diffs: list[str] = []
    seen = set()
    different: list[str] = []
    for row in run_all(args, sids):
        key = _key(row)
        seen.add(key)
        is_sql = row["variant"] == "search_sql"
        surface = row["variant"].removesuffix("-get") if row["variant"] in ("http", "http-get", "mcp") else "cli"
        surfaces[surface]["outputs"] += 1
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
            surfaces[surface]["different"] += 1
            different.append(key)
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
    print("  ".join(f"{name}: {n['outputs']} outputs, {n['different']} different" for name, n in surfaces.items()))
    for d in diffs:
        print(d)
    summary = {
        **stats,
        "surfaces": surfaces,
        "different_keys": different,
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
    rec.add_argument(
        "--surfaces",
        type=lambda v: [x for x in v.split(",") if x],
        default=["cli"],
        help=f"comma-separated, of {', '.join(SURFACES)}: the interfaces whose outputs are recorded",
    )
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
    if args.cmd == "record" and set(args.surfaces) - set(SURFACES):
        ap.error(f"--surfaces takes {', '.join(SURFACES)}, got {','.join(args.surfaces)}")
    return record(args) if args.cmd == "record" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
