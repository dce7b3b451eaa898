"""File loaders on real files the tests write: Markdown vaults, PDF, DOCX and HTML, through `ranklock ingest`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import HashEmbedder
from filegen import corrupt_docx, docx_file, encrypted_pdf, html_page, image_pdf, pt_es_vault, text_pdf, vault
from ranklock import Engine, IngestError
from ranklock.cli import app
from ranklock.domains.resumes.load import load_resumes
from ranklock.errors import ConfigError, NotFound
from ranklock.ingest.formats import extract, load_files
from ranklock.ingest.formats.base import require
from ranklock.ingest.loaders import load_corpus


@pytest.fixture
def cli_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its own Engine: let it resolve the test's hash embedder by id."""
    import ranklock.embed.loaded

    real = ranklock.embed.loaded.resolve_embedder
    monkeypatch.setattr(
        ranklock.embed.loaded,
        "resolve_embedder",
        lambda spec: HashEmbedder() if spec == HashEmbedder.id else real(spec),
    )


def _by_id(path: Path) -> dict[str, object]:
    return {d.doc_id: d for d in load_files(path, skip_unreadable=True).documents}


def test_vault_front_matter_dates_tags_links_and_people(tmp_path: Path) -> None:
    docs = _by_id(vault(tmp_path / "vault"))
    monday = docs["daily/2024-03-04.md"]
    assert (monday.title, monday.metadata) == (  # type: ignore[attr-defined]
        "Monday",
        {"date": "2024-03-04", "links": ["Ana Ruiz", "Kiln Project"], "tags": ["pottery", "work"]},
    )
    # Links and tags stay in the text, where they are searchable words too.
    assert "[[Kiln Project|kiln]]" in monday.body and "#pottery" in monday.body  # type: ignore[attr-defined]
    tuesday = docs["daily/2024-03-05.md"]
    assert tuesday.metadata == {  # type: ignore[attr-defined]
        "date": "2024-03-05",
        "people": ["Ana Ruiz", "Ben Okafor"],
        "tags": ["health", "running"],
    }
    kiln = docs["Kiln Project.md"]
    # Front matter: title, a YAML date, tags with a '#', any other key; the code block's tag and link are not counted.
    assert (kiln.title, kiln.metadata) == (  # type: ignore[attr-defined]
        "Kiln project",
        {"date": "2024-02-11", "links": ["Glaze recipes"], "status": "active", "tags": ["pottery", "projects"]},
    )
    assert docs["Glaze recipes.md"].metadata == {}  # type: ignore[attr-defined]  # '#1' is not a tag


def test_front_matter_date_wins_over_file_name_and_bad_yaml_is_named(tmp_path: Path) -> None:
    (tmp_path / "2024-01-01.md").write_text("---\ndate: 2023-12-31\n---\nNew year's eve.\n", encoding="utf-8")
    (tmp_path / "2024-13-45 draft.md").write_text("Not a real date.\n", encoding="utf-8")
    (tmp_path / "broken.md").write_text("---\ntags: [a, b\n---\nbody\n", encoding="utf-8")
    loaded = load_files(tmp_path, skip_unreadable=True)
    assert [(d.doc_id, d.metadata) for d in loaded.documents] == [
        ("2024-01-01.md", {"date": "2023-12-31"}),
        ("2024-13-45 draft.md", {}),
    ]
    assert [(u.path, u.reason.split(" (")[0]) for u in loaded.unreadable] == [
        ("broken.md", "front matter is not valid YAML")
    ]


def test_pdf_text_layer_title_and_pages(tmp_path: Path) -> None:
    text_pdf(tmp_path / "cv.pdf", ["Jane Doe\nTIG welder, 12 years.", "Certified AWS D1.1."], title="Jane's CV")
    (doc,) = load_files(tmp_path / "cv.pdf").documents
    assert (doc.doc_id, doc.title, doc.metadata) == ("cv.pdf", "Jane's CV", {"pages": 2})
    assert doc.body == "Jane Doe\nTIG welder, 12 years.\n\nCertified AWS D1.1."


