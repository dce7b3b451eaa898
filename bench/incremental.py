"""Incremental writes on segments (issue 24): what a write costs, and what many small ones do to search.

Four parts, each on its own collections in ``--home``:

* ``writes``: for each size in ``--sizes`` (generated one-chunk documents, see
  bench/large_corpus.py) the full build, then 20 one-document adds, 5 one-document
  changes, 5 one-document deletes (wall time of the call, p50 / p95 / max) and one add
  of 10,000 documents (its share of the full build);
* ``small``: ``--small`` documents built in one go, against the same documents as
  ``--small - 100`` built at once plus 100 one-document ingests (the merge policy on, and
  with ``--no-merge`` also with merging off): lexical and hybrid latency over 200 queries
  (p50 / p95), timed once every variant is built, each query on every variant in turn,
  ``--rounds`` times; storage (every table of the active snapshot's segments) and lexical
  byte identity of the hits.  ``INCREMENTAL_RUN=<run>`` reuses the collections an earlier
  run built (their names end in its run label) and only times them;
* ``window``: 24 months of documents in a month-windowed collection against a collection
  of one month: a search filtered to that month reads one segment, latency side by side;
* ``scifact``: SciFact (real MiniLM vectors, from the embedding cache of ``--home``) built in
  one go against 5,083 documents plus 100 one-document ingests: lexical, hybrid and exact
  semantic hits byte for byte over the 300 test queries, before and after a full merge.

Prints a table per part and writes JSON::

    python bench/incremental.py --home /work/bench-home --parts writes,small,window,scifact \
        --sizes 20000,200000 --out bench/out/incremental.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from large_corpus import FIELDS, GeneratedEmbedder, generate, queries
from ranklock import Document, Engine
from ranklock.snapshot import merge as merge_policy

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def pct(xs: Sequence[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def summary(ms: Sequence[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": round(pct(ms, 50), 1), "p95": round(pct(ms, 95), 1), "max": round(max(ms), 1)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1000, out


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


def engine(home: str) -> tuple[Engine, GeneratedEmbedder]:
    eng = Engine(home=home, embedder=None, log_queries=False)
    eng.settings.result_cache = False  # every search runs its SQL
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)  # register under its id so the collections resolve it
    return eng, emb


#: Collections are named per run (ranklock has no collection drop): a rerun never reads an earlier run's segments.
RUN = os.environ.get("INCREMENTAL_RUN") or time.strftime("%m%d%H%M", time.gmtime())


def fresh(name: str) -> str:
    return f"{name}_{RUN}"


def storage(eng: Engine, name: str) -> int:
    """Bytes of every table (with its indexes and TOAST) of the active snapshot's segments."""
    sid = eng.collection(name).active_snapshot_id
    row = eng.db.fetchone(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes FROM pg_class AS c "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace AND n.nspname = 'ranklock_data' "
        "JOIN ranklock.snapshot_segments AS ss ON ss.snapshot_id = %s "
        "AND c.relname ~ ('^[a-z]+_' || ss.segment_id || '$') WHERE c.relkind = 'r'",
        [sid],
    )
    return int(row["bytes"]) if row else 0


def segment_count(eng: Engine, name: str) -> int:
    sid = eng.collection(name).active_snapshot_id
    row = eng.db.fetchone("SELECT count(*) AS n FROM ranklock.snapshot_segments WHERE snapshot_id = %s", [sid])
    return int(row["n"]) if row else 0


def hits(res: Any) -> str:
    """The hits of a result as bytes to compare (ids, ranks, every score), not its timings or snapshot."""
    return json.dumps(json.loads(res.to_json())["hits"], sort_keys=True)


def run_queries(eng: Engine, name: str, qs: Sequence[str], mode: str, **kw: Any) -> tuple[list[float], list[str]]:
    for q in qs[:10]:  # warm the caches and the plan once
        eng.search(name, q, k=10, mode=mode, **kw)
    lat, out = [], []
    for q in qs:
        ms, res = timed(lambda q=q: eng.search(name, q, k=10, mode=mode, **kw))
        lat.append(ms)
        out.append(hits(res))
    return lat, out


