"""Every interface warm (issue 45): a script's first vector search, `serve` ready for hybrid search, quick
commands through the command service, and what the services hold in memory, before and after side by side.

Before and after run in one go on one data directory, each "before" by the setting that restores it:

* **a script**: ``python -c "Engine().search(...)"`` of a new query.  Before: ``RANKLOCK_EMBED_SERVICE=0``
  (the Engine loads the model itself, as every Engine did); after: the default, the home's embedding
  service warm.  Timed: the whole process, and ``Engine()`` to the first result;
* **serve**: ``ranklock serve`` started, then ``GET /api/search?mode=hybrid`` of a new query asked until it
  answers 200: seconds from the start to the first hybrid answer, the server's CPU seconds until then, and
  its resident memory after it.  Before: ``RANKLOCK_EMBED_SERVICE=0`` (serve loads its own copy of the model); after: the service warm;
* **commands** (``document get``, ``snapshot list|show|diff``, ``db status``, an unchanged ``ingest``) as
  new processes.  Before: ``RANKLOCK_CLI_SERVICE=0`` (each in its own process, importing the CLI); after:
  the command service warm;
* **memory**: what ``ranklock db status --json`` says of each service (resident memory, idle limit).

Wall seconds and, for the new processes, CPU seconds of the child (user + system): on a loaded machine wall
time is mostly waiting for a core, CPU time is what a quiet machine's wall time would be near.  State the
load average (printed) with any figure.  Prints a table and writes bench/out/warm.json.

    python bench/warm.py --home /tmp/bench-warm            # runs `ranklock demo` there if missing
    python bench/warm.py --home /tmp/bench-warm --runs 2   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ranklock.cli import client  # noqa: E402 - this checkout's, like the commands timed

BIN = Path(sys.executable).parent
QUERY = "how do vaccines train the immune system"

SCRIPT = """
import sys, time
t0 = time.perf_counter()
from ranklock import Engine
eng = Engine(home=sys.argv[1])
t1 = time.perf_counter()
eng.search("demo", sys.argv[2], k=5)
t2 = time.perf_counter()
eng.close()
print(f"{t1 - t0:.4f} {t2 - t1:.4f}")
"""


def new_query() -> str:
    return f"{QUERY} {uuid.uuid4().hex[:8]}"


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout) of one process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def rss(pid: int) -> int | None:
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_until_hybrid(home: Path, env: dict[str, str]) -> dict[str, Any]:
    """Start `ranklock serve`, ask a hybrid search of a new query until it answers: seconds, and memory then."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/search?" + urllib.parse.urlencode(
        {"collection": "demo", "q": new_query(), "mode": "hybrid", "k": 5}
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "ranklock"), "serve", "--port", str(port), "--home", str(home)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"ranklock serve exited {proc.returncode} before it answered")
            try:
                with urllib.request.urlopen(url, timeout=600) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.02)
        seconds = time.perf_counter() - t0
        import psutil

        cpu = sum(psutil.Process(proc.pid).cpu_times()[:2])
        return {"seconds": seconds, "cpu": cpu, "serve_rss_bytes": rss(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def services(home: Path, env: dict[str, str]) -> dict[str, Any]:
    _, _, out = run([str(BIN / "ranklock"), "db", "status", "--home", str(home), "--json"], env)
    status = json.loads(out)
    emb = status.get("embedding_service") or {}
    return {
        "embedding_service": {k: emb.get(k) for k in ("pid", "rss_bytes", "idle_s", "held_by")},
        "command_services": [{k: c.get(k) for k in ("pid", "rss_bytes", "idle_s")} for c in status["command_services"]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    home = args.home.resolve()
    # As a user's shell runs it: bytecode written, no test settings, both services on.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOCK_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    env |= {"RANKLOCK_EMBED_SERVICE": "1", "RANKLOCK_CLI_SERVICE": "1"}
    model_here = {**env, "RANKLOCK_EMBED_SERVICE": "0"}
    own_process = {**env, "RANKLOCK_CLI_SERVICE": "0"}
    rl = str(BIN / "ranklock")
    listed = subprocess.run([rl, "collections", "--home", str(home)], env=env, capture_output=True, text=True)
    if "demo" not in listed.stdout:
        subprocess.run([rl, "demo", "--home", str(home)], env=env, check=True, capture_output=True)
    from ranklock.cli.demo import demo_corpus_path

    snapshot = json.loads(run([rl, "snapshot", "list", "demo", "--home", str(home), "--json"], env)[2])
    sid = str(next(s["id"] for s in snapshot["snapshots"] if s["active"]))
    # Warm: both services up (a served command starts the command service; a search the embedding service).
    run([rl, "search", "demo", new_query(), "--home", str(home)], env)
    run([rl, "search", "demo", new_query(), "--home", str(home)], env)
    deadline = time.monotonic() + 120
    while not client.status(home) and time.monotonic() < deadline:
        time.sleep(0.05)

    load_before = Path("/proc/loadavg").read_text().split()[:3]
    rows: dict[str, list[dict[str, Any]]] = {}
    py = str(BIN / "python")

    def script(env_: dict[str, str], runs: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(runs):
            wall, cpu, printed = run([py, "-c", SCRIPT, str(home), new_query()], env_)
            engine_s, search_s = (float(x) for x in printed.split())
            out.append({"wall": wall, "cpu": cpu, "engine_s": engine_s, "first_search_s": search_s})
        return out

    rows["script: before (model in the script)"] = script(model_here, min(args.runs, 3))
    rows["script: after (embedding service warm)"] = script(env, args.runs)
    rows["serve to a hybrid answer: before (own model)"] = [
        serve_until_hybrid(home, model_here) for _ in range(min(args.runs, 3))
    ]
    rows["serve to a hybrid answer: after (service warm)"] = [serve_until_hybrid(home, env) for _ in range(args.runs)]
    h = ["--home", str(home)]
    commands = {
        "document get": ["document", "get", "demo", "ir-004", *h],
        "snapshot list": ["snapshot", "list", "demo", *h],
        "snapshot show": ["snapshot", "show", "demo", *h],
        "snapshot diff": ["snapshot", "diff", "demo", sid, sid, *h],
        "db status": ["db", "status", *h],
        "ingest, unchanged": ["ingest", "demo", str(demo_corpus_path()), *h],
    }
    served_before = sum(int(s["served"]) for s in client.status(home))
    for name, cmd in commands.items():
        for label, env_ in (("before (own process)", own_process), ("after (command service)", env)):
            got = [run([rl, *cmd], env_) for _ in range(args.runs)]
            rows[f"{name}: {label}"] = [{"wall": w, "cpu": c} for w, c, _ in got]
    served = sum(int(s["served"]) for s in client.status(home)) - served_before
    memory = services(home, env)
    load_after = Path("/proc/loadavg").read_text().split()[:3]

    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}; {os.cpu_count()} cores")
    print(f"{'':<52} {'median':>8} {'min':>8} {'CPU med':>8} {'detail (median)':>28}")
    for name, got in rows.items():
        key = "seconds" if "serve" in name else "wall"
        vals = [g[key] for g in got]
        cpu = statistics.median(g["cpu"] for g in got) if "cpu" in got[0] else float("nan")
        detail = ""
        if "first_search_s" in got[0]:
            detail = f"Engine() {statistics.median(g['engine_s'] for g in got):.3f}, search "
            detail += f"{statistics.median(g['first_search_s'] for g in got):.3f}"
        elif "serve_rss_bytes" in got[0]:
            detail = f"serve RSS {statistics.median(g['serve_rss_bytes'] or 0 for g in got) / 1e6:,.0f} MB"
        print(f"{name:<52} {statistics.median(vals):>8.3f} {min(vals):>8.3f} {cpu:>8.3f} {detail:>28}")
    print(f"commands the command service ran: {served} of {len(commands) * args.runs} served ones")
    emb = memory["embedding_service"]
    print(
        f"embedding service: {(emb['rss_bytes'] or 0) / 1e6:,.0f} MB, idle limit {emb['idle_s']} s; command services: "
        + ", ".join(
            f"{(c['rss_bytes'] or 0) / 1e6:,.0f} MB (idle limit {c['idle_s']} s)" for c in memory["command_services"]
        )
    )
    out = ROOT / "bench" / "out" / "warm.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "runs": args.runs,
                "rows": rows,
                "served_by_the_command_service": served,
                "services": memory,
                "loadavg_before": load_before,
                "loadavg_after": load_after,
                "cores": os.cpu_count(),
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
