"""Planner accuracy on the labelled request set: outcome accuracy, exact-plan accuracy, and partition.

"partitioned" counts the requests (refusals aside: they carry no parts) whose plan's parts hold
every content word of the request exactly once (ranklock.plan.partition).

.venv/bin/python bench/plan_accuracy.py [tests/data/plan_requests.yaml] [--json out.json]
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

from ranklock.domains.resumes.labelled import load_labelled, score_entry
from ranklock.plan.partition import uncovered


def main() -> None:
    args = sys.argv[1:]
    out = None
    if "--json" in args:
        i = args.index("--json")
        out = args[i + 1]
        del args[i : i + 2]
    path = Path(args[0] if args else "tests/data/plan_requests.yaml")
    entries = load_labelled(path)
    by_kind: Counter[str] = Counter()
    kind_ok: Counter[str] = Counter()
    exact_ok: Counter[str] = Counter()
    failures = []
    partitioned = with_parts = 0
    t0 = time.perf_counter()
    for e in entries:
        plan, problems = score_entry(e)
        by_kind[e["kind"]] += 1
        kind_ok[e["kind"]] += plan.kind == e["kind"]
        exact_ok[e["kind"]] += not problems
        if plan.kind != "refusal":
            with_parts += 1
            gaps = uncovered(e["request"], [p.phrase for p in plan.parts])
            partitioned += not gaps
            if gaps:
                problems = [*problems, f"parts do not partition the request: {' '.join(gaps)}"]
        if problems:
            failures.append({"request": e["request"], "problems": problems})
    ms = (time.perf_counter() - t0) * 1000 / max(len(entries), 1)
    print(f"{'outcome':<24}{'n':>4}{'kind ok':>10}{'exact ok':>10}")
    for k in sorted(by_kind):
        print(f"{k:<24}{by_kind[k]:>4}{kind_ok[k]:>10}{exact_ok[k]:>10}")
    n = sum(by_kind.values())
    print(f"{'all':<24}{n:>4}{sum(kind_ok.values()):>10}{sum(exact_ok.values()):>10}")
    print(
        f"outcome accuracy {sum(kind_ok.values()) / n:.3f}, exact-plan accuracy {sum(exact_ok.values()) / n:.3f}, "
        f"{ms:.2f} ms per request"
    )
    print(f"partitioned: {partitioned} of {with_parts} non-refusal plans")
    for f in failures:
        print(f"FAIL {f['request']!r}: {'; '.join(f['problems'])}")
    if out:
        Path(out).write_text(
            json.dumps(
                {
                    "n": n,
                    "by_kind": by_kind,
                    "kind_ok": kind_ok,
                    "exact_ok": exact_ok,
                    "ms_per_request": ms,
                    "partitioned": partitioned,
                    "non_refusal": with_parts,
                    "failures": failures,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
