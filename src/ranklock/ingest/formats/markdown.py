"""Markdown notes (Obsidian, Jekyll): YAML front matter, dated file names, ``[[wiki links]]`` and ``#tags``.

Front matter is parsed by python-frontmatter (PyYAML underneath); the text is
tokenised by markdown-it-py so that ``#tag`` and ``[[link]]`` inside code are not
counted and a ``# Heading`` is never a tag.  The text itself is kept as written:
links and tags stay searchable words, and also become ``links``/``tags`` metadata.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import JSONHandler, YAMLHandler
from markdown_it import MarkdownIt

from ...limits import MAX_METADATA_DEPTH
from ..bounds import metadata_problem
from .base import Extracted, OpenedFile, Unreadable, read_utf8

__all__ = ["read_markdown"]

# A file name that starts with an ISO date: 2024-03-04.md, "2024-03-04 standup.md".
_DATED_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:\b|_)")
# Obsidian: [[Target]], [[Target|alias]], [[Target#Heading]]; the target is what the note links to.
_WIKI_LINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
# Obsidian tags: '#' after a space or line start, letters/digits/_/-//, not only digits (#1 is not a tag).
_TAG = re.compile(r"(?:(?<=\s)|^)#([\w/-]*[^\W\d][\w/-]*)", re.UNICODE)


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships without type hints
    """PyYAML's safe loader, with the values YAML reads but Python refuses named where they are written.

    A date that does not exist (``2024-02-30``, year ``0000``, ``25:61``) is a ``ValueError`` in
    :mod:`datetime`, and an integer of more digits than Python converts one in :func:`int`; PyYAML lets
    both escape as they are, with no line.  Here they are YAML errors at their line, so the file is named
    as unreadable with the value and the fix, and the files beside it are read.
    """


def _checked(what: str, fix: str) -> Callable[[yaml.SafeLoader, yaml.Node], Any]:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        base = yaml.SafeLoader.yaml_constructors[node.tag]
        try:
            return base(loader, node)
        except (ValueError, OverflowError) as exc:
            text = str(node.value)
            value = repr(text) if len(text) <= 40 else f"{text[:20]!r}… ({len(text):,} characters)"
            # Python's own words, without its advice to a programmer (sys.set_int_max_str_digits).
            why = str(exc).split(";")[0].split(": value has")[0]
            raise yaml.constructor.ConstructorError(
                None, None, f"{value} is not {what} ({why}); {fix}", node.start_mark
            ) from None

    return construct


_QUOTE = "quote it to keep it as text"
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _checked("a date or time that exists", f"fix it, or {_QUOTE}"))
_Loader.add_constructor("tag:yaml.org,2002:int", _checked("an integer Python reads", _QUOTE))
_Loader.add_constructor("tag:yaml.org,2002:float", _checked("a number Python reads", _QUOTE))


class _YAML(YAMLHandler):
    """python-frontmatter's YAML front matter, read with :class:`_Loader`."""

    def load(self, fm: str, **_kwargs: object) -> Any:
        return yaml.load(fm, Loader=_Loader)  # _Loader is PyYAML's SafeLoader, with checked constructors


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _JSON(JSONHandler):
    """python-frontmatter's JSON front matter (a note that opens with ``{``), read strictly: no NaN."""

    def load(self, fm: str, **_kwargs: object) -> Any:
        return json.loads(fm, parse_constant=_no_constant)


def _json_value(value: Any) -> Any:
    """YAML gives dates, datetimes and nested values; metadata is JSON, so dates become ISO strings.

    What JSON cannot hold is refused (:class:`Unreadable`): bytes (``!!binary``), NaN and infinities.
    """
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        items = sorted(value, key=repr) if isinstance(value, set) else value  # a set has no order of its own
        return [_json_value(v) for v in items]
    if isinstance(value, bytes):
        raise Unreadable("front matter holds binary data (a !!binary value), which metadata cannot store; remove it")
    if isinstance(value, float) and not math.isfinite(value):
        raise Unreadable(
            f"front matter holds the number {value!r}, which metadata (JSON) cannot store; write a finite number, or "
            "quote it to keep it as text"
        )
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


def _front_matter(raw: str) -> tuple[Any, str]:
    """The note's front matter (YAML, or JSON when it opens with ``{``) and its text; :class:`Unreadable` says
    what in the front matter cannot be read, and on which line of the file."""
    # As python-frontmatter's own parse, with the stricter handlers above.
    text = raw.strip()
    handler = frontmatter.detect_format(text, [_YAML(), _JSON()])
    if handler is None:
        return {}, text
    try:
        fm, content = handler.split(text)
    except ValueError:  # an opening line and no closing one: no front matter
        return {}, text
    try:
        data = handler.load(fm)
        return ({} if data is None else data), content.strip()
    except yaml.constructor.ConstructorError as exc:
        # python-frontmatter reads the stripped text, whose first line is the opening --- line.
        where = ""
        if exc.problem_mark is not None:
            where = f", line {exc.problem_mark.line + 1 + raw[: len(raw) - len(raw.lstrip())].count(chr(10))}"
        raise Unreadable(f"front matter{where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise Unreadable(
            f"front matter is not valid YAML ({str(exc).splitlines()[0]}); fix the block between the --- lines"
        ) from None
    except RecursionError:  # the YAML and JSON parsers recurse once a nesting level
        raise Unreadable(
            f"front matter is nested deeper than PyYAML can read (the limit is {MAX_METADATA_DEPTH} levels, "
            "MAX_METADATA_DEPTH); fix the block between the --- lines"
        ) from None
    except ValueError as exc:  # JSON front matter
        raise Unreadable(f"front matter is not valid JSON ({exc}); fix the block between the {{ and }} lines") from None


def read_markdown(src: OpenedFile) -> Extracted:
    """Read one note: front matter into metadata, date from it or the file name, tags and links from the text."""
    path = src.path
    metadata, content = _front_matter(read_utf8(src))
    if not isinstance(metadata, dict):
        raise Unreadable("front matter is not a YAML mapping (key: value lines); fix the block between the --- lines")
    # Before anything walks it: aliases make a small block stand for a huge or a cyclic value.
    problem = metadata_problem(metadata, "front matter")
    if problem is not None:
        raise Unreadable(f"{problem}; fix the block between the --- lines")
    fm: dict[str, Any] = dict(metadata)
    text = content.replace("\r\n", "\n").strip()
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
