"""How a search walks through ranklock's modules: followed from ``Engine.search`` down to the SQL and back.

Issue 49's count: a profile hook (``sys.setprofile``) sees every Python call while one warm search
runs (the query vector cached, the process has seen the collection) and records, for the calls
from one ranklock module into another:

- ``modules``: the ranklock modules the search enters;
- ``calls``: calls from one ranklock module into another;
- ``re-entries``: calls into a module that control had already left during this search (it is not
  on the stack, and was before): what makes a search hard to read top to bottom.  A driver
  resuming a generator of steps (ranklock.store.steps) is that generator's call going on, not a
  new one;
- ``into the facade``: calls into ``ranklock.engine`` from a module below it (a feature or the
  search calling back up).

Standard-library and third-party code (psycopg, pydantic) is not counted, only ranklock's; a
function running inside them that ranklock handed them (a row factory) counts as called by the
module that handed it over.

    python bench/walk.py --home /tmp/rt-home               # examples/corpus.jsonl, as bench/round_trips.py
    python bench/walk.py --home /tmp/rt-home --mode lexical --show

Prints a table (and with ``--show`` every module in the order entered, with its entries) and writes
bench/out/walk.json.  Not a latency benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
PACKAGE = str(ROOT / "src" / "ranklock")
#: ``co_flags`` of a generator function's code (inspect.CO_GENERATOR).
GENERATOR = 0x20

CASES: dict[str, dict[str, Any]] = {
    "lexical": {"mode": "lexical"},
    "hybrid": {"mode": "hybrid"},
    "hybrid, filter": {"mode": "hybrid", "filter": "year >= 2020"},
    "hybrid, offset": {"mode": "hybrid", "k": 3, "offset": 3},
}
QUERY = "how do vaccines work"


def module_of(frame: FrameType) -> str | None:
    """The ranklock module a frame runs in (``search.pipeline``), or None for any other code."""
    path = frame.f_code.co_filename
    if not path.startswith(PACKAGE):
        return None
    rel = Path(path).relative_to(PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts) or "ranklock"


class Walk:
    """The cross-module calls of ranklock code while it is installed (see the module docstring)."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.entries: dict[str, int] = {}
        self.calls = 0
        self.reentries = 0
        self.into_facade: list[str] = []
        self.stack: list[str] = []  # the ranklock module of each open ranklock frame
        # Generator frames already entered: a driver resuming one (a step's answer sent back) is the same
        # call going on, not control coming back; kept alive so that no new frame reuses an id.
        self.generators: dict[int, FrameType] = {}

    def hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            mod = module_of(frame)
            if mod is None:
                return
            caller = self.stack[-1] if self.stack else None
            resumed = id(frame) in self.generators
            if frame.f_code.co_flags & GENERATOR:
                self.generators[id(frame)] = frame
            if resumed:
                self.stack.append(mod)
                return
            if caller is not None and caller != mod:
                self.calls += 1
                if mod in self.entries and mod not in self.stack:
                    self.reentries += 1
                if mod == "engine":
                    self.into_facade.append(f"{caller} -> engine.{frame.f_code.co_name}")
            if mod not in self.entries:
                self.order.append(mod)
                self.entries[mod] = 0
            if caller != mod:
                self.entries[mod] += 1
            self.stack.append(mod)
        elif event == "return" and module_of(frame) is not None and self.stack:
            self.stack.pop()


def run(home: Path, mode_cases: dict[str, dict[str, Any]], show: bool) -> dict[str, Any]:
    from ranklock import Engine, NotFound

    out: dict[str, Any] = {}
    with Engine(home=home, log_queries=True) as eng:
        try:
            eng.collection("docs")
        except NotFound:
            eng.ingest("docs", ROOT / "examples" / "corpus.jsonl")
        for name, kw in mode_cases.items():
            for _ in range(2):
                eng.search("docs", QUERY, **kw)
            walk = Walk()
            sys.setprofile(walk.hook)
            try:
                eng.search("docs", QUERY, **kw)
            finally:
                sys.setprofile(None)
            out[name] = {
                "modules": len(walk.order),
                "calls": walk.calls,
                "reentries": walk.reentries,
                "into_facade": walk.into_facade,
                "entered": {m: walk.entries[m] for m in walk.order},
            }
            if show:
                print(f"\n{name}: " + " -> ".join(f"{m}({walk.entries[m]})" for m in walk.order))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--mode", choices=sorted(CASES), help="one case only")
    ap.add_argument("--show", action="store_true", help="every module, in the order entered")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "walk.json")
    args = ap.parse_args()
    os.environ.setdefault("RANKLOCK_EMBED_SERVICE", "0")
    cases = {args.mode: CASES[args.mode]} if args.mode else CASES
    result = run(args.home, cases, args.show)
    print(f"\n{'search':16s} {'modules':>8s} {'calls':>6s} {'re-entries':>10s} {'into the facade':>16s}")
    for name, row in result.items():
        print(f"{name:16s} {row['modules']:>8} {row['calls']:>6} {row['reentries']:>10} {len(row['into_facade']):>16}")
    report = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cases": result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
