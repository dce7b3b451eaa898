"""Word documents (.docx) through python-docx: paragraphs and table cells, in document order."""

from __future__ import annotations

import zipfile
from typing import Any

from .base import Extracted, OpenedFile, Unreadable, check_zip, require

__all__ = ["read_docx"]


def _blocks(doc: Any) -> list[str]:
    """Paragraph and table text in the order they appear (resumes often put skills in a table)."""
    out: list[str] = []
    for block in doc.iter_inner_content():
        if hasattr(block, "rows"):
            for row in block.rows:
                cells: list[str] = []
                for cell in row.cells:
                    t = cell.text.strip()
                    if t and (not cells or cells[-1] != t):  # merged cells repeat their text
                        cells.append(t)
                if cells:
                    out.append(" | ".join(cells))
        elif block.text.strip():
            out.append(block.text.strip())
    return out


def read_docx(src: OpenedFile) -> Extracted:
    """The document's text; a file that is not a valid .docx (zip of WordprocessingML) is :class:`Unreadable`."""
    docx = require("docx", "docx")
    if not zipfile.is_zipfile(src.stream()):
        raise Unreadable(
            "not a .docx package (not a valid zip archive: truncated, or another format renamed .docx); "
            "open and re-save it in Word or LibreOffice"
        )
    check_zip(src, ".docx")  # before python-docx inflates a part
    try:
        doc = docx.Document(src.stream())
    except Exception as exc:  # python-docx raises zipfile, KeyError, lxml and its own errors for broken files
        raise Unreadable(
            f"not a readable .docx ({type(exc).__name__}: {exc}); open and re-save it in Word or LibreOffice"
        ) from None
    text = "\n\n".join(_blocks(doc))
    if not text.strip():
        raise Unreadable("the document holds no text; check that it is not only images")
    props = doc.core_properties
    meta: dict[str, Any] = {}
    if props.author:
        meta["author"] = props.author.strip()
    return Extracted(title=(props.title or "").strip() or src.path.stem, body=text, metadata=meta)
