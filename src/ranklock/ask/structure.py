"""A passage's structure as a person reads it: the units no quote crosses, and what each is about.

extractive-v6 quotes spans inside one *unit*: a Markdown list item, a table cell, a paragraph,
a heading (never quoted), a line of links (never quoted).  A note is written in these units; a
span running from one bullet into the next quotes the second bullet as if it supported the
first ("Bought in 2022.\\n- **boreal**: ..." answering when *boreal* was bought).  The rule,
pinned (its version and lists are hashed into :data:`RULES_SHA256`, which v6's checksum holds):

1. **Form.**  A passage is read as Markdown (notes, plain text, JSON records), unless its
   document came from an HTML page (``.html``, ``.htm``: the loader writes one block a line,
   headings as bare lines) or a Word document (``.docx``: one paragraph a blank-line block,
   table rows as cells joined by ``" | "``): :func:`form_of`.  A note's title, which the
   chunker puts first, is no unit.
2. **Lines.**  Markdown, line by line: a blank line ends every open unit; ``#``-``######``
   lines, and a paragraph line underlined by ``===`` or ``---``, are *headings*; ``-``, ``*``,
   ``+``, ``•`` or ``1.``/``1)`` start a *list item* (a task box ``[ ]``/``[x]`` after the
   marker is no text); a line holding ``|`` beside a ``|---|`` delimiter line is a *table*
   row, whose cells are units (the row before the delimiter holds the column headers);
   fenced code is one unit; ``>`` quotes are paragraphs.  A non-blank line after an item
   continues it (a lazy continuation, or an indented one after a blank line); other lines
   join into a *paragraph*, where a single line break is a soft break, a space.
3. **Link lines.**  A line holding a link (``[[wiki link]]``, ``[text](url)``, a URL) and at most
   :data:`LINK_LINE_WORDS` other words ("See also [[Server inventory]].") is a unit of its
   own and never quoted: it points elsewhere and says nothing; so is a line of ``#tags``.
4. **What a unit is about** (its *context*, read with it but never quoted): the headings above
   it (the nearest of each level), a paragraph ending in ``:`` right before a list (its
   *lead*: "Attendees:"), the item a nested item hangs from, a cell's row head (the row's
   first cell) and column header, and the unit's *label*: its first words up to a colon
   (at most :data:`LABEL_WORDS` words: "**kestrel**:", "Router:", "Monday:").
5. **HTML** text is the same but every line is its own block, and a line of at most
   :data:`HEADING_WORDS` words ending in no punctuation, before another line, is a heading
   (the loader drops ``<h2>``'s markers).  **DOCX** text: blocks are paragraphs, a line with
   ``" | "`` is a table row whose first cell is each cell's row head, and a short line as in
   HTML is a heading.
6. **As a person reads it** (:func:`reading`): list markers, emphasis (``**``, ``__``, ``*``,
   ``_``, backticks), and link syntax (``[[target|alias]]`` is *alias*, ``[text](url)`` is
   *text*) are dropped and every run of white space, line breaks included, is one space.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

__all__ = ["FORMS", "LABEL_WORDS", "LINK_LINE_WORDS", "RULES_SHA256", "Unit", "form_of", "reading", "units"]

#: The ways a passage's text is laid out, by where its document came from (rule 1).
FORMS = {".html": "html", ".htm": "html", ".docx": "docx"}
#: Rule 3: the words besides its links that a line of links may hold ("See also", "Related:", "Ver também").
LINK_LINE_WORDS = 3
#: Rule 4: the longest label (words before a colon at the start of a unit).
LABEL_WORDS = 5
#: Rule 5: the longest bare line an HTML or DOCX text heading may be.
HEADING_WORDS = 8

RULES_SHA256 = hashlib.sha256(
    json.dumps(
        {
            "version": "ranklock-structure/1",
            "forms": FORMS,
            "link_line_words": LINK_LINE_WORDS,
            "label_words": LABEL_WORDS,
            "heading_words": HEADING_WORDS,
        },
        sort_keys=True,
    ).encode("utf-8")
).hexdigest()

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+|$)")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_ITEM = re.compile(r"^([ \t]*)([-*+•]|\d{1,9}[.)])(?:[ \t]+(\[[ xX]\][ \t]+)?|$)")
_DELIMITER = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_QUOTE = re.compile(r"^[ \t]*>[ \t]?")
_LINK = re.compile(r"\[\[[^\[\]\n]+\]\]|\[[^\[\]\n]*\]\([^()\n]*\)|https?://\S+|(?:(?<=\s)|^)#[^\W\d][\w/-]*")
_WORD = re.compile(r"[^\W_]+")
_LABEL = re.compile(r"[ \t]*(?:\*\*|__)?([^:\n]{1,80}?)(?:\*\*|__)?[ \t]*:(?=\s)")
_END_PUNCT = re.compile(r"[.!?:;,…]\s*$")
_WIKI = re.compile(r"\[\[([^\[\]|#\n]*)(?:#[^\[\]|\n]*)?(?:\|([^\[\]\n]*))?\]\]")
_MD_LINK = re.compile(r"\[([^\[\]\n]*)\]\([^()\n]*\)")
_EMPHASIS = re.compile(r"\*\*|__|`|(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])|(?<!\w)_(?=\S)|(?<=\S)_(?!\w)")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Unit:
    """One unit of a passage: its text is ``text[start:end]`` (markers left out); ``context`` says what it is about."""

    start: int
    end: int
    #: title, heading, item, cell, header, paragraph, code, links.
    kind: str
    #: (start, end) of each text that says what the unit is about (rule 4), in reading order.
    context: tuple[tuple[int, int], ...] = field(default=())
    #: (start, end) of the headings it stands under, outermost first: its section.
    section: tuple[tuple[int, int], ...] = field(default=())
    #: (start, end) of its label (rule 4), if it has one.
    label: tuple[int, int] | None = None

    @property
    def quotable(self) -> bool:
        return self.kind in ("item", "cell", "paragraph", "code")


def form_of(doc_id: str) -> str:
    """``markdown``, ``html`` or ``docx``: how the text of document ``doc_id`` is laid out (rule 1)."""
    dot = doc_id.rfind(".")
    return FORMS.get(doc_id[dot:].lower(), "markdown") if dot >= 0 else "markdown"


def reading(text: str) -> str:
    """``text`` as a person reads it (rule 6): markup dropped, white space one space.

    >>> reading("**kestrel**: Intel NUC,\\n  bought in 2021. See [[Backups|the backups]].")
    'kestrel: Intel NUC, bought in 2021. See the backups.'
    """
    out = _WIKI.sub(lambda m: m.group(2) or m.group(1), text)
    out = _MD_LINK.sub(lambda m: m.group(1), out)
    out = _EMPHASIS.sub("", out)
    return _SPACE.sub(" ", out).strip()


def _link_line(line: str) -> bool:
    """Rule 3: a line of links (or tags) with at most LINK_LINE_WORDS other words."""
    if not _LINK.search(line):
        return False
    return len(_WORD.findall(_LINK.sub(" ", line))) <= LINK_LINE_WORDS


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _label(text: str, a: int, b: int) -> tuple[int, int] | None:
    """Rule 4: the unit's label, its first words up to a colon (at most LABEL_WORDS of them), or None."""
    m = _LABEL.match(text, a, b)
    if m is None or not 1 <= len(_WORD.findall(m.group(1))) <= LABEL_WORDS or "](" in m.group(1):
        return None
    return a, m.end()


