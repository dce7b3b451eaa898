"""One large document: seconds to ingest it (by phase) and a search at every depth in every mode.

The document is generated (tests/large_document.py: deterministic, Zipf-distributed
words in sentences); vectors come from the tests' HashEmbedder, so the figure is
the chunking and database work, not a model's.  Prints a table and writes JSON.

    python bench/large_document.py [--mb 5] [--home /tmp/rl-large-doc] [--depths 1,40,100,1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from fakes import use_hash_embedder  # noqa: E402
from large_document import large_document_text  # noqa: E402
from ranklock import Document, Engine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description="ingest and search one large document")
    ap.add_argument("--mb", type=float, default=5.0, help="document size in MB (10^6 bytes)")
    ap.add_argument("--home", default="/tmp/rl-large-doc", help="a scratch ranklock home (emptied first)")
    ap.add_argument("--depths", default="1,40,100,1000")
    ap.add_argument("--profile", default=None, help="write a cProfile of the ingest to this file")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "large_document.json"))
    args = ap.parse_args()
    shutil.rmtree(args.home, ignore_errors=True)
    eng = Engine(home=args.home, log_queries=False)
    emb = use_hash_embedder(eng)
    text = large_document_text(int(args.mb * 1_000_000))
    docs = [Document("big", "A large document", text), Document("small", "A small one", "Stou brandain sa plou.")]
    load_before = os.getloadavg()
    t = time.perf_counter()
    if args.profile:
        import cProfile

        with cProfile.Profile() as prof:
            rep = eng.ingest("big", docs, create={"embedder": emb, "index": "hnsw"})
        prof.dump_stats(args.profile)
    else:
        rep = eng.ingest("big", docs, create={"embedder": emb, "index": "hnsw"})
    wall = time.perf_counter() - t
    load_after = os.getloadavg()
    secs = {k: round(v, 2) for k, v in rep.seconds.items()}
    database = sum(rep.seconds.get(k, 0.0) for k in ("write", "index", "lexical_stats", "embed_cache_write"))
    print(f"{len(text):,} bytes, {rep.chunks} chunks: ingest {wall:.1f}s, database phase {database:.1f}s")
    print("  seconds by phase:", secs)
    print(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    searches = []
    for depth in [int(d) for d in args.depths.split(",")]:
        for mode in ("lexical", "semantic", "hybrid"):
            t = time.perf_counter()
            try:
                res = eng.search("big", "stou brandain", k=min(depth, 10), mode=mode, depth=depth)
                outcome = f"{len(res.hits)} hits"
            except Exception as exc:  # the figure is what failed, so every failure is reported
                outcome = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
            searches.append({"depth": depth, "mode": mode, "outcome": outcome})
            print(f"  depth {depth:>5} {mode:<9} {outcome}  ({(time.perf_counter() - t) * 1000:.0f} ms)")
    out = {
        "command": " ".join(["python", *sys.argv]),
        "bytes": len(text),
        "chunks": rep.chunks,
        "ingest_s": wall,
        "database_s": database,
        "seconds": rep.seconds,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "searches": searches,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    eng.close()
    from ranklock.store.server import EmbeddedServer

    EmbeddedServer(Path(args.home)).stop()


if __name__ == "__main__":
    main()
