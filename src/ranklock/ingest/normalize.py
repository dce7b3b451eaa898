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
import unicodedata
from typing import Any

__all__ = ["NORMALIZATION", "canonical_json", "content_hash", "normalize", "text_sha256"]

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