def _cells(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """The cells of the table row ``text[a:b]``, trimmed, outer pipes left out (empty cells kept, so columns align)."""
    line = text[a:b]
    bars = [i for i, ch in enumerate(line) if ch == "|" and (i == 0 or line[i - 1] != "\\")]
    lo, hi = 0, len(line)
    if bars and not line[: bars[0]].strip():
        lo = bars.pop(0) + 1
    if bars and not line[bars[-1] + 1 :].strip():
        hi = bars.pop()
    edges = [lo - 1, *bars, hi]
    return [_trim(text, a + edges[k] + 1, a + edges[k + 1]) for k in range(len(edges) - 1)]


class _Reader:
    """Rules 2 to 5 over one passage: the units, in order."""

    def __init__(self, text: str, start: int, form: str) -> None:
        self.text = text
        self.form = form
        self.out: list[Unit] = []
        self.headings: dict[int, tuple[int, int]] = {}  # level -> the nearest heading of that level
        self.para: list[tuple[int, int]] = []  # the open paragraph's lines
        self.last_para: tuple[int, int] | None = None  # the paragraph just closed, if nothing came after it
        self.items: list[tuple[int, Unit]] = []  # the open list's items (indent, unit), outermost first
        self.item_lines: list[tuple[int, int]] = []  # the open item's lines
        self.item_col = 0  # where the open list's innermost item's text begins
        self.lead: tuple[int, int] | None = None  # the open list's lead
        self.table: list[tuple[int, int]] | None = None  # the open table's header cells (None: no table)
        self.lines = []
        pos = start
        for line in text[start:].split("\n"):
            self.lines.append((pos, pos + len(line)))
            pos += len(line) + 1

    def add(self, a: int, b: int, kind: str, extra: tuple[tuple[int, int], ...] = ()) -> Unit | None:
        a, b = _trim(self.text, a, b)
        if a >= b:
            return None
        section = tuple(self.headings[k] for k in sorted(self.headings))
        context = section + extra
        label = _label(self.text, a, b) if kind in ("item", "paragraph") else None
        if label is not None and label[1] < b:
            context += (label,)
        else:
            label = None
        unit = Unit(a, b, kind, context, section, label)
        self.out.append(unit)
        self.last_para = None
        return unit

    def close_paragraph(self) -> None:
        if self.para:
            a, b = self.para[0][0], self.para[-1][1]
            self.para = []
            unit = self.add(a, b, "paragraph")
            self.last_para = (unit.start, unit.end) if unit else None

    def close_item(self) -> None:
        if not self.item_lines:
            return
        a, b = self.item_lines[0][0], self.item_lines[-1][1]
        self.item_lines = []
        indent = self.items[-1][0]
        parent = [(u.start, u.end) for i, u in self.items[:-1] if i < indent and u.start < u.end][-1:]
        unit = self.add(a, b, "item", ((self.lead,) if self.lead else ()) + tuple(parent))
        if unit is not None:
            self.items[-1] = (indent, unit)

    def close_all(self) -> None:
        self.close_paragraph()
        self.close_item()
        self.items = []
        self.lead = None
        self.table = None

    def heading(self, a: int, b: int, level: int) -> None:
        self.close_all()
        a, b = _trim(self.text, a, b)
        if a < b:
            self.out.append(Unit(a, b, "heading", tuple(self.headings[k] for k in sorted(self.headings) if k < level)))
            self.headings = {k: v for k, v in self.headings.items() if k < level} | {level: (a, b)}
        self.last_para = None

    def row(self, cells: list[tuple[int, int]], header: bool) -> None:
        heads = self.table or []
        for k, (ca, cb) in enumerate(cells):
            if header:
                if ca < cb:
                    self.out.append(Unit(ca, cb, "header"))
                continue
            extra = [
                x for x in ((cells[0] if k else None), (heads[k] if k < len(heads) else None)) if x and x[0] < x[1]
            ]
            self.add(ca, cb, "cell", tuple(extra))
        if header:
            self.table = cells

    def docx_cells(self, a: int, b: int) -> list[tuple[int, int]]:
        out, pos = [], a
        for part in self.text[a:b].split(" | "):
            out.append(_trim(self.text, pos, pos + len(part)))
            pos += len(part) + 3
        return out

    def bare_heading(self, a: int, b: int, nxt: str) -> bool:
        """Rule 5: a short line without end punctuation, before another line, reads as a heading."""
        line = self.text[a:b].strip()
        return bool(nxt.strip()) and 0 < len(_WORD.findall(line)) <= HEADING_WORDS and not _END_PUNCT.search(line)

    def item(self, a: int, b: int, m: re.Match[str]) -> None:
        self.close_item()
        if not self.items:
            self.close_paragraph()
            self.lead = self.last_para if self.last_para and self.text[: self.last_para[1]].endswith(":") else None
        indent = len(m.group(1).expandtabs(4))
        self.items = [(i, u) for i, u in self.items if i < indent] + [(indent, Unit(a, a, "item"))]
        self.item_col = m.end()
        if _link_line(self.text[a + m.end() : b]):
            self.add(a + m.end(), b, "links")
        else:
            self.item_lines = [(a + m.end(), b)]

    def read(self) -> list[Unit]:
        text, lines = self.text, self.lines
        blank = False  # a blank line came before this one
        fence: int | None = None  # where the open code block's text begins
        k = 0
        while k < len(lines):
            a, b = lines[k]
            line = text[a:b]
            nxt = text[lines[k + 1][0] : lines[k + 1][1]] if k + 1 < len(lines) else ""
            if self.form != "markdown":  # a block a line (html) or a blank-line block (docx): the next block
                nxt = next((text[x:y] for x, y in lines[k + 1 :] if text[x:y].strip()), "")
            k += 1
            if fence is not None:
                if _FENCE.match(line):
                    self.add(fence, a, "code")
                    fence = None
                continue
            if not line.strip():
                self.close_paragraph()
                self.close_item()
                self.table = None
                blank = True
                continue
            after_blank, blank = blank, False
            if _FENCE.match(line):
                self.close_all()
                fence = b + 1
                continue
            if self.form == "markdown" and (m := _ATX.match(line)):
                self.heading(a + m.end(), b, len(m.group(1)))
                continue
            if self.table is not None and ("|" in line if self.form != "docx" else " | " in line):
                self.row(_cells(text, a, b) if self.form != "docx" else self.docx_cells(a, b), header=False)
                continue
            if self.form == "docx" and " | " in line:
                self.close_all()
                self.table = []
                self.row(self.docx_cells(a, b), header=False)
                continue
            if self.form != "docx" and "|" in line and "-" in nxt and _DELIMITER.match(nxt):
                self.close_all()
                self.row(_cells(text, a, b), header=True)
                k += 1  # the delimiter line
                continue
            if self.form == "markdown" and self.para and (m := _SETEXT.match(line)):
                pa, pb = self.para[0][0], self.para[-1][1]
                self.para = []
                self.heading(pa, pb, 1 if m.group(1)[0] == "=" else 2)
                continue
            if _BREAK.match(line):
                self.close_all()
                continue
            if m := _ITEM.match(line):
                self.item(a, b, m)
                continue
            if _link_line(line):
                self.close_paragraph()
                self.close_item()
                self.add(a, b, "links")
                continue
            indent = len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())
            if self.item_lines and not after_blank and self.form == "markdown":
                self.item_lines.append((a, b))  # a lazy continuation of the item
                continue
            if self.items and after_blank and indent >= self.item_col:
                # A second paragraph of the last item: a unit of its own, about that item.
                last = self.items[-1][1]
                self.add(a, b, "item", ((self.lead,) if self.lead else ()) + ((last.start, last.end),))
                continue
            if self.items:
                self.close_all()
            q = _QUOTE.match(line)
            start = a + q.end() if q else a
            if self.form == "markdown":
                self.para.append((start, b))
                continue
            self.close_paragraph()
            if self.bare_heading(start, b, nxt):
                self.heading(start, b, 2)
            else:
                self.para = [(start, b)]
                self.close_paragraph()
        if fence is not None:
            self.add(fence, len(text), "code")
        self.close_all()
        return self.out


def units(text: str, title_end: int = 0, form: str = "markdown") -> list[Unit]:
    """The units of a passage ``text`` whose title ends at ``title_end`` (0: none), read as ``form`` (rules 1-5).

    >>> [(u.kind, text[u.start:u.end]) for u in units(text := "- a: one.\\n- b: two.\\nSee also [[x]]")]
    [('item', 'a: one.'), ('item', 'b: two.'), ('links', 'See also [[x]]')]
    """
    return _Reader(text, title_end, form).read()
