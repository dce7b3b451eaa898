"""Which library reads PDF and HTML best here: speed and extraction quality on files we make.

Writes N PDFs (fpdf2, a real text layer, three SciFact abstracts each, one per
page) and N HTML pages (one abstract as the article inside navigation, a
sidebar, a cookie banner and a footer), then extracts them with each candidate:

* PDF: pypdf vs pdfminer.six;
* HTML: trafilatura vs readability-lxml.

The candidates ranklock does not use are not installed by its extras:
``pip install -c constraints.txt pdfminer.six readability-lxml`` first.

Quality is word recall (share of the source's words found in the extraction,
counted as a multiset) and, for HTML, boilerplate leaked (share of the
navigation/footer words that came through).  Prints a table and writes JSON.

    python bench/file_loaders.py [--files 30] [--out bench/out/file_loaders.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from filegen import html_page, text_pdf  # noqa: E402

# The page furniture's distinctive words (none occurs in the SciFact abstracts used).
BOILERPLATE = "products pricing careers contact cookies cookies accept related posts tips spring subscribe newsletter copyright corp rights reserved privacy policy"


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"[a-z0-9]+", text.lower()))


def recall(source: str, got: str) -> float:
    want, have = words(source), words(got)
    return sum(min(n, have[w]) for w, n in want.items()) / max(1, sum(want.values()))


def latin1(text: str) -> str:
    # fpdf2's core fonts are Latin-1; the benchmark compares extraction, not font coverage.
    return text.encode("latin-1", "replace").decode("latin-1")


def pdf_pypdf(path: Path) -> str:
    import pypdf

    return "\n".join(p.extract_text() or "" for p in pypdf.PdfReader(str(path)).pages)


def pdf_pdfminer(path: Path) -> str:
    from pdfminer.high_level import extract_text

    return str(extract_text(str(path)))


def html_trafilatura(path: Path) -> str:
    import trafilatura

    return trafilatura.extract(path.read_text(encoding="utf-8"), favor_precision=True) or ""


def html_readability(path: Path) -> str:
    import lxml.html
    from readability import Document

    summary = Document(path.read_text(encoding="utf-8")).summary()
    return str(lxml.html.fromstring(summary).text_content())


def measure(name: str, fn: Any, files: list[tuple[Path, str]]) -> dict[str, Any]:
    t0 = time.perf_counter()
    outs = [fn(p) for p, _ in files]
    secs = time.perf_counter() - t0
    rec = sum(recall(src, out) for (_, src), out in zip(files, outs, strict=True)) / len(files)
    leak = sum(recall(BOILERPLATE, out) for out in outs) / len(files)
    return {
        "library": name,
        "files": len(files),
        "seconds": round(secs, 3),
        "files_per_s": round(len(files) / secs, 1),
        "word_recall": round(rec, 4),
        "boilerplate_leaked": round(leak, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "file_loaders.json"))
    args = ap.parse_args()
    with open("/work/shared/data/scifact/corpus.jsonl", encoding="utf-8") as fh:
        recs = [json.loads(line) for line, _ in zip(fh, range(args.files * 3), strict=False)]
    tmp = Path(tempfile.mkdtemp())
    pdfs, pages = [], []
    for i in range(args.files):
        texts = [latin1(r["title"] + ". " + r["text"]) for r in recs[3 * i : 3 * i + 3]]
        pdfs.append((text_pdf(tmp / f"{i}.pdf", texts), "\n".join(texts)))
        r = recs[i]
        pages.append((html_page(tmp / f"{i}.html", r["title"], [r["text"]]), r["title"] + " " + r["text"]))
    rows = [
        {"format": "pdf", **measure("pypdf", pdf_pypdf, pdfs)},
        {"format": "pdf", **measure("pdfminer.six", pdf_pdfminer, pdfs)},
        {"format": "html", **measure("trafilatura", html_trafilatura, pages)},
        {"format": "html", **measure("readability-lxml", html_readability, pages)},
    ]
    print(f"{'format':<6} {'library':<18} {'files/s':>8} {'word recall':>12} {'boilerplate leaked':>19}")
    for r in rows:
        print(
            f"{r['format']:<6} {r['library']:<18} {r['files_per_s']:>8} {r['word_recall']:>12.4f} {r['boilerplate_leaked']:>19.4f}"
        )
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, "loadavg": load}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
