"""Counts, lists and names in messages, said as a person would: "1 entry", "3 entries", "'a', 'b' and 2 more";
a name from outside (a file name, a document id) shown so it cannot act on the terminal that prints it.

>>> plural(1, "entry"), plural(3, "query-log entry"), plural(2, "document")
('1 entry', '3 query-log entries', '2 documents')
>>> named(["a", "b", "c"], limit=2)
"'a', 'b' and 1 more"
>>> shown("notes\\x1b[2J.md")
'notes\\\\x1b[2J.md'
>>> trec_token("2024-03-04 standup.md")
'2024-03-04%20standup.md'
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["named", "plural", "shown", "shown_lines", "trec_token"]


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1, with thousands separated: ``1 entry``, ``1,200 entries``.

    English's regular rules, on the last word: ``entry`` -> ``entries``, ``index`` -> ``indexes``, else + ``s``.
    """
    if n == 1:
        return f"{n:,} {word}"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return f"{n:,} {word[:-1]}ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return f"{n:,} {word}es"
    return f"{n:,} {word}s"


def named(items: Sequence[str], limit: int = 10) -> str:
    """The first ``limit`` of ``items`` quoted, then how many more: ``'a', 'b' and 3 more``."""
    shown = ", ".join(repr(i) for i in items[:limit])
    return f"{shown} and {len(items) - limit} more" if len(items) > limit else shown


def shown(text: str, *, backslash: bool = True) -> str:
    """``text`` with every character a terminal would act on written as its escape, as Python writes it in a
    string (``\\x1b``, ``\\n``, ``\\t``, ``\\u202e``), and a backslash doubled so no name can pass for another.

    A file name holds any character but ``/`` and NUL: an escape sequence in one clears a screen or sets a
    window title, a newline forges a line of the output, U+202E turns the rest of the line around.  Every
    character :meth:`str.isprintable` refuses (controls, format characters such as the bidirectional
    overrides, separators other than the space, a lone surrogate of a name that is not UTF-8) is escaped;
    the rest, accented and CJK letters included, is shown as it is.  ``backslash=False`` leaves backslashes
    as they are: for a text of ranklock's own that quotes names (a message), not for a name.
    """
    if text.isprintable() and (not backslash or "\\" not in text):
        return text
    return "".join(c if c.isprintable() and (c != "\\" or not backslash) else _escape(c) for c in text)


def shown_lines(text: str) -> str:
    """A message of several lines, each :func:`shown` with its backslashes as they are: a name it quotes
    cannot act on the terminal, and its own line breaks stay."""
    return "\n".join(shown(line, backslash=False) for line in text.split("\n"))


def _escape(c: str) -> str:
    if c == "\\":
        return "\\\\"
    code = ord(c)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c)
    if named is not None:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def trec_token(text: str) -> str:
    """``text`` as one field of a TREC run line (``qid Q0 docid rank score tag``), which trec_eval splits on
    whitespace: every whitespace, control or other unprintable character and ``%`` itself percent-encoded as
    UTF-8, so the line keeps its six fields and the id can be decoded back (``urllib.parse.unquote``).
    """
    if text.isprintable() and not any(c.isspace() or c == "%" for c in text):
        return text
    return "".join(c if c.isprintable() and not c.isspace() and c != "%" else _percent(c) for c in text)


def _percent(c: str) -> str:
    try:
        raw = c.encode("utf-8", "surrogateescape")  # a name that is not UTF-8: its own byte back
    except UnicodeEncodeError:
        raw = c.encode("utf-8", "surrogatepass")
    return "".join(f"%{b:02X}" for b in raw)
