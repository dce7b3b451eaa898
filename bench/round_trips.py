"""Statements and network waits of one search, counted at psycopg's connection and on the wire.

Issue 49's count: a default search (query log on, the query vector cached) on the bundled examples
corpus, lexical, hybrid, hybrid under a filter, and hybrid with ``offset`` and with ``rerank``.
Each case runs twice first (the vector is cached, the process has seen the collection), then once
counted:

- ``statements``: ``Cursor.execute`` and ``Connection.execute`` calls (a pipeline's each count);
- ``waits``: psycopg ``Connection.wait`` calls outside pipeline mode that waited on the socket at all
  (a commit of an idle autocommit connection does not), plus one per pipeline sync that had
  statements to send (a pipeline's statements travel together and count once);
- ``turns`` (``--strace``): the same search under ``strace``: how many times the process, having
  sent bytes on a database socket, then read a reply on it (send -> receive turns), whatever psycopg
  believes; the independent check of the ``waits`` column;
- ``searches``: how many times ``Engine.search`` was entered (``offset`` and ``rerank`` must be 1).

    python bench/round_trips.py --home /tmp/rt-home            # ingests examples/corpus.jsonl if missing
    python bench/round_trips.py --home /tmp/rt-home --strace   # also the wire count

Prints a table and writes bench/out/round_trips.json.  Not a latency benchmark.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

CASES: dict[str, dict[str, Any]] = {
    "lexical": {"mode": "lexical"},
    "hybrid": {"mode": "hybrid"},
    "hybrid, filter": {"mode": "hybrid", "filter": "year >= 2020"},
    "hybrid, offset": {"mode": "hybrid", "k": 3, "offset": 3},
    "hybrid, rerank": {"mode": "hybrid", "k": 5, "rerank": 8},
    # This process has not seen the text before (its memos forgotten; the vector is in the embedding cache).
    "hybrid, unseen text": {"mode": "hybrid", "forget": True},
    "hybrid, filter, unseen": {"mode": "hybrid", "filter": "year >= 2020", "forget": True},
}
QUERY = "how do vaccines work"
MARK = b"ranklock-round-trips:"


class Counter:
    """psycopg's statements and waits, by patching its connection and cursor classes (this process only)."""

    def __init__(self) -> None:
        import psycopg

        self.n: collections.Counter[str] = collections.Counter()
        counter = self
        wait, execute, cexecute = psycopg.Connection.wait, psycopg.Cursor.execute, psycopg.Connection.execute
        sync = psycopg.Pipeline.sync
        pexit = psycopg.Pipeline.__exit__

        def counted_wait(conn: Any, gen: Any, *a: Any, **kw: Any) -> Any:
            if conn._pipeline is not None:
                return wait(conn, gen, *a, **kw)

            def watched() -> Any:
                # Counted once it asks to wait on the socket: a generator that needs no I/O never does.
                try:
                    state = next(gen)
                    counter.n["waits"] += 1
                    while True:
                        state = gen.send((yield state))
                except StopIteration as stop:
                    return stop.value

            return wait(conn, watched(), *a, **kw)

        def counted_execute(cur: Any, *a: Any, **kw: Any) -> Any:
            counter.n["statements"] += 1
            if cur.connection._pipeline is not None:
                counter.n["pending"] += 1
            return execute(cur, *a, **kw)

        def counted_cexecute(conn: Any, *a: Any, **kw: Any) -> Any:
            # Connection.execute opens a cursor and calls Cursor.execute: counted there.
            return cexecute(conn, *a, **kw)

        def counted_sync(pipe: Any) -> Any:
            if counter.n["pending"]:
                counter.n["waits"] += 1
                counter.n["pending"] = 0
            return sync(pipe)

        def counted_exit(pipe: Any, *a: Any) -> Any:
            if counter.n["pending"]:
                counter.n["waits"] += 1
                counter.n["pending"] = 0
            return pexit(pipe, *a)

        psycopg.Connection.wait = counted_wait  # type: ignore[method-assign]
        psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
        psycopg.Connection.execute = counted_cexecute  # type: ignore[method-assign]
        psycopg.Pipeline.sync = counted_sync  # type: ignore[method-assign]
        psycopg.Pipeline.__exit__ = counted_exit  # type: ignore[method-assign]


def ensure_collection(home: Path) -> None:
    from ranklock import Engine, NotFound

    with Engine(home=home) as eng:
        try:
            eng.collection("docs")
        except NotFound:
            eng.ingest("docs", ROOT / "examples" / "corpus.jsonl")


def forget_memos(eng: Any) -> None:
    """Forget what this process read of queries (probes, vectors), as a process that never saw the text."""
    contexts = getattr(getattr(eng, "searching", None), "contexts", None)
    if contexts is None:
        return  # code from before the pipeline keeps no memo: nothing to forget
    from ranklock.search.context import Memo

    contexts.probes, contexts.vectors = Memo(), Memo()


