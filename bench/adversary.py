"""Normal searches under hostile traffic (issue 27): p95 with and without 1 % hostile requests, side by side.

A real ``ranklock serve`` app (tokens required, default limits, ranklock's HTTP
protocol with its header deadline) runs in a subprocess over a generated
collection (``bench/large_corpus.py``, default ``adv100k``: 100,000 chunks).  In
this process, 64 concurrent clients, each with its own token, send normal
searches (hybrid, k 10, Zipf-drawn queries) as fast as they are answered.  The
run alternates two phases of equal length, ``--rounds`` times each, so both
see the same machine:

* ``quiet``: the 64 clients alone;
* ``hostile``: the same clients, plus one hostile request for every 99 normal
  ones (1 %), from hostile tokens: a 100 MB body (declared, then streamed), a
  slow body (a few bytes, then silence until the server cuts it off), a
  half-sent request head, and a search at the cost cap (k x depth =
  RANKLOCK_MAX_COST, hybrid).

Reported per phase: normal searches, their p50 / p95 / p99, statuses; per
hostile kind, how it was answered and when.  The target: hostile p95 <= 2 x quiet
p95; 0 HTTP 500; 0 requests past their limit (every hostile answer is the
limit's status, within its time); 0 changes to stored data (digest before and
after).  The load average is recorded at the start and the end: on a busy
machine the figures are noise, rerun on a quiet one.

    python bench/large_corpus.py --docs 100000 --collection adv100k --home /work/bench27/home   # once
    python bench/adversary.py --home /work/bench27/home --collection adv100k --seconds 20 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

OUT = Path(__file__).resolve().parent / "out"
CLIENTS = 64
HOSTILE_EVERY = 99  # one hostile request per 99 normal ones: 1 % of all requests


def serve(args: argparse.Namespace) -> None:
    """The server subprocess: the collection's embedder registered, tokens required, ranklock's protocol."""
    from large_corpus import GeneratedEmbedder
    from ranklock import Engine
    from ranklock.http import create_app
    from ranklock.http.guard import Access
    from ranklock.http.server import run

    eng = Engine(home=args.home, log_queries=True)
    emb = GeneratedEmbedder()
    eng.embedders.register(emb)
    run(
        create_app(eng, access=Access(require_token=True)),
        host="127.0.0.1",
        port=args.port,
        header_timeout=eng.settings.header_timeout,
    )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def http(port: int, raw: bytes, *, timeout: float = 60.0) -> tuple[int | None, float]:
    """Send ``raw``; (status or None, seconds to the answer)."""
    t = time.perf_counter()
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(raw)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        status = int(line.split()[1]) if line else None
        length = 0
        while True:
            h = await asyncio.wait_for(reader.readline(), timeout)
            if h in (b"\r\n", b""):
                break
            if h.lower().startswith(b"content-length:"):
                length = int(h.split(b":")[1])
        if length:
            await asyncio.wait_for(reader.readexactly(length), timeout)
        return status, time.perf_counter() - t
    finally:
        writer.close()


def search_request(token: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    return (
        f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode() + data


async def hostile(kind: str, port: int, token: str, collection: str, query: str, max_cost: int) -> dict[str, Any]:
    t = time.perf_counter()
    status: int | None = None
    try:
        if kind == "huge_body":
            head = (
                f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {100 * 10**6}\r\n\r\n"
            ).encode()
            status, _ = await http(port, head + b" " * 65536)
        elif kind == "slow_body":
            head = (
                f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
            ).encode()
            status, _ = await http(port, head + b'{"collection"', timeout=120)
        elif kind == "half_head":
            status, _ = await http(port, b"GET /api/collections HTTP/1.1\r\nHost: 127.0.0.1\r\n", timeout=120)
        else:  # max_cost: a search at the cap, hybrid
            side = int(max_cost**0.5)
            body = {"collection": collection, "query": query, "k": side, "params": {"depth": side}}
            status, _ = await http(port, search_request(token, body))
    except (TimeoutError, OSError, asyncio.IncompleteReadError):
        status = None
    return {"kind": kind, "status": status, "seconds": time.perf_counter() - t}


async def phase(
    name: str,
    seconds: float,
    port: int,
    tokens: list[str],
    bad: list[str],
    collection: str,
    queries: list[str],
    max_cost: int,
    rng: random.Random,
) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: Counter[Any] = Counter()
    hostile_tasks: list[asyncio.Task[dict[str, Any]]] = []
    end = time.monotonic() + seconds
    done = 0
    kinds = ["huge_body", "slow_body", "half_head", "max_cost"]

    async def client(token: str) -> None:
        nonlocal done
        while time.monotonic() < end:
            body = {"collection": collection, "query": rng.choice(queries), "k": 10}
            try:
                status, secs = await http(port, search_request(token, body))
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                status, secs = None, float("nan")
            statuses[status] += 1
            if status == 200:
                latencies.append(secs * 1000)
            done += 1
            if name == "hostile" and done % HOSTILE_EVERY == 0:
                kind = kinds[(done // HOSTILE_EVERY) % len(kinds)]
                hostile_tasks.append(
                    asyncio.create_task(hostile(kind, port, rng.choice(bad), collection, rng.choice(queries), max_cost))
                )

    await asyncio.gather(*(client(t) for t in tokens))
    answers = await asyncio.gather(*hostile_tasks)
    return {
        "phase": name,
        "normal": len(latencies),
        "statuses": {str(k): v for k, v in statuses.items()},
        "p50_ms": percentile(latencies, 0.50),
        "p95_ms": percentile(latencies, 0.95),
        "p99_ms": percentile(latencies, 0.99),
        "latencies_ms": latencies,
        "hostile": answers,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", nargs="?", default="run", choices=["run", "serve"])
    ap.add_argument("--home", default="/work/bench27/home")
    ap.add_argument("--collection", default="adv100k")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    ap.add_argument("--rounds", type=int, default=3, help="quiet/hostile pairs")
    ap.add_argument("--seed", type=int, default=27)
    args = ap.parse_args()
    if args.mode == "serve":
        serve(args)
        return

    from adversary import free_port, stored_digest
    from large_corpus import queries as zipf_queries
    from ranklock import Engine

    load_start = os.getloadavg()
    eng = Engine(home=args.home, log_queries=False)
    run_id = uuid.uuid4().hex[:6]
    tokens = [eng.create_token(f"bench-{run_id}-{i}", ["read"])[1] for i in range(CLIENTS)]
    bad = [eng.create_token(f"bench-{run_id}-hostile-{i}", ["read"])[1] for i in range(4)]
    before = stored_digest(eng)
    port = args.port or free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "serve", "--home", args.home, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rng = random.Random(args.seed)
    queries = zipf_queries(500)
    results: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if asyncio.run(http(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout=2))[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the server did not come up")
            time.sleep(0.5)
        # One unmeasured pass: the query vectors and the server's caches warm, as in every bench here.
        asyncio.run(phase("warm", 10, port, tokens, bad, args.collection, queries, eng.settings.max_cost, rng))
        for r in range(args.rounds):
            for name in ("quiet", "hostile") if r % 2 == 0 else ("hostile", "quiet"):
                res = asyncio.run(
                    phase(name, args.seconds, port, tokens, bad, args.collection, queries, eng.settings.max_cost, rng)
                )
                res["round"] = r
                results.append(res)
                print(f"round {r} {name}: {res['normal']} searches, p95 {res['p95_ms']:.1f} ms", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        for t in eng.list_tokens():
            if t.name.startswith(f"bench-{run_id}-") and t.revoked_at is None:
                eng.revoke_token(str(t.id))
    after = stored_digest(eng)
    eng.close()
    load_end = os.getloadavg()

    summary: dict[str, Any] = {}
    for name in ("quiet", "hostile"):
        lat = [x for r in results if r["phase"] == name for x in r["latencies_ms"]]
        statuses: Counter[str] = Counter()
        for r in results:
            if r["phase"] == name:
                statuses.update(r["statuses"])
        summary[name] = {
            "searches": len(lat),
            "p50_ms": percentile(lat, 0.50),
            "p95_ms": percentile(lat, 0.95),
            "p99_ms": percentile(lat, 0.99),
            "statuses": dict(statuses),
        }
    kinds: dict[str, dict[str, Any]] = {}
    for r in results:
        for h in r["hostile"]:
            k = kinds.setdefault(h["kind"], {"n": 0, "statuses": Counter(), "max_s": 0.0})
            k["n"] += 1
            k["statuses"][str(h["status"])] += 1
            k["max_s"] = max(k["max_s"], h["seconds"])
    ratio = summary["hostile"]["p95_ms"] / summary["quiet"]["p95_ms"]
    http500 = sum(int(v) for s in summary.values() for k, v in s["statuses"].items() if k.startswith("5"))
    http500 += sum(int(v) for k in kinds.values() for s, v in k["statuses"].items() if s.startswith("5"))
    print()
    print(f"{'phase':<8} {'searches':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  statuses")
    for name, s in summary.items():
        print(
            f"{name:<8} {s['searches']:>9} {s['p50_ms']:>8.1f} {s['p95_ms']:>8.1f} {s['p99_ms']:>8.1f}  {s['statuses']}"
        )
    print(f"hostile p95 / quiet p95 = {ratio:.2f} (target <= 2)")
    print(f"{'hostile kind':<12} {'n':>4} {'slowest s':>10}  answered")
    for kind, k in sorted(kinds.items()):
        print(f"{kind:<12} {k['n']:>4} {k['max_s']:>10.2f}  {dict(k['statuses'])}")
    print(f"HTTP 5xx: {http500}; stored data unchanged: {before == after}")
    print(f"load average: start {load_start}, end {load_end} (2 cores; rerun on a quiet machine)")
    OUT.mkdir(exist_ok=True)
    out = {
        "bench": "adversary",
        "when": datetime.now(UTC).isoformat(),
        "collection": args.collection,
        "clients": CLIENTS,
        "hostile_share": 1 / (HOSTILE_EVERY + 1),
        "seconds_per_phase": args.seconds,
        "rounds": args.rounds,
        "summary": summary,
        "p95_ratio": ratio,
        "hostile": {k: {**v, "statuses": dict(v["statuses"])} for k, v in kinds.items()},
        "http_5xx": http500,
        "stored_unchanged": before == after,
        "load_average": {"start": load_start, "end": load_end},
        "cpus": os.cpu_count(),
    }
    (OUT / "adversary.json").write_text(json.dumps(out, indent=2))
    print(f"wrote {OUT / 'adversary.json'}")


if __name__ == "__main__":
    main()
