"""Markdown notes (Obsidian, Jekyll): YAML front matter, dated file names, ``[[wiki links]]`` and ``#tags``.

Front matter is parsed by python-frontmatter (PyYAML underneath); the text is
tokenised by markdown-it-py so that ``#tag`` and ``[[link]]`` inside code are not
counted and a ``# Heading`` is never a tag.  The text itself is kept as written:
links and tags stay searchable words, and also become ``links``/``tags`` metadata.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path
from typing import Any

import frontmatter
import yaml
from markdown_it import MarkdownIt

from ...limits import MAX_METADATA_DEPTH
from ..bounds import metadata_problem
from .base import Extracted, Unreadable, read_utf8

__all__ = ["read_markdown"]

# A file name that starts with an ISO date: 2024-03-04.md, "2024-03-04 standup.md".
_DATED_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:\b|_)")
# Obsidian: [[Target]], [[Target|alias]], [[Target#Heading]]; the target is what the note links to.
_WIKI_LINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
# Obsidian tags: '#' after a space or line start, letters/digits/_/-//, not only digits (#1 is not a tag).
_TAG = re.compile(r"(?:(?<=\s)|^)#([\w/-]*[^\W\d][\w/-]*)", re.UNICODE)


def _json_value(value: Any) -> Any:
    """YAML gives dates, datetimes and nested values; metadata is JSON, so dates become ISO strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_value(v) for v in value]
    return value


def _string_list(value: Any, sep: str = r"[,\s]+") -> list[str]:
    """``tags: a`` , ``tags: [a, "#b"]`` or ``tags: "a, b"`` all mean a set of strings."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple, set)) else re.split(sep, str(value))
    return [str(v).strip().lstrip("#") for v in items if str(v).strip().lstrip("#")]


def _prose(body: str) -> str:
    """The note's text outside code blocks and inline code, where tags and links live."""
    parts: list[str] = []
    for tok in MarkdownIt("commonmark").parse(body):
        if tok.type == "inline":
            # A line break is a break: its token has no content, and joining "#alpha" to the next line's
            # "second" made the tag #alphasecond.
            for c in tok.children or []:
                if c.type == "text":
                    parts.append(c.content)
                elif c.type in ("softbreak", "hardbreak"):
                    parts.append("\n")
            parts.append("\n")
    return "".join(parts)


def _note_date(meta: dict[str, Any], path: Path) -> str | None:
    value = meta.get("date")
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if value is not None:
        return str(value)  # validated as a date by the collection's typed field, with the document named
    m = _DATED_NAME.match(path.stem)
    if m:
        try:
            return date.fromisoformat(m.group(1)).isoformat()
        except ValueError:
            return None  # 2024-13-45.md: a name, not a date
    return None


def read_markdown(path: Path) -> Extracted:
    """Read one note: front matter into metadata, date from it or the file name, tags and links from the text."""
    raw = read_utf8(path)
    try:
        post = frontmatter.loads(raw)
    except yaml.YAMLError as exc:
        raise Unreadable(
            f"front matter is not valid YAML ({str(exc).splitlines()[0]}); fix the block between the --- lines"
        ) from None
    except RecursionError:  # the YAML parser recurses once a nesting level
        raise Unreadable(
            f"front matter is nested deeper than PyYAML can read (the limit is {MAX_METADATA_DEPTH} levels, "
            "MAX_METADATA_DEPTH); fix the block between the --- lines"
        ) from None
    if not isinstance(post.metadata, dict):
        raise Unreadable("front matter is not a YAML mapping (key: value lines); fix the block between the --- lines")
    # Before anything walks it: aliases make a small block stand for a huge or a cyclic value.
    problem = metadata_problem(post.metadata, "front matter")
    if problem is not None:
        raise Unreadable(f"{problem}; fix the block between the --- lines")
    fm: dict[str, Any] = dict(post.metadata)
    text = post.content.replace("\r\n", "\n").strip()
    title = str(fm.pop("title", "") or "")
    first = text.split("\n", 1)[0]
    if first.startswith("#") and not _TAG.match(first):
        if not title:
            title = first.lstrip("#").strip()
        text = text.split("\n", 1)[1].strip() if "\n" in text else ""
    prose = _prose(text)
    meta = {str(k): _json_value(v) for k, v in fm.items()}
    when = _note_date(fm, path)
    if when is not None:
        meta["date"] = when
    tags = sorted(set(_string_list(fm.get("tags")) + _TAG.findall(prose)))
    if tags:
        meta["tags"] = tags
    elif "tags" in meta:
        del meta["tags"]  # an empty `tags:` line is no tags, not a null the typed field must refuse
    links = sorted({m.strip() for m in _WIKI_LINK.findall(prose) if m.strip()})
    if links:
        meta["links"] = links
    if "people" in fm:
        # Names hold spaces: a string of people is split on commas only.
        meta["people"] = sorted(set(_string_list(fm["people"], sep=r"\s*,\s*")))
    return Extracted(title=title or path.stem, body=text, metadata=dict(sorted(meta.items())))
