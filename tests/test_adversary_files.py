"""Hostile files in a folder to ingest (issues 42 and 48): zip bombs, YAML alias bombs and cycles, links out of the
folder, dangling links and pipes; values Python refuses, texts without bound, PDFs that cost hours, pipes swapped
in after the listing, names that act on the terminal.  Each is refused naming the file (exit 2), or left out and named with --skip-unreadable,
in bounded time and memory, and the good files beside it are kept."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, use_hash_embedder
from filegen import docx_file, page_tree_pdf, shared_stream_pdf, text_pdf
from ranklock import Document, Engine, IngestError
from ranklock.cli import app
from ranklock.errors import NotFound
from ranklock.ingest.formats import Unreadable, extract, load_files
from ranklock.limits import MAX_METADATA_BYTES, MAX_METADATA_DEPTH, MAX_ZIP_PART_BYTES, MAX_ZIP_RATIO
from ranklock.settings import FileLimits
from ranklock.snapshot.segments import live_documents


@pytest.fixture(autouse=True)
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its own Engine: let it resolve the test's hash embedder by id."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )


def bomb_docx(path: Path, part_bytes: int) -> Path:
    """A real .docx whose document.xml is replaced by ``part_bytes`` of one repeated character (deflated)."""
    good = docx_file(path.with_suffix(".src.docx"), ["placeholder"])
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename == "word/document.xml":
                # Opened by name: deflated, as the archive's other parts.
                with dst.open(item.filename, "w", force_zip64=True) as out:
                    block = b"<w:t>" + b"A" * (1 << 20)
                    for _ in range(part_bytes // len(block)):
                        out.write(block)
            else:
                dst.writestr(item, src.read(item))
    good.unlink()
    return path


def ingest(cname: str, folder: Path, rl_home: Path, *extra: str) -> tuple[int, str, float, int]:
    """`ranklock ingest` of ``folder``: exit code, output (stdout, or stderr then stdout, on one line), seconds,
    and the growth of this process's peak RSS (KiB)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    r = CliRunner().invoke(
        app, ["ingest", cname, str(folder), "--home", str(rl_home), "--embedder", HashEmbedder.id, *extra]
    )
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    text = r.stdout if "--json" in extra else r.output
    return r.exit_code, text if "--json" in extra else " ".join(text.split()), time.monotonic() - t0, grew


