"""PDF with a text layer, through pypdf (pure Python; chosen over pdfminer.six in docs/integrations.md)."""

from __future__ import annotations

from pathlib import Path

from ...phrasing import plural
from .base import Extracted, Unreadable, require

__all__ = ["read_pdf"]


def read_pdf(path: Path) -> Extracted:
    """The text of every page; an encrypted PDF or one without a text layer is :class:`Unreadable`."""
    pypdf = require("pypdf", "pdf")
    try:
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted:
            raise Unreadable("encrypted PDF (password protected); decrypt it (e.g. qpdf --decrypt) and ingest again")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        info = reader.metadata
    except Unreadable:
        raise
    except Exception as exc:  # pypdf raises many types for damaged files; each one means the same here
        raise Unreadable(f"not a readable PDF ({type(exc).__name__}: {exc}); re-export it from its source") from None
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise Unreadable(
            f"no text layer in {plural(len(pages), 'page')} (a scanned or image-only PDF); run OCR on it "
            "(e.g. ocrmypdf) and ingest the result"
        )
    title = str(info.title).strip() if info is not None and info.title else ""
    meta: dict[str, object] = {"pages": len(pages)}
    if info is not None and info.author:
        meta["author"] = str(info.author).strip()
    return Extracted(title=title or path.stem, body=text, metadata=meta)
