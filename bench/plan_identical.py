"""The planner's output, byte for byte, for every labelled request: record it, then compare.

A refactor of the planner must not change a single plan.  ``record`` writes one line per request
of every ``tests/data/plan_requests*.yaml`` (the request, ``Plan.model_dump_json()`` and
``score_entry``'s problems); ``compare`` recomputes them and lists every line that differs.

.venv/bin/python bench/plan_identical.py record bench/out/plans.jsonl
.venv/bin/python bench/plan_identical.py compare bench/out/plans.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ranklock.domains.resumes.labelled import load_labelled, score_entry

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def lines() -> list[str]:
    """One JSON line per labelled request, in file then entry order."""
    out = []
    for path in sorted(DATA.glob("plan_requests*.yaml")):
        for i, entry in enumerate(load_labelled(path)):
            plan, problems = score_entry(entry)
            row = {"file": path.name, "i": i, "plan": plan.model_dump_json(), "problems": problems}
            out.append(json.dumps(row, sort_keys=True))
    return out


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("record", "compare"):
        sys.exit("usage: plan_identical.py record|compare FILE")
    mode, target = sys.argv[1], Path(sys.argv[2])
    now = lines()
    if mode == "record":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(now) + "\n", encoding="utf-8")
        print(f"recorded {len(now)} plans to {target}")
        return
    before = target.read_text(encoding="utf-8").splitlines()
    diff = [i for i, (a, b) in enumerate(zip(before, now, strict=False)) if a != b]
    if len(before) != len(now):
        print(f"{len(before)} plans recorded, {len(now)} now")
    for i in diff[:20]:
        print(f"DIFF line {i}:\n  before {before[i]}\n  now    {now[i]}")
    print(f"{len(now) - len(diff)} of {len(now)} plans identical")
    sys.exit(1 if diff or len(before) != len(now) else 0)


if __name__ == "__main__":
    main()