def test_a_docx_zip_bomb_is_refused_before_it_inflates(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    """The issue: a 3.6 MB .docx whose document.xml inflates to 1.5 GB grew the ingest to 5.6 GB, printing nothing."""
    bomb_docx(tmp_path / "bomb.docx", MAX_ZIP_PART_BYTES + (8 << 20))
    bomb_docx(tmp_path / "dense.docx", 4 << 20)  # under the size limit, but 4 MiB from ~4 KB
    docx_file(tmp_path / "memo.docx", ["Order more cone 6 witness cones."])
    assert (tmp_path / "bomb.docx").stat().st_size < 1 << 20
    code, out, seconds, grew = ingest(cname, tmp_path, rl_home)
    assert code == 2 and seconds < 30 and grew < 200_000, (out, seconds, grew)
    size = zipfile.ZipFile(tmp_path / "bomb.docx").getinfo("word/document.xml").file_size
    assert (
        f"bomb.docx: its part 'word/document.xml' inflates to {size:,} bytes; the limit "
        f"is {MAX_ZIP_PART_BYTES:,} (MAX_ZIP_PART_BYTES)" in out
    )
    assert (
        "dense.docx: its part 'word/document.xml' inflates " in out
        and f"the limit is {MAX_ZIP_RATIO} (MAX_ZIP_RATIO)" in out
    )
    with pytest.raises(NotFound):
        engine.collection(cname)
    code, out, _, _ = ingest(cname, tmp_path, rl_home, "--skip-unreadable")
    assert code == 0, out
    assert "skipped bomb.docx (docx)" in out and "skipped dense.docx (docx)" in out
    assert engine.document(cname, "memo.docx").doc_id == "memo.docx"


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "---\n" + "\n".join(lines) + "\n---\nA note with a bomb in its front matter.\n"


def test_yaml_alias_bombs_cycles_and_deep_front_matter_are_refused_per_file(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    """The issue: 9 levels of 9 aliases (364 bytes) grew the ingest past 4.4 GB; 7 levels ingested as 83 MB of
    metadata; `a: &a [*a]` was a RecursionError traceback that failed the folder even with --skip-unreadable."""
    (tmp_path / "bomb9.md").write_text(alias_bomb(9))
    (tmp_path / "bomb7.md").write_text(alias_bomb(7))
    (tmp_path / "cycle.md").write_text("---\na: &a [*a]\n---\nA note whose front matter holds itself.\n")
    deep = "x: " + "{y: " * (MAX_METADATA_DEPTH + 1) + "1" + "}" * (MAX_METADATA_DEPTH + 1)
    (tmp_path / "deep.md").write_text(f"---\n{deep}\n---\nA note nested deep.\n")
    (tmp_path / "good.md").write_text("---\ntags: [kiln]\n---\nBisque firing notes.\n")
    assert len(alias_bomb(9)) < 600  # 9**9 = 387,420,489 leaves
    code, out, seconds, grew = ingest(cname, tmp_path, rl_home)
    assert code == 2 and seconds < 30 and grew < 200_000, (out, seconds, grew)
    assert f"bomb9.md: front matter is over {MAX_METADATA_BYTES:,} bytes as JSON (MAX_METADATA_BYTES;" in out
    assert f"bomb7.md: front matter is over {MAX_METADATA_BYTES:,} bytes as JSON" in out
    assert (
        "cycle.md: front matter.a[0] refers to itself (a YAML alias used inside its own anchor, like `a: &a [*a]`); "
        "fix the block between the --- lines" in out
    )
    assert f"deep.md: front matter.x{'.y' * (MAX_METADATA_DEPTH - 1)} is nested more than {MAX_METADATA_DEPTH}" in out
    code, out, _, _ = ingest(cname, tmp_path, rl_home, "--skip-unreadable")
    assert code == 0, out
    doc = engine.document(cname, "good.md")
    assert doc.metadata.get("tags") == ["kiln"]


def test_metadata_over_the_limits_is_refused_from_any_source(engine: Engine, cname: str) -> None:
    shared: list[str] = ["v" * 100] * 10
    big = {"a": [shared] * 100}  # 100 KB as JSON from one small list
    with pytest.raises(IngestError) as exc:
        engine.ingest(cname, [Document("d1", "", "text", big)])
    assert str(exc.value).startswith(
        f"document 'd1': metadata is over {MAX_METADATA_BYTES:,} bytes as JSON (MAX_METADATA_BYTES; reached at "
    )
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(IngestError) as exc:
        engine.ingest(cname, [Document("d2", "", "text", {"x": loop})])
    assert str(exc.value) == (
        "document 'd2': metadata.x[0] refers to itself (a YAML alias used inside its own anchor, like "
        "`a: &a [*a]`); fix the document and ingest again."
    )


def test_links_out_of_the_folder_dangling_links_and_pipes_are_named(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    """The issue: `notes.md -> ~/.ssh/...` was read, stored and served; a dangling link or a FIFO vanished unsaid."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_ed25519.md").write_text("PRIVATE KEY material that must never be ingested.\n")
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "good.md").write_text("Glaze recipes for cone 6.\n")
    (folder / "inner.md").write_text("A note linked from inside.\n")
    (folder / "notes.md").symlink_to(outside / "id_ed25519.md")
    (folder / "alias.md").symlink_to(folder / "inner.md")  # a link inside the folder is read
    (folder / "gone.md").symlink_to(tmp_path / "deleted.md")
    (folder / "away").symlink_to(outside)
    os.mkfifo(folder / "pipe.md")
    code, out, seconds, _ = ingest(cname, folder, rl_home)
    assert code == 2 and seconds < 30, out
    assert (
        f"notes.md: a symbolic link to {outside / 'id_ed25519.md'}, outside {folder}: only files inside the folder "
        "are read" in out
    )
    assert f"gone.md: a symbolic link to {tmp_path / 'deleted.md'}, which does not exist" in out
    assert "pipe.md: a named pipe (FIFO), not a file; it is left out" in out
    code, out, _, _ = ingest(cname, folder, rl_home, "--skip-unreadable", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert [f["path"] for f in report["files"]["files"]] == ["alias.md", "good.md", "inner.md"]
    assert {s["path"]: s["reason"] for s in report["files"]["skipped"]} == {
        "away": f"a symbolic link to the folder {outside}; not followed (--follow-links follows it)"
    }
    assert sorted(u["path"] for u in report["files"]["unreadable"]) == ["gone.md", "notes.md", "pipe.md"]
    with pytest.raises(NotFound):
        engine.document(cname, "notes.md")
    got = load_files(folder, skip_unreadable=True, follow_links=True)
    assert "notes.md" in [d.doc_id for d in got.documents]


# -- issue 48: values Python refuses, a text without bound, hostile PDFs, pipes swapped in, names that act ---------


def test_values_python_refuses_are_named_per_file_and_the_good_files_ingested(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    """The issue: `date: 2024-02-30` was a ValueError traceback, exit 1, the good files beside it not ingested,
    even with --skip-unreadable."""
    notes = {
        "feb30.md": "---\ndate: 2024-02-30\n---\nA day that never was.\n",
        "year0.md": "---\ntitle: Zero\ndate: 0000-01-01\n---\nA note from year zero.\n",
        "hour25.md": "---\nwhen: 2024-01-01T25:61:00\n---\nAn hour that is not.\n",
        "digits.md": "---\nn: " + "9" * 5000 + "\n---\nA very long number.\n",
        "nan.md": "---\nx: .nan\n---\nNot a number.\n",
        "binary.md": "---\nx: !!binary aGVsbG8=\n---\nBytes in front matter.\n",
        "json.md": '{\n"a": NaN\n}\nJSON front matter.\n',
        "good.md": "---\ndate: 2024-02-29\n---\nBisque firing on a leap day.\n",
    }
    for name, text in notes.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (Path(os.fsdecode(bytes(tmp_path) + b"/latin\xe9.txt"))).write_bytes(b"A name in Latin-1.")
    code, out, seconds, _ = ingest(cname, tmp_path, rl_home)
    assert code == 2 and seconds < 30, out
    for said in (
        "feb30.md: front matter, line 2: '2024-02-30' is not a date or time that exists (day is out of range for "
        "month); fix it, or quote it to keep it as text",
        "year0.md: front matter, line 3: '0000-01-01' is not a date or time that exists (year 0 is out of range)",
        "hour25.md: front matter, line 2: '2024-01-01T25:61:00' is not a date or time that exists (hour must be in "
        "0..23)",
        "digits.md: front matter, line 2: '99999999999999999999'… (5,000 characters) is not an integer Python "
        "reads (Exceeds the limit (4300 digits) for integer string conversion); quote it to keep it as text",
        "nan.md: front matter holds the number nan, which metadata (JSON) cannot store",
        "binary.md: front matter holds binary data (a !!binary value), which metadata cannot store; remove it",
        "json.md: front matter is not valid JSON (NaN is not a JSON number)",
        "latin\\udce9.txt: its name is not UTF-8 (byte 0xe9 at character 6), and a document id is text; rename the "
        "file",
    ):
        assert said in out, (said, out)
    assert "Traceback" not in out
    with pytest.raises(NotFound):
        engine.collection(cname)
    code, out, _, _ = ingest(cname, tmp_path, rl_home, "--skip-unreadable")
    assert code == 0, out
    assert doc_ids(engine, cname) == ["good.md"]
    assert engine.document(cname, "good.md").metadata["date"] == "2024-02-29"


def test_a_file_swapped_for_a_pipe_after_the_listing_is_refused_not_waited_on(tmp_path: Path) -> None:
    """The issue: the type was checked before the open, and a named pipe put in its place after the folder was
    listed hung the ingest for ever (a blocking open waits for a writer).  The swap is made for real, at the one
    moment between the check and the read, in a process of its own, so a hang fails the test rather than hangs it."""
    (tmp_path / "good.md").write_text("Glaze recipes for cone 6.\n")
    (tmp_path / "note.md").write_text("A note about to become a pipe.\n")
    script = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "import ranklock.ingest.formats as formats\n"
        "real = formats._signature\n"
        "def swapped(path):\n"
        "    got = real(path)\n"
        "    if path.name == 'note.md' and not path.is_fifo():\n"
        "        path.unlink()\n"
        "        os.mkfifo(path)\n"
        "    return got\n"
        "formats._signature = swapped\n"
        "load = formats.load_files(Path(sys.argv[1]), skip_unreadable=True)\n"
        "print(json.dumps({'read': [d.doc_id for d in load.documents], 'unreadable': [u.as_dict() for u in load.unreadable]}))\n"
    )
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 30
    assert stat.S_ISFIFO((tmp_path / "note.md").lstat().st_mode)  # the swap happened
    assert json.loads(r.stdout) == {
        "read": ["good.md"],
        "unreadable": [
            {
                "path": "note.md",
                "format": "markdown",
                "reason": "a named pipe (FIFO), not a file; it is left out (reading it could wait forever)",
            }
        ],
    }
    with pytest.raises(Unreadable) as exc:  # a pipe named directly: refused on the opened descriptor, at once
        extract(tmp_path / "note.md")
    assert exc.value.reason == "a named pipe (FIFO), not a file; it is left out (reading it could wait forever)"


def doc_ids(engine: Engine, collection: str) -> list[str]:
    """The ids of the documents the active snapshot of ``collection`` holds."""
    sid = engine.collection(collection).active_snapshot_id
    assert sid is not None
    return sorted(live_documents(engine.db, sid))


def peak_of(script: str, *args: str) -> tuple[dict[str, Any], float, int]:
    """``script`` run in a process of its own: the JSON it prints, its seconds, and its peak RSS (KiB, VmHWM)."""
    tail = (
        "\nimport json as _j\n"
        "_hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(_j.dumps({**OUT, 'hwm': int(_hwm)}))\n"
    )
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", script + tail, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    return got, time.monotonic() - t0, int(got["hwm"])


def test_a_document_over_the_size_limit_is_refused_by_its_size_in_bounded_time_and_memory(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    """The issue: one 50 MB line of Markdown grew an ingest past 6.5 GB with nothing refused after 90 s; a 12 MB
    .txt took 1.5 GB and 15 minutes of embedding.  Both are refused by their size before a byte is read."""
    limit = FileLimits.from_env().max_document_bytes
    with open(tmp_path / "one-line.md", "wb") as fh:
        for _ in range(50):
            fh.write(b"kiln glaze cone bisque " * 43_479)  # 50 x 1 MB, and not one line break
    with open(tmp_path / "book.txt", "wb") as fh:
        for _ in range(12):
            fh.write(b"The potter fired the kiln at dawn.\n" * 28_572)
    (tmp_path / "good.md").write_text("Bisque firing notes.\n")
    big, book = (tmp_path / "one-line.md").stat().st_size, (tmp_path / "book.txt").stat().st_size
    assert big > 50_000_000 and book > 12_000_000
    script = (
        "import sys\n"
        "from ranklock.ingest.formats import load_files\n"
        "load = load_files(sys.argv[1], skip_unreadable=True)\n"
        "OUT = {'read': [d.doc_id for d in load.documents], 'unreadable': {u.path: u.reason for u in load.unreadable}}\n"
    )
    got, seconds, hwm = peak_of(script, str(tmp_path))
    assert seconds < 30 and hwm < 1_500_000, (seconds, hwm)
    assert got["read"] == ["good.md"]
    assert got["unreadable"] == {
        "book.txt": f"the file is {book:,} bytes; a document's text may be at most {limit:,} bytes "
        "(RANKLOCK_MAX_DOCUMENT_BYTES): split it into smaller files, or raise the limit",
        "one-line.md": f"the file is {big:,} bytes; a document's text may be at most {limit:,} bytes "
        "(RANKLOCK_MAX_DOCUMENT_BYTES): split it into smaller files, or raise the limit",
    }
    code, out, seconds, _ = ingest(cname, tmp_path, rl_home)
    assert code == 2 and seconds < 30, out
    assert f"one-line.md: the file is {big:,} bytes;" in out and f"book.txt: the file is {book:,} bytes;" in out
    code, out, _, _ = ingest(cname, tmp_path, rl_home, "--skip-unreadable")
    assert code == 0, out
    assert doc_ids(engine, cname) == ["good.md"]


def test_the_size_limit_holds_for_every_format_and_source(
    engine: Engine, cname: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a limit of 1,000 bytes: a file at it is read, one byte over is not; HTML at four times it (its markup);
    a PDF and a DOCX by the text read from them; a JSONL record and a Document built in Python by their text."""
    monkeypatch.setenv("RANKLOCK_MAX_DOCUMENT_BYTES", "1000")
    (tmp_path / "at.txt").write_text("k" * 1000)
    (tmp_path / "over.txt").write_text("k" * 1001)
    (tmp_path / "page.html").write_text(f"<html><body><article><p>{'glaze ' * 700}</p></article></body></html>")
    text_pdf(tmp_path / "long.pdf", ["kiln " * 150, "glaze " * 150])
    docx_file(tmp_path / "long.docx", ["cone " * 300])
    load = load_files(tmp_path, skip_unreadable=True)
    assert [d.doc_id for d in load.documents] == ["at.txt"]
    reasons = {u.path: u.reason for u in load.unreadable}
    assert reasons["over.txt"] == (
        "the file is 1,001 bytes; a document's text may be at most 1,000 bytes (RANKLOCK_MAX_DOCUMENT_BYTES): split "
        "it into smaller files, or raise the limit"
    )
    html = (tmp_path / "page.html").stat().st_size
    assert reasons["page.html"] == (
        f"the file is {html:,} bytes; an HTML file may be at most 4 times a document's text, 4,000 bytes "
        "(RANKLOCK_MAX_DOCUMENT_BYTES): split it, or raise the limit"
    )
    assert reasons["long.pdf"].startswith("the text of its first 2 pages is ")
    assert reasons["long.pdf"].endswith(
        "; a document's text may be at most 1,000 bytes (RANKLOCK_MAX_DOCUMENT_BYTES)"
        ": split it into smaller files, or raise the limit"
    )
    assert reasons["long.docx"].startswith("its text is 1,499 bytes; a document's text may be at most 1,000 bytes")
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text(json.dumps({"_id": "a", "text": "short"}) + "\n" + json.dumps({"_id": "b", "text": "é" * 501}))
    with pytest.raises(IngestError) as exc:
        engine.ingest(cname, jsonl)
    assert str(exc.value) == (
        f"{jsonl}:2: document 'b': the document's text is 1,002 bytes; a document's text may be at most 1,000 bytes "
        "(RANKLOCK_MAX_DOCUMENT_BYTES). Split it into smaller documents, or raise the limit."
    )
    with pytest.raises(IngestError) as exc:
        engine.ingest(cname, [Document("big", "", "k" * 1001)], create={"embedder": use_hash_embedder(engine)})
    assert str(exc.value).startswith("document 'big': the document's text is 1,001 bytes; a document's text may")
    with pytest.raises(NotFound):
        engine.collection(cname)


def test_hostile_pdfs_are_refused_by_page_and_time_bounds_and_the_next_pdf_is_read(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue: a 175 kB PDF of 200 pages sharing one 61 MB content stream held an ingest for hours (its first
    page alone past 200 s); a 16 MB page tree of 100,000 pages was read whole (74 s, 600 MB)."""
    monkeypatch.setenv("RANKLOCK_PDF_TIMEOUT", "4s")
    line = b"BT /F1 12 Tf 72 720 Td (Hello world) Tj ET\n"
    shared_stream_pdf(tmp_path / "b-shared.pdf", 200, line * (61_000_000 // len(line)))
    page_tree_pdf(tmp_path / "c-tree.pdf", 100_000)
    page_tree_pdf(tmp_path / "d-lying.pdf", 3_000, count=1)  # its root says one page
    text_pdf(tmp_path / "a-good.pdf", ["Bisque firing at cone 04."])
    text_pdf(tmp_path / "e-after.pdf", ["Read after a PDF whose reader was stopped."])
    assert (tmp_path / "b-shared.pdf").stat().st_size < 300_000
    code, out, seconds, grew = ingest(cname, tmp_path, rl_home)
    assert code == 2 and seconds < 30 and grew < 200_000, (out, seconds)
    assert (
        "b-shared.pdf: reading its text took longer than 4 s (RANKLOCK_PDF_TIMEOUT), so it was stopped: a page "
        "that costs minutes to read" in out
    )
    assert (
        "c-tree.pdf: its page tree says 100,000 pages; a PDF may have at most 2,000 (RANKLOCK_PDF_MAX_PAGES): "
        "split it, or raise the limit" in out
    )
    assert "d-lying.pdf: it has more pages; a PDF may have at most 2,000 (RANKLOCK_PDF_MAX_PAGES)" in out
    code, out, _, _ = ingest(cname, tmp_path, rl_home, "--skip-unreadable")
    assert code == 0, out
    assert doc_ids(engine, cname) == ["a-good.pdf", "e-after.pdf"]
    monkeypatch.setenv("RANKLOCK_PDF_MAX_PAGES", "100000")
    with pytest.raises(Unreadable) as exc:  # within the page bound, the time bound still holds
        extract(tmp_path / "c-tree.pdf", FileLimits(5_000_000, 100_000, 2.0))
    assert exc.value.reason.startswith("reading its text took longer than 2 s (RANKLOCK_PDF_TIMEOUT)")
