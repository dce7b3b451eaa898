"""Real files for the loader tests, written by the libraries people make them with (fpdf2, pypdf, python-docx)."""

from __future__ import annotations

import io
import zlib
from pathlib import Path

NAV = ["Home", "Products", "Pricing", "About us", "Careers", "Contact"]


def text_pdf(path: Path, pages: list[str], *, title: str = "", author: str = "") -> Path:
    """A PDF whose pages carry a real text layer (core Helvetica font)."""
    from fpdf import FPDF

    pdf = FPDF()
    if title:
        pdf.set_title(title)
    if author:
        pdf.set_author(author)
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def image_pdf(path: Path) -> Path:
    """A 'scanned' PDF: one page that is only a picture, with no text layer."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (400, 120), "white")
    ImageDraw.Draw(img).text((10, 50), "Scanned resume of a welder", fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    pdf = FPDF()
    pdf.add_page()
    pdf.image(buf, x=10, y=10, w=180)
    pdf.output(str(path))
    return path


def encrypted_pdf(path: Path, text: str, password: str = "s3cret") -> Path:
    """A text PDF encrypted with a user password (AES-256, as current writers do)."""
    from pypdf import PdfReader, PdfWriter

    plain = text_pdf(path.with_suffix(".plain.pdf"), [text])
    writer = PdfWriter(clone_from=PdfReader(str(plain)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-256")
    with open(path, "wb") as fh:
        writer.write(fh)
    plain.unlink()
    return path


def docx_file(path: Path, paragraphs: list[str], *, title: str = "", table: list[list[str]] | None = None) -> Path:
    """A Word document with paragraphs (and optionally a table), written by python-docx."""
    import docx

    doc = docx.Document()
    if title:
        doc.core_properties.title = title
    for p in paragraphs:
        doc.add_paragraph(p)
    if table:
        t = doc.add_table(rows=len(table), cols=len(table[0]))
        for i, row in enumerate(table):
            for j, cell in enumerate(row):
                t.cell(i, j).text = cell
    doc.save(str(path))
    return path


def corrupt_docx(path: Path) -> Path:
    """A .docx cut off halfway through (a broken download): the zip's central directory is missing."""
    good = docx_file(path.with_suffix(".good.docx"), ["This file will be truncated."])
    data = good.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    good.unlink()
    return path


def html_page(path: Path, title: str, paragraphs: list[str]) -> Path:
    """An article page wrapped in navigation, a sidebar, a cookie banner and a footer."""
    nav = "".join(f'<li><a href="/{n.lower()}">{n}</a></li>' for n in NAV)
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    path.write_text(
        f"""<!doctype html><html><head><title>{title}</title><meta charset="utf-8"></head><body>
<header><nav><ul>{nav}</ul></nav></header>
<div class="cookie-banner">We use cookies to improve your experience. Accept all cookies.</div>
<aside class="sidebar"><h3>Related posts</h3><ul><li><a href="/a">Ten tips for spring</a></li>
<li><a href="/b">Subscribe to our newsletter</a></li></ul></aside>
<main><article><h1>{title}</h1>{body}</article></main>
<footer><p>Copyright 2026 Example Corp. All rights reserved.</p><a href="/privacy">Privacy policy</a></footer>
</body></html>""",
        encoding="utf-8",
    )
    return path


