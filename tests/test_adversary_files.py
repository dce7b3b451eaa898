"""Hostile files in a folder to ingest (issue 42): zip bombs, YAML alias bombs and cycles, links out of the folder,
dangling links and pipes.  Each is refused naming the file (exit 2), or left out and named with --skip-unreadable,
in bounded time and memory, and the good files beside it are kept."""

from __future__ import annotations

import json
import os
import resource
import time
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder
from filegen import docx_file
from ranklock import Document, Engine, IngestError
from ranklock.cli import app
from ranklock.errors import NotFound
from ranklock.ingest.formats import load_files
from ranklock.limits import MAX_METADATA_BYTES, MAX_METADATA_DEPTH, MAX_ZIP_PART_BYTES, MAX_ZIP_RATIO


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