def build(eng: Engine, emb: GeneratedEmbedder, name: str, docs: Sequence[Document], **create: Any) -> float:
    t = time.perf_counter()
    eng.ingest(name, docs, replace=True, create={"fields": FIELDS, "index": "hnsw", "embedder": emb.id, **create})
    return time.perf_counter() - t


def writes_one(eng: Engine, emb: GeneratedEmbedder, size: int) -> dict[str, Any]:
    name = fresh(f"inc_writes_{size}")
    docs = generate(size + 10_000 + 40)
    base, extra, batch = docs[:size], docs[size : size + 40], docs[size + 40 :]
    load0 = loadavg()
    full_s = build(eng, emb, name, base)
    print(f"  {size:,}: full build {full_s:.1f} s", flush=True)
    qs = queries(200)
    lex_full, _ = run_queries(eng, name, qs, "lexical")  # one segment: the latency of a full build
    hyb_full, _ = run_queries(eng, name, qs, "hybrid")
    add, merges = [], 0
    for d in extra[:20]:
        ms, rep = timed(lambda d=d: eng.ingest(name, [d]))
        add.append(ms)
        merges += rep.merged is not None
    change = []
    for i in range(5):
        d = base[(i * 997) % len(base)]
        new = Document(d.doc_id, d.title, d.body + " revised", d.metadata)
        change.append(timed(lambda new=new: eng.ingest(name, [new]))[0])
    delete = [timed(lambda i=i: eng.delete(name, [base[(1 + i * 991) % len(base)].doc_id]))[0] for i in range(5)]
    add10k_ms, _ = timed(lambda: eng.ingest(name, batch))
    # Searches over what the writes left (several segments, masked documents).
    lex, _ = run_queries(eng, name, qs, "lexical")
    hyb, _ = run_queries(eng, name, qs, "hybrid")
    return {
        "size": size,
        "full_build_s": round(full_s, 1),
        "add_1_ms": summary(add),
        "merges_during_adds": merges,
        "change_1_ms": summary(change),
        "delete_1_ms": summary(delete),
        "add_10k_s": round(add10k_ms / 1000, 1),
        "add_10k_share_of_full": round(add10k_ms / 1000 / full_s, 4),
        "segments_after": segment_count(eng, name),
        "lexical_ms_full_build": summary(lex_full),
        "hybrid_ms_full_build": summary(hyb_full),
        "lexical_ms_after": summary(lex),
        "hybrid_ms_after": summary(hyb),
        "load": [load0, loadavg()],
    }


def part_writes(eng: Engine, emb: GeneratedEmbedder, sizes: Sequence[int]) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        rows.append(writes_one(eng, emb, size))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def exists(eng: Engine, name: str) -> bool:
    return any(c.name == name for c in eng.collections())


