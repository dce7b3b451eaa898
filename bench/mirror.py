"""What an ingest of a folder costs when little of it changed: the case `ingest FOLDER` and `--watch` meet.

Writes a folder of N notes, ingests it once, then times, each ``--rounds`` times, an ingest of
the folder again with nothing changed, with one note edited, with one note added and with one
note deleted.  Embeds with the tests' HashEmbedder by default (the figure is the loader, the
snapshot builder and the database, which is what differs; ``--model`` uses the default model, its
vectors cached after the first ingest).  Runs on any checkout that has ``Engine.ingest(name,
folder)``, so two checkouts can be timed side by side (issue 45: before, an unchanged ingest
chunked and stored every document; a deleted note stayed).  Prints a table and writes JSON.

    python bench/mirror.py [--notes 2000] [--rounds 5] [--home /tmp/rl-mirror-bench] [--json bench/out/mirror.json]
    python bench/mirror.py --checkout /work/main ...     # the code (src/, tests/fakes.py) of another checkout
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORDS = ["kiln", "glaze", "clay", "wheel", "canal", "knee", "tomato", "seedling", "novel", "chapter", "map", "bread"]


def note(rng: random.Random, i: int) -> str:
    return f"# Note {i}\n\n" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(80, 400))) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--home", default=None, help="data directory (default: a new temporary one)")
    ap.add_argument("--model", action="store_true", help="embed with the default model, not the hash embedder")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--checkout", default=str(ROOT), help="the checkout whose code runs (default: this one)")
    args = ap.parse_args()
    sys.path[:0] = [str(Path(args.checkout) / "src"), str(Path(args.checkout) / "tests")]
    from fakes import use_hash_embedder
    from ranklock import Engine

    home = Path(args.home or tempfile.mkdtemp(prefix="rl-mirror-bench-"))
    folder = Path(tempfile.mkdtemp(prefix="rl-mirror-notes-"))
    rng = random.Random(45)
    for i in range(args.notes):
        (folder / f"n{i:05}.md").write_text(note(rng, i), encoding="utf-8")
    eng = Engine(home=home, log_queries=False)
    name = f"mirror{int(time.time())}"
    create = {} if args.model else {"embedder": use_hash_embedder(eng)}
    t = time.perf_counter()
    eng.ingest(name, folder, create=create)
    first = time.perf_counter() - t
    times: dict[str, list[float]] = {"unchanged": [], "one edited": [], "one added": [], "one deleted": []}
    removed: list[int] = []
    for r in range(args.rounds):
        for what in times:
            if what == "one edited":
                (folder / f"n{r:05}.md").write_text(note(rng, r) + "edited\n", encoding="utf-8")
            elif what == "one added":
                (folder / f"new{r:03}.md").write_text(note(rng, r), encoding="utf-8")
            elif what == "one deleted":
                (folder / f"new{r:03}.md").unlink()
            t = time.perf_counter()
            report = eng.ingest(name, folder)
            times[what].append(time.perf_counter() - t)
            if what == "one deleted":
                removed.append(report.removed)
    eng.close()
    rows = {k: {"median_s": statistics.median(v), "max_s": max(v)} for k, v in times.items()}
    print(
        f"{args.checkout}: {args.notes} notes, first ingest {first:.1f} s; {args.rounds} rounds; deleted note removed: {removed}"
    )
    print(f"{'ingest of the folder again':<28} {'median s':>9} {'max s':>8}")
    for k, v in rows.items():
        print(f"{k:<28} {v['median_s']:>9.3f} {v['max_s']:>8.3f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        out = {
            "checkout": args.checkout,
            "notes": args.notes,
            "rounds": args.rounds,
            "first_s": first,
            "removed": removed,
            "ingest": rows,
        }
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
