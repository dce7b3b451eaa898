"""Parsing a language model's reply into a :class:`~ranklock.ask.model.Draft`.

The prompt (ranklock.ask.prompt) asks for one JSON object
``{"answer": str, "citations": [{"n": int, "quote": str}]}``.  Models often
wrap it in a code fence or a sentence, so the parser reads the text from the
first ``{`` to the last ``}``; anything else is a garbage reply and raises
:class:`~ranklock.errors.GenerationError` quoting what came back.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import GenerationError
from ..model import Draft, DraftCitation, is_abstention

__all__ = ["parse_reply"]


def _garbage(source: str, content: str, why: str) -> GenerationError:
    return GenerationError(
        f"the reply of {source} is not the JSON object the prompt asks for ({why}): {content[:200]!r}; "
        "the answer was rejected. Use a model that follows instructions, or --generator extractive."
    )


def parse_reply(content: str, *, source: str) -> Draft:
    """The draft in a model's reply ``content``; ``source`` names the model in error messages.

    >>> parse_reply('{"answer": "Ana [1].", "citations": [{"n": 1, "quote": "Ana"}]}', source="m").answer
    'Ana [1].'
    """
    start, end = content.find("{"), content.rfind("}")
    if start < 0 or end < start:
        raise _garbage(source, content, "no JSON object in it")
    try:
        obj: Any = json.loads(content[start : end + 1])
    except json.JSONDecodeError as exc:
        raise _garbage(source, content, f"invalid JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise _garbage(source, content, "not an object")
    answer = obj.get("answer")
    cites = obj.get("citations", [])
    if not isinstance(answer, str) or not answer.strip():
        raise _garbage(source, content, "'answer' is missing or not a non-empty string")
    if not isinstance(cites, list):
        raise _garbage(source, content, "'citations' is not a list")
    out: list[DraftCitation] = []
    for c in cites:
        if not isinstance(c, dict) or not isinstance(c.get("quote"), str):
            raise _garbage(source, content, "a citation is not an object with 'n' and 'quote'")
        n = c.get("n")
        if isinstance(n, str) and n.strip().strip("[]").isdigit():
            n = int(n.strip().strip("[]"))
        if isinstance(n, bool) or not isinstance(n, int):
            raise _garbage(source, content, f"citation number {n!r} is not an integer")
        out.append(DraftCitation(n=n, quote=c["quote"]))
    return Draft(answer=answer.strip(), citations=tuple(out), abstained=is_abstention(answer), raw=content)
