"""Search latency of two code trees side by side: the same SciFact queries, interleaved rounds.

For a refactor that must not cost time (issue 23: "latency unchanged, measured side by side before
and after"), each tree runs in its own process with its own ``PYTHONPATH`` against its own home
(a copy of one home, so both read the same documents and snapshot), and the rounds alternate
which tree goes first, so neither gets a warmer page cache or a quieter minute.  A round is one
untimed pass over the queries (warm-up) and one timed pass, every query in every mode in turn.

    python bench/side_by_side.py --tree before=/work/wt-pre23:/work/lat-pre \\
        --tree after=/work/wt-lat:/work/lat-main --rounds 3 --out bench/out/side_by_side.json

Only meaningful on a quiet machine: the load average is printed with each round.  Query log and
result cache are off (``RANKLOCK_LOG_QUERIES=0``, ``RANKLOCK_RESULT_CACHE=0``), so every search
runs its statements; query embeddings come from the home's embedding cache after the warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def queries(n: int) -> list[str]:
    """The first ``n`` SciFact test queries in query-id order (those with judgements)."""
    judged: set[str] = set()
    with (DATA / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        next(f)
        judged.update(line.split("\t")[0] for line in f if line.strip())
    texts: dict[str, str] = {}
    with (DATA / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in judged:
                texts[q["_id"]] = q["text"]
    return [texts[k] for k in sorted(texts, key=int)][:n]


def worker(home: str, collection: str, n: int, modes: list[str]) -> None:
    """One round in this process: a warm-up pass, then every query in every mode, timed (ms) to stdout."""
    from ranklock import Engine  # the tree's own, from PYTHONPATH

    eng = Engine(home=home, log_queries=False)
    qs = queries(n)
    for text in qs:
        for mode in modes:
            eng.search(collection, text, k=10, mode=mode)
    ms: dict[str, list[float]] = {m: [] for m in modes}
    for text in qs:
        for mode in modes:
            t0 = time.perf_counter()
            eng.search(collection, text, k=10, mode=mode)
            ms[mode].append((time.perf_counter() - t0) * 1000)
    eng.close()
    print(json.dumps(ms))


def pct(xs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=20, method="inclusive")
    return {"n": len(xs), "p50": round(statistics.median(xs), 2), "p95": round(q[18], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", default=[], help="NAME=CODE_TREE:HOME (twice)")
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--modes", default="lexical,semantic,hybrid")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--worker", nargs=2, metavar=("HOME", "COLLECTION"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    modes = args.modes.split(",")
    if args.worker:
        worker(args.worker[0], args.worker[1], args.queries, modes)
        return
    if len(args.tree) < 2:
        sys.exit("give two trees: --tree before=CODE_TREE:HOME --tree after=CODE_TREE:HOME")
    trees: list[tuple[str, str, str]] = []
    for spec in args.tree:
        name, _, rest = spec.partition("=")
        code, _, home = rest.partition(":")
        if not (name and code and home):
            sys.exit(f"--tree {spec!r}: expected NAME=CODE_TREE:HOME")
        trees.append((name, code, home))
    times: dict[str, dict[str, list[float]]] = {t[0]: {m: [] for m in modes} for t in trees}
    loads: list[list[float]] = []
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        for name, code, home in order:
            env = {
                **os.environ,
                "PYTHONPATH": str(Path(code) / "src"),
                "RANKLOCK_LOG_QUERIES": "0",
                "RANKLOCK_RESULT_CACHE": "0",
            }
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    home,
                    args.collection,
                    "--queries",
                    str(args.queries),
                    "--modes",
                    args.modes,
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                sys.exit(f"{name} ({code}, {home}) failed:\n{done.stderr[-3000:]}")
            out = done.stdout
            for mode, ms in json.loads(out.strip().splitlines()[-1]).items():
                times[name][mode].extend(ms)
            loads.append(list(os.getloadavg()))
            print(f"round {r + 1} {name}: load {loads[-1][0]:.2f}", file=sys.stderr)
    report: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "trees": {name: {"code": code, "home": home} for name, code, home in trees},
        "loadavg": loads,
        "ms": {name: {m: pct(v) for m, v in per.items()} for name, per in times.items()},
    }
    print(f"{'mode':<10}" + "".join(f"{n + ' p50':>14}{n + ' p95':>14}" for n, _, _ in trees))
    for m in modes:
        row = "".join(f"{report['ms'][n][m]['p50']:>14.2f}{report['ms'][n][m]['p95']:>14.2f}" for n, _, _ in trees)
        print(f"{m:<10}{row}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