def test_unreadable_files_are_named_with_their_reason(tmp_path: Path) -> None:
    image_pdf(tmp_path / "scan.pdf")
    encrypted_pdf(tmp_path / "locked.pdf", "the secret plan")
    corrupt_docx(tmp_path / "broken.docx")
    (tmp_path / "ok.txt").write_text("fine", encoding="utf-8")
    with pytest.raises(IngestError) as e:
        load_files(tmp_path)
    assert str(e.value) == (
        f"3 files under {tmp_path} could not be read; nothing was ingested:\n"
        "  broken.docx: not a .docx package (not a valid zip archive: truncated, or another format renamed .docx); "
        "open and re-save it in Word or LibreOffice\n"
        "  locked.pdf: encrypted PDF (password protected); decrypt it (e.g. qpdf --decrypt) and ingest again\n"
        "  scan.pdf: no text layer in 1 page (a scanned or image-only PDF); run OCR on it (e.g. ocrmypdf) "
        "and ingest the result\n"
        "Fix or remove them, or pass --skip-unreadable to ingest the rest and leave these out."
    )
    # The engine's own path loader fails the same way: nothing is half-read.
    with pytest.raises(IngestError, match=r"^3 files under"):
        load_corpus(tmp_path)
    loaded = load_files(tmp_path, skip_unreadable=True)
    assert [d.doc_id for d in loaded.documents] == ["ok.txt"]
    assert [u.path for u in loaded.unreadable] == ["broken.docx", "locked.pdf", "scan.pdf"]


def test_docx_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    docx_file(
        tmp_path / "r.docx",
        ["Sam Lee", "Backend developer"],
        title="CV of Sam",
        table=[["Skills", "Python, SQL"], ["Years", "5"]],
    )
    (doc,) = load_files(tmp_path / "r.docx").documents
    assert (doc.title, doc.body) == ("CV of Sam", "Sam Lee\n\nBackend developer\n\nSkills | Python, SQL\n\nYears | 5")


def test_html_boilerplate_is_removed(tmp_path: Path) -> None:
    html_page(
        tmp_path / "post.html",
        "Kiln firing schedules",
        [
            "Bisque firing reaches cone 04 slowly over eight hours so that water escapes.",
            "Glaze firing then goes to cone 6, with a controlled cooling phase to grow crystals.",
        ],
    )
    (doc,) = load_files(tmp_path / "post.html").documents
    assert doc.title == "Kiln firing schedules"
    assert "Bisque firing reaches cone 04" in doc.body and "controlled cooling phase" in doc.body
    for furniture in ("Pricing", "Careers", "cookies", "newsletter", "Copyright", "Privacy policy"):
        assert furniture not in doc.body
    assert doc.metadata == {}  # no guessed date from the footer's "Copyright 2026"


def test_missing_extra_names_the_extra() -> None:
    with pytest.raises(ConfigError) as e:
        require("ranklock_no_such_module.sub", "pdf")
    assert str(e.value) == (
        "reading these files needs the optional package 'ranklock_no_such_module', which is not installed; "
        "install it with: pip install 'ranklock[pdf]'"
    )