def part_small(eng: Engine, emb: GeneratedEmbedder, n: int, no_merge: bool, rounds: int) -> dict[str, Any]:
    """Every variant built first (or found, from an earlier ``--run``), then timed in interleaved rounds.

    Each query runs on every variant in turn, ``rounds`` times over: a drift of
    the machine (a cron job, the page cache) then weighs on every variant
    alike, instead of on whichever was measured when it happened.
    """
    docs = generate(n)
    qs = queries(200)
    load0 = loadavg()
    out: dict[str, Any] = {"documents": n, "rounds": rounds, "variants": {}}
    variants = [("one_go", None), ("100_small_merge_on", merge_policy.MAX_SMALL)]
    if no_merge:
        variants.append(("100_small_merge_off", 10**9))
    names = {}
    for label, max_small in variants:
        name = names[label] = fresh(f"inc_small_{label}")
        build_s = None
        if not exists(eng, name):
            if max_small is None:
                build_s = build(eng, emb, name, docs)
            else:
                build_s = build(eng, emb, name, docs[:-100])
                saved = merge_policy.MAX_SMALL
                merge_policy.MAX_SMALL = max_small
                try:
                    for d in docs[-100:]:
                        eng.ingest(name, [d])
                finally:
                    merge_policy.MAX_SMALL = saved
        out["variants"][label] = {
            "build_s": None if build_s is None else round(build_s, 1),
            "segments": segment_count(eng, name),
            "storage_bytes": storage(eng, name),
        }
    lat: dict[tuple[str, str], list[float]] = {}
    first: dict[tuple[str, str], list[str]] = {}
    for mode in ("lexical", "hybrid"):
        for label in names:
            for q in qs[:10]:  # warm the caches and the plan once
                eng.search(names[label], q, k=10, mode=mode)
        for r in range(rounds):
            for q in qs:
                for label in names:
                    ms, res = timed(lambda q=q, name=names[label], mode=mode: eng.search(name, q, k=10, mode=mode))
                    lat.setdefault((label, mode), []).append(ms)
                    if r == 0:
                        first.setdefault((label, mode), []).append(hits(res))
    one = out["variants"]["one_go"]
    for label, v in out["variants"].items():
        v["lexical_ms"] = summary(lat[(label, "lexical")])
        v["hybrid_ms"] = summary(lat[(label, "hybrid")])
        if label != "one_go":
            pairs = zip(first[(label, "lexical")], first[("one_go", "lexical")], strict=True)
            v["lexical_identical"] = sum(a == b for a, b in pairs)
            v["lexical_p95_ratio"] = round(v["lexical_ms"]["p95"] / one["lexical_ms"]["p95"], 2)
            v["hybrid_p95_ratio"] = round(v["hybrid_ms"]["p95"] / one["hybrid_ms"]["p95"], 2)
            v["storage_ratio"] = round(v["storage_bytes"] / one["storage_bytes"], 3)
        print(label, json.dumps(v), flush=True)
    out["queries"] = len(qs)
    out["load"] = [load0, loadavg()]
    return out


def part_window(eng: Engine, emb: GeneratedEmbedder, per_month: int) -> dict[str, Any]:
    docs = generate(24 * per_month)
    dated = [
        Document(d.doc_id, d.title, d.body, {**d.metadata, "published": f"{2023 + i // 12}-{i % 12 + 1:02d}-15"})
        for i in range(24)
        for d in docs[i * per_month : (i + 1) * per_month]
    ]
    month = 14  # 2024-03
    fields = [*FIELDS, "published:date!"]
    load0 = loadavg()
    wide, one = fresh("inc_window_24"), fresh("inc_window_1")
    wide_s = build(eng, emb, wide, dated, fields=fields, window="published:month")
    one_s = build(eng, emb, one, dated[month * per_month : (month + 1) * per_month], fields=fields)
    flt = 'published >= "2024-03-01" and published < "2024-04-01"'
    qs = queries(200)
    routed = eng.search(wide, qs[0], k=10, mode="lexical", filter=flt)
    segments_read = len(routed.snapshot.segments)
    out: dict[str, Any] = {
        "per_month": per_month,
        "build_s": {"windowed_24": round(wide_s, 1), "one_month": round(one_s, 1)},
        "segments": segment_count(eng, wide),
        "segments_read": segments_read,
        "params_segments": routed.params.get("segments"),
    }
    for mode in ("lexical", "hybrid"):
        w, wh = run_queries(eng, wide, qs, mode, filter=flt)
        o, oh = run_queries(eng, one, qs, mode, filter=flt)
        out[mode] = {
            "windowed_ms": summary(w),
            "one_month_ms": summary(o),
            "p95_ratio": round(pct(w, 95) / pct(o, 95), 2),
            "same_ids": sum(
                [h["doc_id"] for h in json.loads(a)] == [h["doc_id"] for h in json.loads(b)]
                for a, b in zip(wh, oh, strict=True)
            ),
        }
    out["load"] = [load0, loadavg()]
    print(json.dumps(out), flush=True)
    return out


