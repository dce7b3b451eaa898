"""A Markdown vault of N notes through the file loaders into a collection, then a date-filtered search.

Writes an Obsidian-style vault (daily notes named YYYY-MM-DD.md, project notes
with YAML front matter, [[wiki links]], #tags) plus a few broken notes, reads it
with ``ranklock.ingest.formats.load_files(skip_unreadable=True)`` and ingests
it with the tests' HashEmbedder (so the figure is the loader and the database,
not the embedding model).  Checks that dates and tags became typed fields and
that a date-filtered search returns exactly the notes in range.  Prints a table
and writes JSON.

    python bench/vault.py [--notes 2000] [--home /tmp/rl-vault-bench] [--json bench/out/vault.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from fakes import use_hash_embedder  # noqa: E402
from ranklock import Engine  # noqa: E402
from ranklock.ingest.formats import load_files  # noqa: E402

TOPICS = ["pottery", "running", "garden", "reading", "work", "family", "travel", "cooking"]
PEOPLE = ["Ana Ruiz", "Ben Okafor", "Chen Wei", "Dana Levi", "Eli Moss"]
WORDS = [
    "kiln",
    "glaze",
    "clay",
    "wheel",
    "canal",
    "knee",
    "tomato",
    "seedling",
    "novel",
    "chapter",
    "sprint",
    "review",
    "dinner",
    "train",
    "map",
    "bread",
]


def write_vault(root: Path, n: int, seed: int = 7) -> dict[str, str]:
    """Write ``n`` notes and 3 broken ones; return each readable daily note's id -> date."""
    rng = random.Random(seed)
    start = date(2021, 1, 1)
    dates: dict[str, str] = {}
    (root / "daily").mkdir(parents=True, exist_ok=True)
    (root / "projects").mkdir(exist_ok=True)
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120)))
        tags = rng.sample(TOPICS, 2)
        link = f"[[Project {rng.randrange(n // 10 or 1)}]]"
        if i % 10:  # nine in ten are daily notes, dated by their file name
            d = (start + timedelta(days=i)).isoformat()
            (root / "daily" / f"{d}.md").write_text(f"# {d}\n\n{words} with {link}. #{tags[0]} #{tags[1]}\n")
            dates[f"daily/{d}.md"] = d
        else:  # the rest are project notes with front matter
            people = ", ".join(rng.sample(PEOPLE, 2))
            (root / "projects" / f"Project {i // 10}.md").write_text(
                f"---\ntitle: Project {i // 10}\ntags: [{tags[0]}, {tags[1]}]\npeople: {people}\nstatus: active\n---\n"
                f"{words}. See {link}.\n"
            )
    (root / "broken-yaml.md").write_text("---\ntags: [a, b\n---\nbody\n")
    (root / "latin1.md").write_bytes("caf\xe9 notes".encode("latin-1"))
    (root / "nul.md").write_text("a NUL \x00 byte\n")
    return dates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--home", default=str(Path(tempfile.gettempdir()) / "rl-vault-bench"))
    ap.add_argument("--json", default=str(ROOT / "bench" / "out" / "vault.json"))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp()) / "vault"
    dates = write_vault(root, args.notes)

    t0 = time.perf_counter()
    loaded = load_files(root, skip_unreadable=True)
    load_s = time.perf_counter() - t0
    files = len(loaded.read) + len(loaded.unreadable)

    name = f"vault_{args.notes}"
    with Engine(home=args.home) as eng:
        try:
            eng.db.execute("SELECT 1")
            existing = {c.name for c in eng.collections()}
        except Exception:
            existing = set()
        if name in existing:
            name = f"{name}_{int(time.time())}"
        eng.create_collection(name, embedder=use_hash_embedder(eng), fields=loaded.suggested_fields(), index="exact")
        t1 = time.perf_counter()
        report = eng.ingest(name, loaded.documents)
        ingest_s = time.perf_counter() - t1

        lo, hi = "2022-03-01", "2022-03-31"
        want = sorted(i for i, d in dates.items() if lo <= d <= hi)
        flt = f"date >= '{lo}' and date <= '{hi}'"
        res = eng.search(name, "kiln glaze", k=len(want) + 10, mode="lexical", filter=flt)
        got = sorted(h.doc_id for h in res.hits)
        fields = [f"{f.name}:{f.type}" for f in eng.collection(name).fields]
    rows = {
        "notes_written": args.notes,
        "files_seen": files,
        "documents_read": len(loaded.read),
        "unreadable": [u.as_dict() for u in loaded.unreadable],
        "load_seconds": round(load_s, 2),
        "load_files_per_s": round(files / load_s, 1),
        "ingest_seconds_hash_embedder": round(ingest_s, 2),
        "end_to_end_files_per_s": round(files / (load_s + ingest_s), 1),
        "chunks": report.chunks,
        "typed_fields": fields,
        "date_filter": flt,
        "date_filter_expected": len(want),
        "date_filter_returned": len(got),
        "date_filter_exact": got == want,
        "complete": res.complete,
        "loadavg": os.getloadavg(),
    }
    for k, v in rows.items():
        if k != "unreadable":
            print(f"{k:<30} {v}")
    for u in loaded.unreadable:
        print(f"unreadable {u.path}: {u.reason}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
