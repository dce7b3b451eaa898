"""Issue 49, held: a default search is at most four network waits, and nothing calls back up into the facade.

The counts are the benchmarks' own (bench/round_trips.py: psycopg's waits on the socket, a pipeline's
statements counted once; bench/walk.py: every cross-module call while one search runs), run here as
a user runs them, on the bundled examples corpus in a home of their own.  A change that adds a round
trip to a search, or makes a stage call ``Engine.search`` again, fails here rather than in the next
benchmark run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The issue's bound: one round trip (whatever travels in it) is one wait; a default search may take four.
MAX_WAITS = 4


@pytest.fixture(scope="module")
def bench_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("round-trips") / "home"
    yield home
    from ranklock.store.server import EmbeddedServer

    EmbeddedServer(home).stop()


def _bench(script: str, home: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "RANKLOCK_EMBED_SERVICE": "0"}
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--home", str(home), "--out", str(out)],
        check=True,
        capture_output=True,
        env=env,
        timeout=600,
    )
    cases: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))["cases"]
    return cases


@pytest.mark.slow
def test_a_default_search_waits_on_the_network_at_most_four_times(bench_home: Path, tmp_path: Path) -> None:
    cases = _bench("round_trips.py", bench_home, tmp_path / "round_trips.json")
    for name in ("lexical", "hybrid", "hybrid, filter", "hybrid, offset", "hybrid, rerank"):
        assert cases[name]["waits"] <= MAX_WAITS, (name, cases[name])
        # offset and rerank are stages of the one pipeline: Engine.search is entered once.
        assert cases[name]["searches"] == 1, (name, cases[name])
    # A text this process never saw costs its probe and vector read, in the same first round trip.
    assert cases["hybrid, unseen text"]["waits"] <= MAX_WAITS, cases["hybrid, unseen text"]


@pytest.mark.slow
def test_no_stage_of_a_search_calls_back_up_into_the_facade(bench_home: Path, tmp_path: Path) -> None:
    cases = _bench("walk.py", bench_home, tmp_path / "walk.json")
    assert set(cases) == {"lexical", "hybrid", "hybrid, filter", "hybrid, offset"}
    for name, row in cases.items():
        assert row["into_facade"] == [], (name, row["into_facade"])
        # The facade is entered once, by the caller: the search itself never re-enters it.
        assert row["entered"]["engine"] == 1, (name, row["entered"])