def run_cases(home: Path, *, marks: bool) -> dict[str, dict[str, int | float]]:
    """Every case: two warm-up runs, then one counted (and bracketed by marks for strace)."""
    from ranklock import Engine
    from ranklock.rerank.base import RerankerInfo

    class Lengths:
        """A reranker that needs no model: longer texts first (the count is of the search, not the model)."""

        name = "lengths"

        def score(self, query: str, texts: list[str]) -> list[float]:  # noqa: ARG002 (the protocol)
            return [float(len(t)) for t in texts]

        def info(self) -> RerankerInfo:
            return RerankerInfo(name="lengths", model="len", weights_sha256=None)

    counter = Counter()
    entered = collections.Counter[str]()
    original = Engine.search

    def search(self: Engine, *a: Any, **kw: Any) -> Any:
        entered["searches"] += 1
        return original(self, *a, **kw)

    Engine.search = search  # type: ignore[method-assign]
    out: dict[str, dict[str, int | float]] = {}
    null = os.open(os.devnull, os.O_WRONLY)
    with Engine(home=home, log_queries=True, reranker=Lengths()) as eng:  # type: ignore[arg-type]
        for name, case in CASES.items():
            kw = {k: v for k, v in case.items() if k != "forget"}
            for _ in range(2):
                eng.search("docs", QUERY, **kw)
            if case.get("forget"):
                forget_memos(eng)
            counter.n.clear()
            entered.clear()
            if marks:
                os.write(null, MARK + name.encode() + b":start")
            t0 = time.perf_counter()
            eng.search("docs", QUERY, **kw)
            ms = (time.perf_counter() - t0) * 1000
            if marks:
                os.write(null, MARK + name.encode() + b":end")
            out[name] = {
                "statements": counter.n["statements"],
                "waits": counter.n["waits"],
                "searches": entered["searches"],
                "ms": round(ms, 2),
            }
    return out


_SYSCALL = re.compile(r'^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((\d+),\s*("(?:[^"\\]|\\.)*")?.*?\)\s+=\s+(-?\d+)')


def wire_turns(trace: str, socket_fds: set[int] | None = None) -> dict[str, int]:
    """Send -> receive turns between each case's marks in an ``strace -f`` log of ``run_cases(marks=True)``.

    A turn is a successful read of a database socket after at least one write to it since the last
    read: the process asked, then waited for the answer.  Database sockets are the file descriptors
    written with sendto/write and read with recvfrom/read other than the marks' /dev/null.
    """
    turns: dict[str, int] = {}
    current: str | None = None
    sent: dict[int, bool] = {}
    count = 0
    for line in trace.splitlines():
        m = _SYSCALL.match(line)
        if not m:
            continue
        call, fd, arg, ret = m.group(1), int(m.group(2)), m.group(3) or "", int(m.group(4))
        if call == "write" and MARK.decode() in arg:
            name, _, edge = arg.strip('"')[len(MARK) :].rpartition(":")
            if edge == "start":
                current, count, sent = name, 0, {}
            elif current is not None:
                turns[current] = count
                current = None
            continue
        if current is None or (socket_fds is not None and fd not in socket_fds):
            continue
        if call in ("sendto", "sendmsg") and ret > 0:
            sent[fd] = True
        elif call in ("recvfrom", "recvmsg") and ret > 0 and sent.get(fd):
            count += 1
            sent[fd] = False
    return turns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--strace", action="store_true", help="also count send -> receive turns on the wire")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "round_trips.json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("RANKLOCK_EMBED_SERVICE", "0")
    if args.worker:
        print(json.dumps(run_cases(args.home, marks=True)))
        return
    ensure_collection(args.home)
    counted = run_cases(args.home, marks=False)
    turns: dict[str, int] = {}
    if args.strace:
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "trace"
            cmd = [sys.executable, __file__, "--home", str(args.home), "--worker"]
            subprocess.run(
                [
                    "strace",
                    "-f",
                    "-qq",
                    "-s",
                    "64",
                    "-e",
                    "trace=sendto,recvfrom,sendmsg,recvmsg,write",
                    "-o",
                    str(log),
                    *cmd,
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            turns = wire_turns(log.read_text(encoding="utf-8", errors="replace"))
    print(f"{'search':16s} {'statements':>10s} {'waits':>6s} {'turns':>6s} {'searches':>8s} {'ms':>8s}")
    for name, row in counted.items():
        t = turns.get(name, "-")
        print(f"{name:16s} {row['statements']:>10} {row['waits']:>6} {t!s:>6} {row['searches']:>8} {row['ms']:>8.1f}")
    report = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": os.getloadavg(),
        "cases": {name: {**row, "turns": turns.get(name)} for name, row in counted.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