def part_scifact(home: str) -> dict[str, Any]:
    from ranklock.ingest.loaders import load_corpus

    eng = Engine(home=home, log_queries=False)
    eng.settings.result_cache = False
    docs = list(load_corpus(DATA / "scifact"))
    docs.sort(key=lambda d: d.doc_id)
    with open(DATA / "scifact" / "queries.jsonl", encoding="utf-8") as fh:
        all_q = {str(r["_id"]): r["text"] for r in map(json.loads, fh)}
    with open(DATA / "scifact" / "qrels" / "test.tsv", encoding="utf-8") as fh:
        test_ids = sorted({line.split("\t")[0] for line in list(fh)[1:]})
    qs = [all_q[q] for q in test_ids]
    load0 = loadavg()
    one = fresh("inc_scifact_one")
    t = time.perf_counter()
    eng.ingest(one, docs, replace=True)
    out: dict[str, Any] = {"documents": len(docs), "queries": len(qs), "build_s": {"one_go": 0.0}}
    out["build_s"]["one_go"] = round(time.perf_counter() - t, 1)
    modes = {"lexical": {}, "hybrid": {}, "exact_semantic": {"exact_threshold": 10**12}}
    reference = {
        mode: [hits(eng.search(one, q, k=10, mode=mode.replace("exact_", ""), **kw)) for q in qs]
        for mode, kw in modes.items()
    }

    def compare(name: str) -> dict[str, Any]:
        res: dict[str, Any] = {"segments": segment_count(eng, name)}
        for mode, kw in modes.items():
            got = [hits(eng.search(name, q, k=10, mode=mode.replace("exact_", ""), **kw)) for q in qs]
            res[mode] = sum(x == y for x, y in zip(got, reference[mode], strict=True))
        print(name, json.dumps(res), flush=True)
        return res

    for label, max_small in (("merge_on", merge_policy.MAX_SMALL), ("merge_off", 10**9)):
        name = fresh(f"inc_scifact_{label}")
        saved = merge_policy.MAX_SMALL
        merge_policy.MAX_SMALL = max_small
        try:
            t = time.perf_counter()
            eng.ingest(name, docs[:-100], replace=True)
            one_doc = [timed(lambda d=d, name=name: eng.ingest(name, [d]))[0] for d in docs[-100:]]
            out["build_s"][f"5083_plus_100_{label}"] = round(time.perf_counter() - t, 1)
        finally:
            merge_policy.MAX_SMALL = saved
        out[f"one_doc_ingest_ms_{label}"] = summary(one_doc)
        out[f"identical_{label}"] = compare(name)
        eng.merge(name, everything=True)
        out[f"identical_{label}_after_full_merge"] = compare(name)
    out["load"] = [load0, loadavg()]
    return out


def ratios(v: dict[str, Any]) -> Callable[[str], str]:
    return lambda key: f" ({v[key]}x)" if key in v else ""


