"""How long `ranklock search` takes from a shell, cold and warm (issue 16).

A CLI process always starts without the model loaded, so a hybrid or semantic search of a query
not seen before pays for importing sentence-transformers/torch and loading all-MiniLM-L6-v2
before its query embedding.  A query seen before takes its embedding from the database's
embedding cache (and may be answered from the result cache) and never loads the model; a lexical
search never embeds.  Every timed query here is therefore new (a random word appended), except
the row that measures the repeat.  On the `demo` collection:

* the wall time of `ranklock search` processes: hybrid (new query: cold), hybrid (the same query
  again: cache), lexical, ``--runs`` each;
* inside one process (what `ranklock serve` sees): the first hybrid search (model load included)
  and the following ones (model warm).

Prints a table and writes bench/out/cli_startup.json.  The machine is shared: state the load
average next to any figure quoted from here, and treat the figures as rough.

    python bench/cli_startup.py --home /tmp/bench-home      # runs `ranklock demo` there if missing
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

ROOT = Path(__file__).resolve().parents[1]
QUERY = "how does retrieval augmented generation cite sources"


def new_query() -> str:
    return f"{QUERY} {uuid.uuid4().hex[:8]}"


def cli_run(home: Path, mode: str, query: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ranklock", "search", "demo", query, "--mode", mode, "--home", str(home), "--json"],
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from ranklock import Engine
    from ranklock.errors import NotFound

    with Engine(home=args.home) as probe:
        try:
            probe.collection("demo")
        except NotFound:
            subprocess.run([sys.executable, "-m", "ranklock", "demo", "--home", str(args.home)], check=True)

    load_before = Path("/proc/loadavg").read_text().split()[:3]
    cli = {
        "hybrid_new_query": [cli_run(args.home, "hybrid", new_query()) for _ in range(args.runs)],
        "hybrid_repeated_query": [cli_run(args.home, "hybrid", QUERY) for _ in range(args.runs)],
        "lexical": [cli_run(args.home, "lexical", new_query()) for _ in range(args.runs)],
    }

    t = time.perf_counter()
    with Engine(home=args.home) as eng:
        opened = time.perf_counter() - t
        inproc = []
        for _ in range(args.runs + 1):
            t = time.perf_counter()
            eng.search("demo", new_query(), k=10)
            inproc.append(time.perf_counter() - t)
    load_after = Path("/proc/loadavg").read_text().split()[:3]

    rows = [
        ("CLI hybrid, new query: model load (cold), median (s)", statistics.median(cli["hybrid_new_query"])),
        ("CLI hybrid, repeated query: cached (warm), median (s)", statistics.median(cli["hybrid_repeated_query"])),
        ("CLI lexical (no model), median (s)", statistics.median(cli["lexical"])),
        ("in-process: Engine open (s)", opened),
        ("in-process: 1st hybrid search, model load included (s)", inproc[0]),
        ("in-process: later hybrid searches, median (s)", statistics.median(inproc[1:])),
    ]
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}")
    for name, v in rows:
        print(f"{name:<58} {v:7.2f}")
    out = ROOT / "bench" / "out" / "cli_startup.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "query": QUERY,
                "runs": args.runs,
                "cli_seconds": cli,
                "engine_open_seconds": opened,
                "inprocess_search_seconds": inproc,
                "loadavg_before": load_before,
                "loadavg_after": load_after,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
