"""`ranklock serve` under concurrent clients: throughput, latency, errors and differing answers (issue 49).

Starts ``ranklock serve`` on the home (loopback, a free port, the rate limit off:
``RANKLOCK_RATE_LIMIT=0``, and every client's searches let run at once: the clients share one address,
and ``RANKLOCK_TOKEN_CONCURRENCY`` (4 by default) would answer the others 429; the query log on as
served by default), waits until it is ready for
hybrid search, then for each client count runs that many clients (threads of this process, one
``http.client`` connection each) for ``--seconds``, every client walking the SciFact test queries
from its own offset with ``GET /api/search?mode=hybrid``.  Each answer's bytes, its ``timings``
and ``query_id`` cut out, are compared with the first answer to the same query: any difference is
a differing answer.  ``--tree`` runs another checkout's code (its ``src`` on ``PYTHONPATH``), so
a before and an after are measured on the same home one after the other.

    python bench/serve_load.py --home /work/bench-identical --clients 1,8 --seconds 20
    python bench/serve_load.py --home /work/bench-identical --tree /work/baseline --clients 1,8

Prints a table and writes bench/out/serve_load.json.  Only meaningful on a quiet machine (the
server, its PostgreSQL and the clients share the cores): the load average is recorded.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from side_by_side import queries  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def canonical(body: bytes) -> str:
    """The answer without what varies run to run (timings, the log id)."""
    doc = json.loads(body)
    doc.pop("timings", None)
    doc.pop("query_id", None)
    return json.dumps(doc, sort_keys=True)


def start(home: Path, tree: Path, port: int, clients: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RANKLOCK_RATE_LIMIT": "0",
        "RANKLOCK_TOKEN_CONCURRENCY": str(clients),
        "PYTHONPATH": str(tree / "src"),
    }
    env.pop("RANKLOCK_DSN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ranklock", "serve", "--port", str(port), "--home", str(home)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ranklock serve exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/readyz")
            ready = json.loads(conn.getresponse().read())
            conn.close()
            if ready.get("status") == "ready" and (ready.get("models") or {}).get("state") == "loaded":
                return proc
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit("ranklock serve was not ready for hybrid search within 300 s")


def cell(
    port: int, collection: str, texts: list[str], clients: int, seconds: float, first: dict[str, str]
) -> dict[str, Any]:
    lat: list[float] = []
    errors: list[str] = []
    differ: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = i * 37
        while time.monotonic() < stop:
            text = texts[n % len(texts)]
            n += 1
            path = "/api/search?" + urllib.parse.urlencode(
                {"collection": collection, "q": text, "k": 10, "mode": "hybrid"}
            )
            t0 = time.perf_counter()
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                with lock:
                    errors.append(type(exc).__name__)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                continue
            ms = (time.perf_counter() - t0) * 1000
            with lock:
                if resp.status != 200:
                    errors.append(str(resp.status))
                    continue
                lat.append(ms)
                got = canonical(body)
                if first.setdefault(text, got) != got:
                    differ.append(text)
        conn.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    ordered = sorted(lat)
    return {
        "clients": clients,
        "searches": len(lat),
        "qps": round(len(lat) / wall, 1),
        "p50_ms": round(statistics.median(ordered), 1) if ordered else None,
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 1) if ordered else None,
        "errors": len(errors),
        "error_kinds": dict(collections.Counter(errors)),
        "differing": len(differ),
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose code serves (default: this one)")
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "serve_load.json")
    args = ap.parse_args()
    texts = queries(args.queries)
    port = free_port()
    counts = [int(c) for c in args.clients.split(",")]
    proc = start(args.home, args.tree.resolve(), port, max(counts))
    first: dict[str, str] = {}
    try:
        cell(port, args.collection, texts, 2, 5.0, first)  # warm: every query vector cached, pages read
        cells = [cell(port, args.collection, texts, c, args.seconds, first) for c in counts]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(f"tree {args.tree}")
    print(
        f"{'clients':>7s} {'searches':>8s} {'qps':>7s} {'p50 ms':>7s} {'p95 ms':>7s} {'errors':>6s} {'differ':>6s} {'load':>5s}"
    )
    for c in cells:
        print(
            f"{c['clients']:>7} {c['searches']:>8} {c['qps']:>7} {c['p50_ms']!s:>7} {c['p95_ms']!s:>7} "
            f"{c['errors']:>6} {c['differing']:>6} {c['load_average']:>5.2f}"
        )
    report = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tree": str(args.tree),
        "cells": cells,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
