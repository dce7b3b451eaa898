"""A seeded tuning / held-out split of a labelled question set.

Constants of an answer rule (the extractive generator's weights, its abstention
threshold) are chosen on the **tuning** half and reported on the **held-out**
half, so a figure never describes the questions it was tuned on.

The rule (:func:`split_of`), pinned by tests/test_split.py:

1. Questions are grouped by class; each class is split on its own, so both
   halves hold every class in the same proportion.
2. Within a class the ids are sorted (byte order), then shuffled by
   ``random.Random(f"ranklock-split/{seed}/{class}")``: a string seed, which
   Python hashes with SHA-512 whatever ``PYTHONHASHSEED`` is.
3. The first ``ceil(n / 2)`` ids of the shuffle are ``tune``, the rest ``held-out``.

The seed is :data:`SPLIT_SEED`; changing it (or a class's membership) changes
the split, and a test names the held-out ids so that cannot happen silently.

    >>> from ranklock.domains.journal.questions import load_questions, shipped_questions_path
    >>> qs = load_questions(shipped_questions_path())
    >>> sorted({split_of(qs)[q.id] for q in qs})
    ['held-out', 'tune']
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ..errors import InputError

__all__ = ["SPLITS", "SPLIT_SEED", "select_split", "split_of"]

#: The seed of the split (issue 26 chose it once, before any constant was tuned).
SPLIT_SEED = 26
#: The halves, and ``all`` for the whole set.
SPLITS = ("tune", "held-out", "all")


def split_of(questions: Sequence[Any], seed: int = SPLIT_SEED) -> dict[str, str]:
    """Question id -> ``"tune"`` or ``"held-out"`` (the rule in the module docstring)."""
    by_class: dict[str, list[str]] = {}
    for q in questions:
        by_class.setdefault(str(q.cls), []).append(str(q.id))
    out: dict[str, str] = {}
    for cls in sorted(by_class):
        ids = sorted(by_class[cls], key=lambda i: i.encode("utf-8"))
        random.Random(f"ranklock-split/{seed}/{cls}").shuffle(ids)
        cut = math.ceil(len(ids) / 2)
        out.update({i: "tune" for i in ids[:cut]})
        out.update({i: "held-out" for i in ids[cut:]})
    return out


def select_split(questions: Sequence[Any], split: str, seed: int = SPLIT_SEED) -> list[Any]:
    """The questions of ``split`` (``tune``, ``held-out`` or ``all``), in their given order.

    >>> select_split([], "all")
    []
    """
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}.")
    if split == "all":
        return list(questions)
    halves = split_of(questions, seed)
    return [q for q in questions if halves[str(q.id)] == split]
