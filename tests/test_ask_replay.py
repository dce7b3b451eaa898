"""Every frozen extractive reader answers its captured requests as it did when it froze, byte for byte.

A reader version is frozen as a whole by its captured answers, not by a checksum of its code
(docs/ask.md, "Frozen as a whole", says why): tests/ask_replay.py describes the captured requests
and the stand-in embedder.  A failure here means a change to shared code (terms, segmentation,
answer types, the abstention text, the structure rules) changed what an old reader answers, so its
logged answers would no longer replay; give the new behaviour to a new version instead.
"""

from __future__ import annotations

import json

import pytest

from ask_replay import SETS, answers_path, read_requests, replay
from ranklock.ask.generators import NAMES, resolve_generator

#: Each extractive generator name, by the rule version it runs.
EXTRACTIVE = {resolve_generator(n).info().model: n for n in NAMES if n.startswith("extractive")}


@pytest.fixture(scope="module")
def requests() -> dict[str, list]:  # type: ignore[type-arg]
    return {prefix: read_requests(path) for prefix, path in SETS.items()}


@pytest.mark.parametrize("prefix", sorted(SETS))
def test_every_extractive_version_has_captured_answers(prefix: str) -> None:
    found = answers_path("x", prefix).parent.glob(f"{prefix}-*.jsonl")
    assert sorted(EXTRACTIVE) == sorted(p.stem.removeprefix(f"{prefix}-") for p in found)


@pytest.mark.parametrize("prefix", sorted(SETS))
@pytest.mark.parametrize("version", sorted(EXTRACTIVE))
def test_a_frozen_reader_answers_as_captured(version: str, prefix: str, requests: dict) -> None:  # type: ignore[type-arg]
    captured = answers_path(version, prefix).read_text(encoding="utf-8").splitlines()
    asked = requests[prefix]
    again = replay(EXTRACTIVE[version], asked)
    assert len(again) == len(captured) == len(asked) + 1
    assert again[0] == captured[0], "the generator record (name, rule version, checksum, params) changed"
    differ = [json.loads(b)["request"] for a, b in zip(again[1:], captured[1:], strict=True) if a != b]
    assert not differ, f"{len(differ)} of {len(asked)} captured answers of {version} changed: {differ[:10]}"
