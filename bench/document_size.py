"""What one document costs to ingest by the size of its text, and what refusing a larger one costs.

Each case runs in a process of its own (its peak RSS is the case's alone): a folder holding one generated
file (tests/large_document.py's Zipf text: prose lines for .txt and .md, or the whole text on one line) is
ingested into a scratch home with the real all-MiniLM-L6-v2 tokenizer cutting the chunks and hash vectors
in place of the model's (so every step but the model's forward pass is measured).  The model's own cost is
measured once on a sample of real chunks and added as an estimate: seconds per chunk, and the RSS the
loaded model adds.  ``--refuse`` cases run under the default RANKLOCK_MAX_DOCUMENT_BYTES and must be
refused, naming the file, within the issue's bounds (1.5 GB RSS, 30 s).  Prints a table and writes JSON.

    python bench/document_size.py [--mb 1,2,4,8,16] [--home /tmp/rl-doc-size] [--out bench/out/document_size.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))


def make_file(folder: Path, mb: float, shape: str) -> Path:
    """One generated file of ``mb`` megabytes (10^6 bytes): ``txt`` or ``md`` prose lines, ``md1`` one line."""
    from large_document import large_document_text

    folder.mkdir(parents=True, exist_ok=True)
    text = large_document_text(int(mb * 1_000_000))
    if shape != "md1":
        text = text.replace(". ", ".\n")  # a line a sentence, as prose is written
    path = folder / ("doc.txt" if shape == "txt" else "doc.md")
    path.write_text(text, encoding="utf-8")
    return path


def peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM).  Not getrusage's ru_maxrss: Linux carries that across
    exec, so a child started from a parent holding the model would report the parent's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(args: argparse.Namespace) -> None:
    """One case, in this process: ingest the folder, print one JSON line (seconds, chunks, peak RSS)."""
    import hashlib

    import numpy as np

    from ranklock import Engine, IngestError
    from ranklock.embed.base import normalize_rows
    from ranklock.embed.sentence import default_embedder

    class TokenizedHash:
        """The real model's tokenizer (so the chunks are the real ones), hash vectors for the model's."""

        id = "bench:minilm-tokenizer-hash-384"
        dim = 384
        sha256 = hashlib.sha256(id.encode()).hexdigest()

        def __init__(self) -> None:
            self.tokenizer = default_embedder().tokenizer

        def embed(self, texts: Any) -> Any:
            rows = [np.frombuffer(hashlib.sha256(t.encode()).digest() * 12, dtype=np.uint8) for t in texts]
            return normalize_rows(np.asarray(rows, dtype=np.float32) - 127.5)

    eng = Engine(home=args.home, log_queries=False, embed_service=False)
    emb = TokenizedHash()
    eng.embedders.register(emb)
    t = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        rep = eng.ingest(args.name, args.folder, create={"embedder": emb.id, "index": "exact"})
        out = {"outcome": "ingested", "chunks": rep.chunks, "seconds_by_phase": rep.seconds}
    except IngestError as exc:
        out = {"outcome": "refused", "message": str(exc)}
    out["seconds"] = round(time.perf_counter() - t, 2)
    out["peak_rss_mb"] = round(peak_rss_kib() / 1024, 1)
    eng.close()
    print(json.dumps(out))


def model_cost() -> dict[str, float]:
    """all-MiniLM-L6-v2's seconds per chunk (a sample of 256 real chunks, embedded as an ingest embeds them)
    and the RSS its loading adds."""
    from large_document import large_document_text
    from ranklock.embed.sentence import default_embedder

    before = peak_rss_kib()
    model = default_embedder()
    text = large_document_text(300_000)
    tok = model.tokenizer
    spans = tok.offsets(text)
    chunks = [text[spans[i][0] : spans[min(i + 255, len(spans) - 1)][1]] for i in range(0, len(spans), 224)][:256]
    model.embed(chunks[:8])  # loads the model
    loaded = peak_rss_kib()
    t = time.perf_counter()
    model.embed(chunks)
    per = (time.perf_counter() - t) / len(chunks)
    return {"seconds_per_chunk": per, "model_rss_mb": (loaded - before) / 1024, "sample_chunks": len(chunks)}


def main() -> None:
    ap = argparse.ArgumentParser(description="ingest cost by document size, and the refusal of a larger one")
    ap.add_argument("--mb", default="1,2,4,8,16", help="sizes of the accepted cases, MB (10^6 bytes)")
    ap.add_argument("--shapes", default="txt,md,md1", help="txt, md (prose lines), md1 (one line)")
    ap.add_argument("--refuse", default="12:txt,50:md1", help="MB:shape cases run under the default limit")
    ap.add_argument("--home", default="/tmp/rl-doc-size", help="a scratch ranklock home (emptied first)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "document_size.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.folder = Path(args.folder)
        child(args)
        return
    from ranklock.settings import FileLimits, env

    shutil.rmtree(args.home, ignore_errors=True)
    files = Path(args.home) / "files"
    load_before = os.getloadavg()
    cost = model_cost()
    default_limit = FileLimits.from_env().max_document_bytes
    cases = [(float(mb), shape, False) for mb in args.mb.split(",") for shape in args.shapes.split(",")]
    cases += [(float(c.split(":")[0]), c.split(":")[1], True) for c in args.refuse.split(",") if c]
    rows = []
    print(f"model: {cost['seconds_per_chunk'] * 1000:.1f} ms a chunk, +{cost['model_rss_mb']:.0f} MB RSS loaded")
    print(f"{'MB':>5} {'shape':<5} {'limit':<8} {'outcome':<9} {'chunks':>7} {'s':>7} {'RSS MB':>7} {'+model s':>9}")
    for i, (mb, shape, refuse) in enumerate(cases):
        folder = files / f"case{i}"
        make_file(folder, mb, shape)
        environ = dict(os.environ)
        if not refuse:
            environ["RANKLOCK_MAX_DOCUMENT_BYTES"] = "1GB"  # measure what an accepted document costs
        cmd = [sys.executable, __file__, "--child", "--home", args.home, "--folder", str(folder), "--name", f"c{i}"]
        got = json.loads(subprocess.run(cmd, env=environ, capture_output=True, text=True, check=True).stdout)
        embed_s = got.get("chunks", 0) * cost["seconds_per_chunk"]
        row = {"mb": mb, "shape": shape, "limit": "default" if refuse else "1GB", **got, "model_seconds_est": embed_s}
        rows.append(row)
        shutil.rmtree(folder)
        print(
            f"{mb:>5g} {shape:<5} {row['limit']:<8} {got['outcome']:<9} {got.get('chunks', '-'):>7} "
            f"{got['seconds']:>7.1f} {got['peak_rss_mb']:>7.0f} {embed_s:>9.0f}"
        )
        if got["outcome"] == "refused":
            print(f"      {got['message'].splitlines()[1].strip()[:150]}")
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; default limit {default_limit:,} bytes")
    out = {
        "default_limit_bytes": default_limit,
        "setting": env("RANKLOCK_MAX_DOCUMENT_BYTES"),
        "model": cost,
        "cases": rows,
        "load_average": {"before": load_before, "after": load_after},
        "cpus": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    from ranklock.store.server import EmbeddedServer

    EmbeddedServer(Path(args.home)).stop()  # the children's ingests started it; nothing of the bench stays running
    shutil.rmtree(args.home, ignore_errors=True)


if __name__ == "__main__":
    main()
