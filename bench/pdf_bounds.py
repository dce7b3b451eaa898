"""What the PDF bounds cost: ordinary PDFs read in the reading process against pypdf in the ingest's own
process, and how long and how much memory refusing the hostile PDFs of issue 48 takes.

Ordinary: N PDFs written by fpdf2 (3 pages of generated prose each), read by ``load_files`` (one reading
process for all of them, ranklock.ingest.formats.pdf) and by pypdf directly in this process, the same
files, in alternating order.  Hostile: 200 pages sharing one 61 MB content stream, a page tree of 100,000
pages, one of 3,000 pages whose root says 1; each refused beside a good PDF, in a process of its own (its
peak RSS, VmHWM; the reading process is bounded to 1 GiB of address space).  Prints a table and writes JSON.

    python bench/pdf_bounds.py [--files 60] [--timeout 60] [--out bench/out/pdf_bounds.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from filegen import page_tree_pdf, shared_stream_pdf, text_pdf  # noqa: E402
from large_document import large_document_text  # noqa: E402

REFUSE = """
import json, sys, time
from pathlib import Path
from ranklock.ingest.formats import load_files
t = time.perf_counter()
load = load_files(Path(sys.argv[1]), skip_unreadable=True)
seconds = time.perf_counter() - t
hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]
print(json.dumps({"seconds": seconds, "reasons": [u.reason for u in load.unreadable], "rss_mb": int(hwm) / 1024}))
"""


def ordinary(folder: Path, n: int) -> dict[str, float]:
    """Seconds to read ``n`` ordinary PDFs through the reading process, and with pypdf in this process."""
    import pypdf

    from ranklock.ingest.formats import load_files

    folder.mkdir()
    for i in range(n):
        text = large_document_text(6_000, seed=i)
        text_pdf(folder / f"f{i:03d}.pdf", [text[:2000], text[2000:4000], text[4000:6000]])
    runs: dict[str, list[float]] = {"reading process": [], "in process": []}
    for _ in range(3):
        t = time.perf_counter()
        assert len(load_files(folder).documents) == n
        runs["reading process"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for f in sorted(folder.iterdir()):
            reader = pypdf.PdfReader(str(f))
            "\n\n".join((p.extract_text() or "").strip() for p in reader.pages)
        runs["in process"].append(time.perf_counter() - t)
    return {k: min(v) for k, v in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description="the cost of the PDF bounds")
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--timeout", default="60s", help="RANKLOCK_PDF_TIMEOUT for the hostile cases")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "pdf_bounds.json"))
    args = ap.parse_args()
    load_before = os.getloadavg()
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="rl-pdf-bounds-") as tmp:
        base = Path(tmp)
        times = ordinary(base / "ordinary", args.files)
        out["ordinary"] = {"files": args.files, **times}
        print(f"{args.files} ordinary PDFs (3 pages each), best of 3:")
        for k, v in times.items():
            print(f"  {k:<16} {v:6.2f} s  ({args.files / v:5.1f} PDFs/s)")
        line = b"BT /F1 12 Tf 72 720 Td (Hello world) Tj ET\n"
        hostile = {
            "200 pages, one 61 MB stream": lambda p: shared_stream_pdf(p, 200, line * (61_000_000 // len(line))),
            "page tree of 100,000 pages": lambda p: page_tree_pdf(p, 100_000),
            "3,000 pages, /Count 1": lambda p: page_tree_pdf(p, 3_000, count=1),
        }
        rows = []
        print(f"hostile PDFs, each alone (RANKLOCK_PDF_TIMEOUT={args.timeout}):")
        for i, (name, make) in enumerate(hostile.items()):
            folder = base / f"hostile{i}"
            folder.mkdir()
            path = make(folder / "x.pdf")
            text_pdf(folder / "y.pdf", ["A good PDF beside it, read after it."])  # so the folder is not all refused
            env = {**os.environ, "RANKLOCK_PDF_TIMEOUT": args.timeout, "PYTHONPATH": str(ROOT / "src")}
            got = json.loads(
                subprocess.run(
                    [sys.executable, "-c", REFUSE, str(folder)], env=env, capture_output=True, text=True, check=True
                ).stdout
            )
            rows.append({"case": name, "file_bytes": path.stat().st_size, **got})
            print(
                f"  {name:<28} {path.stat().st_size:>11,} bytes  refused in {got['seconds']:6.1f} s, ingest RSS "
                f"{got['rss_mb']:5.0f} MB: {got['reasons'][0][:70]}…"
            )
        out["hostile"] = rows
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    out.update({"load_average": {"before": load_before, "after": load_after}, "cpus": os.cpu_count()})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
