"""A small generated corpus with a hand-labelled golden set, shared by the eval tests."""

from __future__ import annotations

import json
from pathlib import Path

from ranklock import Document

TOPICS = {
    "vaccine": ["immune response", "antibody levels", "booster dose", "side effects", "clinical trial"],
    "volcano": ["lava flow", "magma chamber", "ash cloud", "eruption forecast", "tectonic plates"],
    "chess": ["opening theory", "endgame tablebase", "grandmaster match", "knight fork", "rapid tournament"],
    "bread": ["sourdough starter", "rye flour", "oven spring", "gluten network", "proofing basket"],
    "comet": ["icy nucleus", "dust tail", "orbital period", "perihelion passage", "space probe"],
    "river": ["flood plain", "delta sediment", "water quality", "salmon migration", "dam removal"],
    "guitar": ["steel strings", "chord progression", "fret buzz", "pickup wiring", "fingerstyle picking"],
    "glacier": ["ice sheet melt", "crevasse field", "moraine ridge", "sea level rise", "calving front"],
}


def documents() -> list[Document]:
    docs = []
    for t, (topic, phrases) in enumerate(TOPICS.items()):
        for i, phrase in enumerate(phrases):
            other = phrases[(i + 1) % len(phrases)]
            docs.append(
                Document(
                    doc_id=f"{topic}-{i}",
                    title=f"{topic.title()} notes {t}.{i}",
                    body=f"A short note about the {topic}: {phrase}. It also mentions {other} in passing.",
                )
            )
    return docs


#: (query, {doc id: grade})
GOLDEN = [
    ("vaccine booster dose and antibody levels", {"vaccine-2": 2, "vaccine-1": 1}),
    ("lava and magma under a volcano", {"volcano-0": 2, "volcano-1": 2, "volcano-4": 1}),
    ("chess endgame with a knight fork", {"chess-1": 1, "chess-3": 2}),
    ("sourdough bread proofing", {"bread-0": 2, "bread-4": 1, "bread-2": 1}),
    ("comet dust tail near perihelion", {"comet-1": 2, "comet-3": 1}),
    ("salmon in the river after dam removal", {"river-3": 1, "river-4": 2}),
    ("guitar chord progression fingerstyle", {"guitar-1": 1, "guitar-4": 1, "guitar-0": 1}),
    ("melting glacier and sea level", {"glacier-0": 1, "glacier-3": 2, "volcano-4": 0}),
]


def write_golden(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i, (q, grades) in enumerate(GOLDEN, 1):
            fh.write(json.dumps({"id": f"q{i}", "query": q, "expected": grades}) + "\n")
    return path
