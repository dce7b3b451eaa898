"""Text normalisation and content hashing.

The policy is explicit and recorded in every manifest: Unicode NFKC, line
endings folded to ``\\n``, trailing whitespace stripped.  A document version
is identified by the sha256 of its normalised content (title, body and
metadata, canonically serialised), so the same document always hashes the
same and any change, metadata included, makes a new version.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from typing import Any

__all__ = ["NORMALIZATION", "canonical_json", "content_hash", "normalize", "text_sha256", "unstorable"]

NORMALIZATION = "NFKC; CRLF/CR -> LF; strip"


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def content_hash(title: str, body: str, metadata: dict[str, Any]) -> str:
    payload = canonical_json({"title": title, "body": body, "metadata": metadata})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return f"a NUL character (\\u0000) at position {text.index(chr(0))}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate {text[exc.start]!r} at position {exc.start} (not valid Unicode text)"
    return None


def unstorable(value: Any, where: str = "") -> str | None:
    """Describe the first part of ``value`` PostgreSQL cannot store, or None when all of it can.

    Text must be valid Unicode without NUL characters; numbers must be
    finite.  Dict keys and nested lists are checked too, and the description
    names where the problem is: ``unstorable({"tags": ["ok", "a" + chr(0)]})`` is
    ``"tags[1] holds a NUL character (\\u0000) at position 1"``.
    """
    if isinstance(value, str):
        problem = _text_problem(value)
        return None if problem is None else f"{where or 'the text'} holds {problem}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'a value'} is {value!r}, not a finite number"
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            problem = _text_problem(str(key))
            if problem is not None:
                return f"the key {key!r}{' in ' + where if where else ''} holds {problem}"
            found = unstorable(item, name)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = unstorable(item, f"{where}[{i}]")
            if found is not None:
                return found
    return None
