"""How long `ranklock search` takes from a shell: the embedding service (issue 16, 28), the command service (28).

A CLI process starts without the model: a hybrid search of a new query asks the local embedding
service (ranklock.embed.service) for its vector (``RANKLOCK_EMBED_SERVICE=0``: the model loads in the
command).  And since issue 28 the ``ranklock`` entry point imports only the standard library and hands
the search to the local command service (ranklock.cli.service), a process with the CLI imported
(``RANKLOCK_CLI_SERVICE=0``: the command imports typer, rich, psycopg and the engine itself).  All of
it is timed in one run, side by side with `sqlite-utils search` over the same demo corpus (SQLite
FTS5) as the bar a shell tool sets:

* what the options cost: importing torch, sentence-transformers, the entry point and the CLI, and
  loading the model, each in a new process;
* `ranklock search demo "<new query>"` as new processes: the model in the command; each command in its
  own process (the embedding service up); the first command after `ranklock db stop` (it starts both
  services); cold (both services up, a query never embedded: nothing cached) and warm (the same query
  again: its vector cached), and lexical mode (no vector at all);
* `sqlite-utils search` of the same text.

Every timed query is new (a random word appended) except the warm rows.  Wall seconds and CPU
seconds (user + system of the child) are both given: on a shared, loaded machine the wall time of a
process is mostly waiting for a core, and the CPU time is what a quiet machine's wall time would be
near (a served command's CPU is the client's; the service's own is not in it).  Each served row
also counts the commands the command service ran, so a row that fell back is seen.  Prints a table
and writes bench/out/cli_startup.json; state the load average with any figure.

    python bench/cli_startup.py --home /tmp/bench-home      # runs `ranklock demo` there if missing
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ranklock.cli import client  # noqa: E402 - this checkout's, like the commands timed

QUERY = "how does retrieval augmented generation cite sources"
BIN = Path(sys.executable).parent


def new_query() -> str:
    return f"{QUERY} {uuid.uuid4().hex[:8]}"


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def search_cmd(home: Path, query: str, mode: str = "hybrid") -> list[str]:
    return [str(BIN / "ranklock"), "search", "demo", query, "--mode", mode, "--home", str(home), "--json"]


def sqlite_db(home: Path) -> Path:
    """The demo corpus in SQLite with an FTS5 index, as `sqlite-utils insert` + `enable-fts` make it."""
    import sqlite_utils

    path = home / "demo-fts.db"
    if not path.exists():
        rows = [json.loads(line) for line in (ROOT / "src/ranklock/data/demo.jsonl").read_text().splitlines()]
        db = sqlite_utils.Database(path)
        db["docs"].insert_all(({"id": r["_id"], "title": r["title"], "text": r["text"]} for r in rows), pk="id")
        db["docs"].enable_fts(["title", "text"], fts_version="FTS5")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    home = args.home.resolve()
    # As a user's shell runs it: bytecode written (a fresh clone's first run compiles it once), no test settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOCK_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    # One environment for every served row: a command service serves one environment (its fingerprint).
    served = {**env, "RANKLOCK_EMBED_SERVICE": "1", "RANKLOCK_CLI_SERVICE": "1"}
    alone = {**served, "RANKLOCK_CLI_SERVICE": "0"}
    model_per_command = {**alone, "RANKLOCK_EMBED_SERVICE": "0"}
    if (
        subprocess.run(
            [str(BIN / "ranklock"), "collections", "--home", str(home)], env=env, capture_output=True, text=True
        ).stdout.find("demo")
        < 0
    ):
        subprocess.run([str(BIN / "ranklock"), "demo", "--home", str(home)], env=env, check=True, capture_output=True)
    db = sqlite_db(home)
    py = str(BIN / "python")
    timed(search_cmd(home, new_query(), "lexical"), alone)  # bytecode compiled, server up: not part of any row

    load_before = Path("/proc/loadavg").read_text().split()[:3]
    rows: dict[str, list[tuple[float, float]]] = {}
    served_by_service: dict[str, int] = {}

    def commands_served() -> int:
        return sum(int(s["served"]) for s in client.status(home))

    def row(name: str, make: object, env_: dict[str, str], runs: int = args.runs) -> None:
        before = commands_served()
        rows[name] = [timed(make(), env_) for _ in range(runs)]  # type: ignore[operator]
        served_by_service[name] = commands_served() - before

    # What each option costs, in a new process.
    row("python -c pass", lambda: [py, "-c", "pass"], env)
    row("import torch", lambda: [py, "-c", "import torch"], env, 3)
    row("import sentence_transformers", lambda: [py, "-c", "import sentence_transformers"], env, 3)
    load = "from ranklock.embed.sentence import default_embedder; default_embedder().embed(['x'])"
    row("import + load all-MiniLM-L6-v2 + 1 embed", lambda: [py, "-c", load], env, 3)
    row("import ranklock.cli (the entry point)", lambda: [py, "-c", "import ranklock.cli"], env)
    row("import ranklock.cli.root (the CLI itself)", lambda: [py, "-c", "import ranklock.cli.root"], env)
    # Before: the model in every command; then each command in its own process.
    row("search, model loads per command", lambda: search_cmd(home, new_query()), model_per_command, 3)
    row("search, own process: new query (embedding service up)", lambda: search_cmd(home, new_query()), alone)
    row("search, own process: same query again", lambda: search_cmd(home, QUERY), alone)
    # After: the command service.
    subprocess.run([str(BIN / "ranklock"), "db", "stop", "--home", str(home)], env=env, capture_output=True)
    row("search, first after db stop (starts both services)", lambda: search_cmd(home, new_query()), served, 1)
    deadline = time.monotonic() + 120
    while not client.status(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    row("search, cold: new query, services up", lambda: search_cmd(home, new_query()), served)
    row("search, warm: same query again", lambda: search_cmd(home, QUERY), served)
    row("search --mode lexical, served", lambda: search_cmd(home, new_query(), "lexical"), served)
    sqlite_utils = str(BIN / "sqlite-utils")
    row("sqlite-utils search (FTS5), same text", lambda: [sqlite_utils, "search", str(db), "docs", new_query()], env)
    row("sqlite-utils search, a word it finds", lambda: [sqlite_utils, "search", str(db), "docs", "retrieval"], env)
    load_after = Path("/proc/loadavg").read_text().split()[:3]

    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}; {os.cpu_count()} cores")
    print(f"{'':<60} {'wall median':>11} {'wall min':>9} {'CPU median':>10} {'served':>6}")
    for name, got in rows.items():
        walls, cpus = [w for w, _ in got], [c for _, c in got]
        print(
            f"{name:<60} {statistics.median(walls):>11.3f} {min(walls):>9.3f} {statistics.median(cpus):>10.3f} "
            f"{served_by_service[name]:>3}/{len(got)}"
        )
    out = ROOT / "bench" / "out" / "cli_startup.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "query": QUERY,
                "runs": args.runs,
                "seconds": {name: [{"wall": w, "cpu": c} for w, c in got] for name, got in rows.items()},
                "served_by_the_command_service": served_by_service,
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