def table(result: dict[str, Any]) -> str:
    """The results as Markdown tables (what docs/benchmarks.md records)."""
    out: list[str] = []
    if "writes" in result:
        out += [
            "| chunks | full build | add 1 (p50 / p95 / max, 20) | change 1 (p50 / p95, 5) "
            "| delete 1 (p50 / p95, 5) | add 10,000 | add 10,000 / full build | segments after "
            "| lexical / hybrid p95 after |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in result["writes"]["rows"]:
            a, c, d = r["add_1_ms"], r["change_1_ms"], r["delete_1_ms"]
            out.append(
                f"| {r['size']:,} | {r['full_build_s']} s | {a['p50']} / {a['p95']} / {a['max']} ms "
                f"| {c['p50']} / {c['p95']} ms | {d['p50']} / {d['p95']} ms | {r['add_10k_s']} s "
                f"| {100 * r['add_10k_share_of_full']:.1f} % | {r['segments_after']} "
                f"| {r['lexical_ms_after']['p95']} / {r['hybrid_ms_after']['p95']} ms |"
            )
        out.append("")
    if "small" in result:
        sm = result["small"]
        out += [
            f"{sm['documents']:,} documents, {sm['queries']} queries"
            f"{f', {rounds} interleaved rounds' if (rounds := sm.get('rounds')) else ''}:",
            "",
            "| built | segments | lexical p50 / p95 | hybrid p50 / p95 | storage | lexical hits identical |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label, v in sm["variants"].items():
            ratio = ratios(v)
            out.append(
                f"| {label} | {v['segments']} | {v['lexical_ms']['p50']} / {v['lexical_ms']['p95']} ms"
                f"{ratio('lexical_p95_ratio')} | {v['hybrid_ms']['p50']} / {v['hybrid_ms']['p95']} ms"
                f"{ratio('hybrid_p95_ratio')} | {v['storage_bytes'] / 2**20:.1f} MiB{ratio('storage_ratio')} "
                f"| {v.get('lexical_identical', '-')} |"
            )
        out.append("")
    if "window" in result:
        w = result["window"]
        out += [
            f"{w['per_month']:,} documents a month, 24 months ({w['segments']} segments); a filter on one month read "
            f"{w['segments_read']} segment (params: {w['params_segments']}):",
            "",
            "| mode | windowed, 24 months (p50 / p95) | one month alone (p50 / p95) | p95 ratio | same ids |",
            "|---|---:|---:|---:|---:|",
        ]
        for mode in ("lexical", "hybrid"):
            m = w[mode]
            out.append(
                f"| {mode} | {m['windowed_ms']['p50']} / {m['windowed_ms']['p95']} ms "
                f"| {m['one_month_ms']['p50']} / {m['one_month_ms']['p95']} ms | {m['p95_ratio']} | {m['same_ids']} |"
            )
        out.append("")
    if "scifact" in result:
        sf = result["scifact"]
        out += [
            f"SciFact, {sf['documents']:,} documents, {sf['queries']} test queries, hits identical to the one-go build:",
            "",
            "| built | segments | lexical | hybrid | exact semantic | one-document ingest p50 / p95 |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label in ("merge_on", "merge_off"):
            if f"identical_{label}" not in sf:
                continue
            ms = sf[f"one_doc_ingest_ms_{label}"]
            for suffix, name in (("", "5,083 + 100 one-document ingests"), ("_after_full_merge", "then merged")):
                r = sf[f"identical_{label}{suffix}"]
                out.append(
                    f"| {name}, merging {label[6:]} | {r['segments']} | {r['lexical']} | {r['hybrid']} "
                    f"| {r['exact_semantic']} | {ms['p50']} / {ms['p95']} ms |"
                )
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home")
    ap.add_argument("--parts", default="writes,small,window,scifact")
    ap.add_argument("--sizes", default="20000,200000", help="Collection sizes (documents = chunks) for 'writes'.")
    ap.add_argument("--small", type=int, default=200_000, help="Documents for 'small'.")
    ap.add_argument("--no-merge", action="store_true", help="'small' also with the merge policy off.")
    ap.add_argument("--rounds", type=int, default=3, help="'small': interleaved timing rounds over the queries.")
    ap.add_argument("--per-month", type=int, default=2000, help="Documents per month for 'window'.")
    ap.add_argument("--out", default="bench/out/incremental.json")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    out_path = Path(args.out)
    result: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else {}
    eng, emb = engine(args.home)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for part in parts:
        print(f"== {part} (load {loadavg()})", flush=True)
        if part == "writes":
            value: Any = part_writes(eng, emb, [int(s) for s in args.sizes.split(",")])
        elif part == "small":
            value = part_small(eng, emb, args.small, args.no_merge, args.rounds)
        elif part == "window":
            value = part_window(eng, emb, args.per_month)
        elif part == "scifact":
            value = part_scifact(args.home)
        else:
            raise SystemExit(f"unknown part {part!r}; known: writes, small, window, scifact")
        result[part] = {"started": started, **({"rows": value} if isinstance(value, list) else value)}
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(result, indent=2))
    print(json.dumps({p: result[p] for p in parts}, indent=2))
    print(table({p: result[p] for p in parts}))


if __name__ == "__main__":
    main()
