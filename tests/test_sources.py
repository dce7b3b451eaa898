"""A folder is a source: ingesting it again mirrors it (ranklock.snapshot.sources), on real files and Postgres."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder, resolve_hash_embedder_by_id, use_hash_embedder
from ranklock import Engine, IngestError
from ranklock.cli import app
from ranklock.errors import NotFound
from ranklock.ingest.document import Document
from ranklock.ingest.formats import load_files


def _notes(root: Path, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _ids(engine: Engine, name: str) -> list[str]:
    hits = engine.search(name, "note", mode="lexical", k=100).hits
    return sorted(h.doc_id for h in hits)


@pytest.fixture
def hashed(engine: Engine) -> dict[str, object]:
    return {"embedder": use_hash_embedder(engine)}


def test_a_folder_ingested_again_loses_the_files_gone_from_it_and_names_them(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object]
) -> None:
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha", "b.md": "note bravo", "sub__c.md": "note charlie"})
    other = _notes(tmp_path / "other", **{"d.md": "note delta"})
    first = engine.ingest(cname, notes, create=hashed)
    assert (first.created, first.source, first.removed_ids) == (True, os.path.realpath(notes), [])
    engine.ingest(cname, other)
    engine.ingest(cname, [Document("e", "", "note echo from a list")])
    (notes / "b.md").unlink()
    (notes / "sub" / "c.md").unlink()
    report = engine.ingest(cname, notes)
    assert (report.created, report.added, report.changed, report.removed, report.unchanged) == (False, 0, 0, 2, 1)
    assert report.removed_ids == ["b.md", "sub/c.md"]
    # Documents of other sources (another folder, a list) are untouched.
    assert _ids(engine, cname) == ["a.md", "d.md", "e"]
    assert engine.search(cname, "bravo", mode="lexical").hits == []
    # A new snapshot, as any delete: the one before still holds them.
    assert "b.md" in _ids_in(engine, cname, report.parent_id)
    # Ingesting the folder again changes nothing more.
    again = engine.ingest(cname, notes)
    assert (again.built, again.removed_ids) == (False, [])


def _ids_in(engine: Engine, name: str, snapshot: int | None) -> list[str]:
    hits = engine.search(name, "note", mode="lexical", k=100, snapshot=snapshot).hits
    return sorted(h.doc_id for h in hits)


def test_the_same_folder_by_another_path_is_the_same_source(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha", "b.md": "note bravo"})
    engine.ingest(cname, notes, create=hashed)
    (tmp_path / "link").symlink_to(notes)
    (notes / "a.md").unlink()
    by_link = engine.ingest(cname, tmp_path / "link")
    assert (by_link.source, by_link.removed_ids) == (os.path.realpath(notes), ["a.md"])
    (notes / "b.md").unlink()
    (notes / "c.md").write_text("note charlie", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    relative = engine.ingest(cname, "./notes/")
    assert (relative.source, relative.removed_ids, relative.added) == (os.path.realpath(notes), ["b.md"], 1)
    assert _ids(engine, cname) == ["c.md"]


def test_no_delete_keeps_the_documents_of_files_gone(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object]
) -> None:
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha", "b.md": "note bravo"})
    engine.ingest(cname, notes, create=hashed)
    (notes / "b.md").unlink()
    kept = engine.ingest(cname, notes, mirror=False)
    assert (kept.built, kept.removed_ids) == (False, [])
    assert _ids(engine, cname) == ["a.md", "b.md"]
    # The next mirror still knows b.md came from the folder.
    assert engine.ingest(cname, notes).removed_ids == ["b.md"]


def test_an_emptied_or_missing_folder_removes_nothing_unless_said_on_purpose(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object]
) -> None:
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha", "b.md": "note bravo"})
    engine.ingest(cname, [Document("x", "", "note xray from a list")], create=hashed)
    engine.ingest(cname, notes)
    active = engine.collection(cname).active_snapshot_id
    for f in notes.iterdir():
        f.unlink()
    real = os.path.realpath(notes)
    with pytest.raises(IngestError) as err:
        engine.ingest(cname, notes)
    assert str(err.value) == (
        f"{real} holds no file to ingest now, and collection {cname!r} holds 2 documents ingested from it; nothing "
        "was changed (a folder on a drive that is not mounted looks just as empty). Mount it again; if you emptied "
        "it on purpose, pass --allow-empty (allow_empty=True) to remove them."
    )
    notes.rmdir()
    with pytest.raises(IngestError) as err:
        engine.ingest(cname, notes)
    assert str(err.value) == (
        f"{notes} does not exist (a drive that is not mounted, or a folder moved?); collection {cname!r} keeps the "
        "2 documents ingested from it, and nothing was changed. Mount it again, or ingest the folder from where it "
        "is now; to remove those documents, ingest an empty folder at that path with --allow-empty."
    )
    assert engine.collection(cname).active_snapshot_id == active
    notes.mkdir()
    emptied = engine.ingest(cname, notes, allow_empty=True)
    assert (emptied.removed_ids, emptied.documents) == (["a.md", "b.md"], 1)
    assert _ids(engine, cname) == ["x"]


def test_a_file_that_cannot_be_read_is_kept_not_taken_for_gone(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha", "b.md": "note bravo", "locked__c.md": "note charlie"})
    engine.ingest(cname, notes, create=hashed)
    (notes / "b.md").write_bytes(b"note \xff\xfe not utf-8")
    with pytest.raises(IngestError, match="1 file under .* could not be read; nothing was ingested"):
        engine.ingest(cname, load_files(notes, allow_empty=True))
    # A folder under it that cannot be listed (as for another user's folder) is not gone either.
    real_iterdir = Path.iterdir

    def iterdir(self: Path):  # type: ignore[no-untyped-def]
        if self.name == "locked":
            raise PermissionError(13, "Permission denied")
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    read = load_files(notes, skip_unreadable=True, allow_empty=True)
    assert [(u.path, u.format, u.reason) for u in read.unreadable] == [
        ("b.md", "markdown", "not UTF-8 text (byte 5); re-encode it as UTF-8"),
        ("locked/", "folder", "cannot list the folder (Permission denied)"),
    ]
    report = engine.ingest(cname, read)
    assert (report.built, report.removed_ids, report.kept_unreadable) == (False, [], ["b.md", "locked/c.md"])
    assert _ids(engine, cname) == ["a.md", "b.md", "locked/c.md"]


def test_a_mirror_that_read_the_folder_before_another_was_written_writes_nothing(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object]
) -> None:
    """Two ingests of one folder at once: the one that read it first must not bring back what the other saw gone."""
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha", "b.md": "note bravo"})
    engine.ingest(cname, notes, create=hashed)
    slow = load_files(notes, allow_empty=True)  # read, then embedding for a while
    (notes / "b.md").unlink()
    fast = engine.ingest(cname, load_files(notes, allow_empty=True))
    assert fast.removed_ids == ["b.md"]
    active = engine.collection(cname).active_snapshot_id
    late = engine.ingest(cname, slow)
    assert (late.superseded, late.built, late.snapshot_id) == (True, False, active)
    assert _ids(engine, cname) == ["a.md"]


def test_replace_is_the_mirror_of_the_whole_collection(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object]
) -> None:
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha"})
    engine.ingest(cname, [Document("x", "", "note xray from a list")], create=hashed)
    engine.ingest(cname, notes)
    report = engine.ingest(cname, notes, replace=True)
    assert (report.removed_ids, _ids(engine, cname)) == (["x"], ["a.md"])


def test_a_document_another_folder_gave_is_named_when_this_one_gives_it(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object]
) -> None:
    first = _notes(tmp_path / "first", **{"README.md": "note from the first folder", "a.md": "note alpha"})
    second = _notes(tmp_path / "second", **{"README.md": "note from the second folder"})
    engine.ingest(cname, first, create=hashed)
    report = engine.ingest(cname, second)
    assert (report.changed, report.moved) == (1, {"README.md": os.path.realpath(first)})
    # Now the second folder's: the first one's mirror does not delete it, it gives it back.
    (first / "README.md").unlink()
    assert engine.ingest(cname, first).removed_ids == []
    assert _ids(engine, cname) == ["README.md", "a.md"]


def test_an_interrupted_first_ingest_leaves_no_collection(
    engine: Engine, cname: str, tmp_path: Path, hashed: dict[str, object]
) -> None:
    def ctrl_c(stage: str, _done: int, _total: int) -> None:
        if stage == "write":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.ingest(cname, _notes(tmp_path / "n", **{"a.md": "note alpha"}), create=hashed, progress=ctrl_c)
    with pytest.raises(NotFound):
        engine.collection(cname)


def test_embedding_progress_moves_one_batch_at_a_time(engine: Engine, cname: str, hashed: dict[str, object]) -> None:
    seen: list[int] = []
    docs = [Document(f"d{i:03}", "", f"note number {i} of a hundred") for i in range(100)]

    def progress(stage: str, done: int, _total: int) -> None:
        if stage == "embed":
            seen.append(done)

    engine.ingest(cname, docs, create=hashed, progress=progress)
    assert seen == [0, 32, 64, 96, 100]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, rl_home: Path) -> list[str]:
    resolve_hash_embedder_by_id(monkeypatch)
    return ["--home", str(rl_home)]


def test_cli_names_what_the_mirror_removed_and_a_new_collection(cli: list[str], cname: str, tmp_path: Path) -> None:
    name = f"pottery{abs(hash(cname)) % 10000}"
    notes = _notes(tmp_path / "notes", **{"a.md": "note alpha", "b.md": "note bravo", "c.md": "note charlie"})
    r = CliRunner().invoke(app, ["ingest", name, str(notes), "--embedder", HashEmbedder.id, *cli])
    assert r.exit_code == 0, r.output
    assert f"{name!r} is a new collection: this ingest created it (`ranklock collections` lists them)\n" in r.stderr
    (notes / "b.md").unlink()
    (notes / "c.md").unlink()
    r = CliRunner().invoke(app, ["ingest", name, str(notes), *cli])
    assert r.exit_code == 0, r.output
    assert "new collection" not in r.stderr
    assert "added 0, changed 0, removed 2, unchanged 1;" in " ".join(r.stdout.split())
    assert f"removed 2 (gone from {os.path.realpath(notes)}): b.md, c.md\n" in r.stdout
    typo = name.replace("pottery", "potery")
    r = CliRunner().invoke(app, ["ingest", typo, str(notes), "--embedder", HashEmbedder.id, *cli])
    assert r.exit_code == 0, r.output
    assert (
        f"{typo!r} is a new collection: this ingest created it; did you mean {name!r}? (`ranklock collections` "
        "lists them)\n" in r.stderr
    )
    r = CliRunner().invoke(app, ["ingest", name + "b", str(notes), "--json", "--embedder", HashEmbedder.id, *cli])
    assert r.exit_code == 0, r.output
    assert (json.loads(r.stdout)["created"], r.stderr) == (True, "")
