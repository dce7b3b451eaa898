"""HTML pages with the boilerplate (navigation, footers, cookie banners) removed, through trafilatura."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from .base import Extracted, OpenedFile, Unreadable, read_utf8, require, without_title_line

__all__ = ["read_html"]


def read_html(src: OpenedFile) -> Extracted:
    """The page's main text and title; a page with no main text is :class:`Unreadable`."""
    trafilatura = require("trafilatura", "html")
    raw = read_utf8(src, markup=True)
    text = trafilatura.extract(raw, include_comments=False, include_tables=True, favor_precision=True)
    meta_obj = trafilatura.extract_metadata(raw)
    meta: dict[str, Any] = {}
    title = ""
    if meta_obj is not None:
        # No date: trafilatura's is a guess (a footer's "Copyright 2026" becomes 2026-01-01), and a
        # guessed date in a typed field would silently filter wrong.  The author is what the page says.
        title = (meta_obj.title or "").strip()
        if meta_obj.author:
            meta["author"] = str(meta_obj.author)
    # A navigation or index page comes back as its heading alone ("Home"), or, with nothing else on the
    # page, as its menu ("Home About"): that is no main text either.
    body = without_title_line(title, text or "").strip()
    if not body or not _text_outside_navigation(raw):
        raise Unreadable(
            "no main text found (only navigation, boilerplate or a heading); check the page has an article body"
        )
    return Extracted(title=title or src.path.stem, body=body, metadata=meta)


class _OutsideNavigation(HTMLParser):
    """Collects the page's text outside its navigation, header, footer, asides, forms and head."""

    SKIPPED = frozenset({"head", "nav", "header", "footer", "aside", "menu", "form", "script", "style", "noscript"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inside = 0
        self.found = False

    def handle_starttag(self, tag: str, _attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIPPED:
            self.inside += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED and self.inside:
            self.inside -= 1

    def handle_data(self, data: str) -> None:
        if not self.inside and data.strip():
            self.found = True


def _text_outside_navigation(raw: str) -> bool:
    parser = _OutsideNavigation()
    parser.feed(raw)
    parser.close()
    return parser.found