def vault(root: Path) -> Path:
    """An Obsidian-style vault: front matter, dated daily notes, wiki links, inline tags, a code block."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "daily").mkdir(exist_ok=True)
    (root / "daily" / "2024-03-04.md").write_text(
        "# Monday\n\nMet [[Ana Ruiz]] about the [[Kiln Project|kiln]]; the glaze tests failed again. #pottery #work\n",
        encoding="utf-8",
    )
    (root / "daily" / "2024-03-05.md").write_text(
        "---\ntags: [health]\npeople: Ana Ruiz, Ben Okafor\n---\nRan 5 km by the canal. Knee fine. #running\n",
        encoding="utf-8",
    )
    (root / "Kiln Project.md").write_text(
        "---\ntitle: Kiln project\ndate: 2024-02-11\ntags:\n  - pottery\n  - '#projects'\nstatus: active\n---\n"
        "Build a small electric kiln. See [[Glaze recipes#Celadon]].\n\n```\n#not-a-tag [[not a link]]\n```\n",
        encoding="utf-8",
    )
    (root / "Glaze recipes.md").write_text(
        "Celadon: 2% iron oxide. Tag #1 is an issue number, not a tag.\n", encoding="utf-8"
    )
    return root


#: The bytes of a 1x1 PNG: a binary attachment as vaults hold them.
PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


def pt_es_vault(root: Path) -> Path:
    """A vault as people keep them: Portuguese and Spanish notes in nested folders with accents and spaces,
    front matter, a tag at the end of a line, attachments, app state, empty notes and two broken files."""
    files: dict[str, str | bytes] = {
        ".obsidian/app.json": '{"theme": "obsidian"}',  # application state: passed over, not reported
        ".DS_Store": b"\x00\x00\x00\x01Bud1",
        "Diário/2024-03-04 reunião.md": (
            "---\ntags: [cerâmica]\npeople: João Araújo, Inês Gonçalves\n---\n# Segunda-feira\n\n"
            "Reunião com [[João Araújo]] sobre o forno elétrico. #trabalho\n"
            "Próxima etapa: esmaltação das peças.\n"
        ),
        "Proyectos/Año 2024/Cocción lenta.md": (
            "---\ntitle: Cocción lenta\ndate: 2024-02-11\nestado: activo\n---\n# Cocción lenta\n\n"
            "La cocción del bizcocho sube despacio hasta el cono 04. #cerámica\n"
            "Después, el esmalte a cono 6. Ver [[Recetas de esmalte]].\n"
        ),
        "Proyectos/Recetas de esmalte.md": "Celadón: 2 % de óxido de hierro.\n",
        "Empty Note.md": "---\ntitle: Empty Note\n---\n",  # front matter alone: no document
        "vazio.md": "",
        "anexos/foto do forno.png": PNG_1PX,
        "anexos/orçamento.csv": "item,preço\nforno,1200\n",
        "LEIA-ME": "no suffix",
        "binário.md": b"\x89PNG\r\n\x1a\n\x00\x00 not text",
        "latin1.md": "Ação e cocção".encode("latin-1"),
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


# -- hostile PDFs, written byte by byte (issue 48, finding 10) -------------------------------------------------------


def raw_pdf(path: Path, objects: list[bytes]) -> Path:
    """A PDF of ``objects`` (object 1 the catalog), with a cross-reference table: what any reader opens."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (i, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def _stream(data: bytes) -> bytes:
    packed = zlib.compress(data, 9)
    return b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(packed), packed)


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def shared_stream_pdf(path: Path, pages: int, content: bytes) -> Path:
    """``pages`` pages that all draw one content stream ``content`` (deflated): a small file, each page of which
    costs the whole stream to read."""
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        _FONT,
        _stream(content),
        *[page] * pages,
    ]
    return raw_pdf(path, objects)


def page_tree_pdf(path: Path, pages: int, *, fanout: int = 100, count: int | None = None) -> Path:
    """A PDF of ``pages`` one-line pages in a balanced page tree; ``count``: what its root's /Count says instead
    of the truth."""
    objects: list[bytes] = [b"", _FONT, _stream(b"BT /F1 12 Tf 72 720 Td (A page of a long tree) Tj ET")]

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    page = b"<< /Type /Page /MediaBox [0 0 612 792] /Resources << /Font << /F1 2 0 R >> >> /Contents 3 0 R >>"
    level = [(add(page), 1) for _ in range(pages)]
    while len(level) > 1:
        groups = [level[i : i + fanout] for i in range(0, len(level), fanout)]
        level = []
        for group in groups:
            kids = b" ".join(b"%d 0 R" % n for n, _ in group)
            total = sum(c for _, c in group)
            level.append((add(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, total)), total))
    root, total = level[0]
    if count is not None:
        objects[root - 1] = objects[root - 1].replace(b"/Count %d" % total, b"/Count %d" % count)
    objects[0] = b"<< /Type /Catalog /Pages %d 0 R >>" % root
    return raw_pdf(path, objects)
