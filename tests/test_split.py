"""The seeded tuning / held-out split of the journal questions (ranklock.eval.split), pinned.

Issue 26's constants were chosen on the tuning half and its figures reported on the held-out
half; if the rule, the seed or the question set changed, these would fail and say so.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter

import pytest

from ranklock.domains.journal.questions import load_questions, shipped_questions_path
from ranklock.errors import InputError
from ranklock.eval.split import SPLIT_SEED, select_split, split_of

HELD_OUT_SHA256 = "5d7f50d0579c8716c684dedadcee71b84722cf9dfaad8314b93f7b9c602fefbf"


def held_out_digest() -> str:
    halves = split_of(load_questions(shipped_questions_path()))
    return hashlib.sha256("\n".join(sorted(i for i, h in halves.items() if h == "held-out")).encode()).hexdigest()


def test_the_split_is_pinned() -> None:
    qs = load_questions(shipped_questions_path())
    halves = split_of(qs)
    assert SPLIT_SEED == 26
    assert held_out_digest() == HELD_OUT_SHA256
    counts = Counter((q.cls, halves[q.id]) for q in qs)
    # Every class in both halves, the tuning half taking the odd one (ceil(n / 2)).
    for cls in {q.cls for q in qs}:
        n = sum(1 for q in qs if q.cls == cls)
        assert counts[(cls, "tune")] == (n + 1) // 2 and counts[(cls, "held-out")] == n // 2, cls
    assert [i for i in sorted(halves) if i.startswith("paraphrase") and halves[i] == "held-out"][:3] == [
        "paraphrase-001",
        "paraphrase-005",
        "paraphrase-006",
    ]


def test_the_split_ignores_the_hash_seed() -> None:
    code = "import sys; sys.path.insert(0, 'tests'); from test_split import held_out_digest; print(held_out_digest())"
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == HELD_OUT_SHA256


def test_select_split() -> None:
    qs = load_questions(shipped_questions_path())
    tune, held = select_split(qs, "tune"), select_split(qs, "held-out")
    assert len(tune) + len(held) == len(qs) and not {q.id for q in tune} & {q.id for q in held}
    assert select_split(qs, "all") == qs
    assert [q.id for q in tune] == [q.id for q in qs if q in tune]  # the given order is kept
    with pytest.raises(InputError) as e:
        select_split(qs, "test")
    assert str(e.value) == "unknown split 'test'; use one of tune, held-out, all."