@pytest.mark.usefixtures("cli_hash_embedder")
def test_cli_ingest_vault_typed_fields_and_date_filter(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    root = vault(tmp_path / "vault")
    base = ["--home", str(rl_home), "--embedder", HashEmbedder.id]
    r = CliRunner().invoke(app, ["ingest", cname, str(root), *base])
    assert r.exit_code == 0, r.output
    monday = _by_id(root)["daily/2024-03-04.md"]
    chars = len(monday.body)  # type: ignore[attr-defined]
    assert f"read daily/2024-03-04.md (markdown): {chars} characters; metadata date, links, tags\n" in r.stdout
    coll = engine.collection(cname)
    # Inferred from the notes' metadata (ranklock.ingest.infer), printed, and kept in the manifest.
    assert [(f.name, f.type, f.required) for f in coll.fields] == [
        ("date", "date", False),
        ("links", "keyword[]", False),
        ("people", "keyword[]", False),
        ("status", "keyword", False),
        ("tags", "keyword[]", False),
    ]
    assert (
        "typed fields inferred from the metadata of 4 documents: date:date, links:keyword[], people:keyword[], "
        "status:keyword, tags:keyword[]\n" in r.stdout
    )
    assert engine.manifest(cname)["field_inference"] == {
        "documents": 4,
        "fields": ["date:date", "links:keyword[]", "people:keyword[]", "status:keyword", "tags:keyword[]"],
        "untyped": {},
    }
    res = engine.search(cname, "glaze kiln pottery", mode="lexical", filter="date >= '2024-03-01'", k=10)
    assert [h.doc_id for h in res.hits] == ["daily/2024-03-04.md"]
    res = engine.search(cname, "canal", mode="lexical", filter='people has "Ben Okafor"', k=10)
    assert [h.doc_id for h in res.hits] == ["daily/2024-03-05.md"]


@pytest.mark.usefixtures("cli_hash_embedder")
def test_cli_ingest_fails_loudly_then_skips_and_names(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    text_pdf(tmp_path / "report.pdf", ["Quarterly kiln report: 40 firings, 2 cracked shelves."])
    docx_file(tmp_path / "memo.docx", ["Order more cone 6 witness cones."])
    image_pdf(tmp_path / "scan.pdf")
    base = ["--home", str(rl_home), "--embedder", HashEmbedder.id]
    r = CliRunner().invoke(app, ["ingest", cname, str(tmp_path), *base])
    assert r.exit_code == 2
    assert "1 file under" in r.stderr and "scan.pdf: no text layer in 1 page" in r.stderr
    with pytest.raises(NotFound):
        engine.collection(cname)  # nothing half-ingested: not even the collection
    r = CliRunner().invoke(app, ["ingest", cname, str(tmp_path), "--skip-unreadable", "--json", *base])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["documents"] == 2
    assert [(f["path"], f["format"]) for f in out["files"]["files"]] == [("memo.docx", "docx"), ("report.pdf", "pdf")]
    assert out["files"]["unreadable"] == [
        {
            "path": "scan.pdf",
            "format": "pdf",
            "reason": "no text layer in 1 page (a scanned or image-only PDF); run OCR on it (e.g. ocrmypdf) "
            "and ingest the result",
        }
    ]
    hits = engine.search(cname, "cracked shelves", mode="lexical", k=5).hits
    assert [h.doc_id for h in hits] == ["report.pdf"]


def test_resumes_from_pdf_and_docx(tmp_path: Path) -> None:
    text_pdf(
        tmp_path / "ana.pdf",
        ["Ana Ruiz\nana@example.com\nPython developer with 6 years of experience.\nSkills: Python, SQL"],
    )
    docx_file(tmp_path / "ben.docx", ["Ben Okafor", "Welder, 9 years of experience.", "Skills: TIG welding"])
    docs = {d.doc_id: d for d in load_resumes(tmp_path)}
    assert sorted(docs) == ["ana", "ben"]
    assert "Python developer" in docs["ana"].body and "Ana Ruiz" not in docs["ana"].body  # identity scrubbed
    assert docs["ana"].display.get("name") == "Ana Ruiz"
    assert "Welder" in docs["ben"].body
    image_pdf(tmp_path / "scan.pdf")
    with pytest.raises(IngestError) as e:
        load_resumes(tmp_path)
    assert str(e.value) == (
        f"1 file under {tmp_path} could not be read; nothing was ingested:\n"
        "  scan.pdf: no text layer in 1 page (a scanned or image-only PDF); run OCR on it (e.g. ocrmypdf) "
        "and ingest the result\nFix or remove them."
    )


KNOWN = "known: .docx, .htm, .html, .markdown, .md, .pdf, .txt"
EMPTY = "empty: no text to search (a title or front matter alone is no document)"


def test_a_tag_at_the_end_of_a_line_ends_there(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("first #alpha\nsecond line #beta\\\nthird\n", encoding="utf-8")
    got = extract(note)
    assert got.metadata == {"tags": ["alpha", "beta"]}
    assert got.body == "first #alpha\nsecond line #beta\\\nthird"  # the text itself is kept as written


def test_pt_es_vault_nested_folders_accents_attachments_empty_and_broken_files(tmp_path: Path) -> None:
    loaded = load_files(pt_es_vault(tmp_path / "vault"), skip_unreadable=True)
    docs = {d.doc_id: d for d in loaded.documents}
    assert sorted(docs) == [
        "Diário/2024-03-04 reunião.md",
        "Proyectos/Año 2024/Cocción lenta.md",
        "Proyectos/Recetas de esmalte.md",
    ]
    reuniao = docs["Diário/2024-03-04 reunião.md"]
    assert (reuniao.title, reuniao.metadata) == (
        "Segunda-feira",
        {
            "date": "2024-03-04",
            "links": ["João Araújo"],
            "people": ["Inês Gonçalves", "João Araújo"],
            "tags": ["cerâmica", "trabalho"],  # not "trabalhopróxima": the tag ends with its line
        },
    )
    coccion = docs["Proyectos/Año 2024/Cocción lenta.md"]
    # The title is the front matter's; the heading that repeats it is not stored twice.
    assert coccion.title == "Cocción lenta" and coccion.body.startswith("La cocción del bizcocho")
    assert coccion.metadata == {
        "date": "2024-02-11",
        "estado": "activo",
        "links": ["Recetas de esmalte"],
        "tags": ["cerámica"],
    }
    # Attachments, files without a suffix and empty notes are skipped and named; app state is passed over.
    assert [(s.path, s.reason) for s in loaded.skipped] == [
        ("Empty Note.md", EMPTY),
        ("LEIA-ME", f"no loader for files without a suffix ({KNOWN})"),
        ("anexos/foto do forno.png", f"no loader for '.png' ({KNOWN})"),
        ("anexos/orçamento.csv", f"no loader for '.csv' ({KNOWN})"),
        ("vazio.md", EMPTY),
    ]
    assert [(u.path, u.reason) for u in loaded.unreadable] == [
        ("binário.md", "not UTF-8 text (byte 0); re-encode it as UTF-8"),
        ("latin1.md", "not UTF-8 text (byte 1); re-encode it as UTF-8"),
    ]


@pytest.mark.usefixtures("cli_hash_embedder")
def test_cli_ingest_of_the_pt_es_vault_names_every_file_it_left_out(
    engine: Engine, cname: str, rl_home: Path, tmp_path: Path
) -> None:
    root = pt_es_vault(tmp_path / "vault")
    base = ["--home", str(rl_home), "--embedder", HashEmbedder.id]
    r = CliRunner().invoke(app, ["ingest", cname, str(root), *base])
    assert r.exit_code == 2 and "2 files under" in r.stderr and "binário.md: not UTF-8 text" in r.stderr
    r = CliRunner().invoke(app, ["ingest", cname, str(root), "--skip-unreadable", *base])
    assert r.exit_code == 0, r.output
    for line in (
        "skipped binário.md (markdown): not UTF-8 text (byte 0); re-encode it as UTF-8",
        f"skipped Empty Note.md: {EMPTY}",
        f"skipped anexos/orçamento.csv: no loader for '.csv' ({KNOWN})",
        f"skipped vazio.md: {EMPTY}",
    ):
        assert line in " ".join(r.stderr.split()), line
    assert ".obsidian" not in r.output and ".DS_Store" not in r.output
    assert engine.snapshot_info(cname).documents == 3
    # The empty note is no document, so it cannot turn up in an unrelated search.
    res = engine.search(cname, "empty note", mode="lexical", k=10)
    assert res.hits == []
    res = engine.search(cname, "forno", mode="lexical", filter='tags has "trabalho"', k=10)
    assert [h.doc_id for h in res.hits] == ["Diário/2024-03-04 reunião.md"]
    res = engine.search(cname, "cocción", mode="lexical", filter="estado = 'activo' and date < '2024-03-01'", k=10)
    assert [h.doc_id for h in res.hits] == ["Proyectos/Año 2024/Cocción lenta.md"]


def test_pdf_docx_and_html_texts_do_not_repeat_their_title(tmp_path: Path) -> None:
    text_pdf(
        tmp_path / "r.pdf", ["Quarterly kiln report\n40 firings, 2 cracked shelves."], title="Quarterly Kiln Report"
    )
    docx_file(tmp_path / "m.docx", ["Glaze memo", "Order more cone 6 witness cones."], title="Glaze memo")
    html_page(tmp_path / "p.html", "Kiln firing schedules", ["Bisque firing reaches cone 04 slowly."])
    docs = {d.doc_id: d for d in load_files(tmp_path).documents}
    assert (docs["r.pdf"].title, docs["r.pdf"].body) == ("Quarterly Kiln Report", "40 firings, 2 cracked shelves.")
    assert (docs["m.docx"].title, docs["m.docx"].body) == ("Glaze memo", "Order more cone 6 witness cones.")
    assert docs["p.html"].title == "Kiln firing schedules"
    assert docs["p.html"].body == "Bisque firing reaches cone 04 slowly."


def test_a_page_with_no_main_text_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text(
        "<!doctype html><html><head><title>Home</title></head><body><header><nav><ul>"
        + "".join(f'<li><a href="/{n.lower()}">{n}</a></li>' for n in ("Home", "About us", "Blog", "Contact"))
        + "</ul></nav></header><main><h1>Home</h1><ul><li><a href='/b/1'>Spring glaze notes</a></li>"
        "<li><a href='/b/2'>Kiln repairs</a></li></ul></main><footer>Copyright 2026</footer></body></html>",
        encoding="utf-8",
    )
    # A page that is its menu alone: trafilatura, with nothing else to choose, returns the menu's links.
    (tmp_path / "menu.html").write_text(
        '<html><head><title>Home</title></head><body><nav><a href="/">Home</a> <a href="/x">About</a></nav>'
        "<footer>Copyright 2026</footer></body></html>",
        encoding="utf-8",
    )
    (tmp_path / "ok.txt").write_text("a real note", encoding="utf-8")
    loaded = load_files(tmp_path, skip_unreadable=True)
    assert [d.doc_id for d in loaded.documents] == ["ok.txt"]
    reason = "no main text found (only navigation, boilerplate or a heading); check the page has an article body"
    assert [(u.path, u.reason) for u in loaded.unreadable] == [("index.html", reason), ("menu.html", reason)]
