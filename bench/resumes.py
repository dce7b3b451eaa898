"""Structured search on synthetic resumes: hard-constraint safety, completeness, name-blindness, latency.

Builds two collections from the same ``--count`` generated resumes, the second with names, e-mails,
phones, links and photos permuted across candidates, then runs ``--requests`` generated requests:

* violations: returned candidates that break a hard constraint (checked in Python against metadata);
* completeness: with k above the matching count, the share of qualifying candidates returned;
* name-swap: requests whose hits (ids, ranks, scores, chunks, tie groups) differ between the two collections;
* latency of ``Engine.plan`` and ``Engine.search_request``.

    python bench/resumes.py --home /tmp/rl-bench --count 400 --requests 50 [--json bench/out/resumes.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ranklock import Document, Engine
from ranklock.domains.resumes import RESUME_FIELDS, generate_resumes, parse_resume, swap_identities
from ranklock.plan import matches


def requests_for(docs: list[Document], n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    skills = sorted({s for d in docs for s in d.metadata.get("skills", [])})
    cities = sorted({c for d in docs for c in d.metadata.get("locations", [])})
    out = []
    for _ in range(n):
        parts: list[str] = []
        want: list[dict[str, Any]] = []
        a, b = rng.sample(skills, 2)
        if rng.random() < 0.5:
            parts.append(f"{a} or {b}")
            want.append({"field": "skills", "op": "has_any", "value": sorted([a, b])})
        else:
            parts.append(a)
            want.append({"field": "skills", "op": "has", "value": a})
        years = rng.choice((1, 2, 3, 5, 8))
        parts.append(f"{years}+ years of experience")
        want.append({"field": "years_experience", "op": ">=", "value": years})
        if rng.random() < 0.5:
            city = rng.choice(cities)
            parts.append(f"based in {city}")
            want.append({"field": "locations", "op": "has", "value": city})
        if rng.random() < 0.4:
            parts.append("no agency recruiters")
            want.append({"not": {"field": "employer_types", "op": "has", "value": "agency"}})
        if rng.random() < 0.3:
            parts.append("docker a plus")
        out.append((", ".join(parts), {"and": want}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", default=None)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    eng = Engine(home=args.home, log_queries=False)
    raws = generate_resumes(args.count, args.seed)
    docs = [parse_resume(r.doc_id, r.content, r.format) for r in raws]
    swapped = [parse_resume(r.doc_id, r.content, r.format) for r in swap_identities(raws, args.seed)]
    t0 = time.perf_counter()
    eng.ingest("bench_resumes", docs, replace=True, create={"fields": list(RESUME_FIELDS)})
    t1 = time.perf_counter()
    eng.ingest("bench_resumes_swapped", swapped, replace=True, create={"fields": list(RESUME_FIELDS)})
    t2 = time.perf_counter()
    meta = {d.doc_id: d.metadata for d in docs}
    k = args.count + 5
    plan_ms: list[float] = []
    search_ms: list[float] = []
    violations = qualifying_total = returned_qualifying = swap_diffs = wrong_plans = 0
    keep = {"hits", "matching_count", "complete", "warnings"}
    for request, expected in requests_for(docs, args.requests, args.seed + 1):
        t = time.perf_counter()
        plan = eng.plan("bench_resumes", request)
        plan_ms.append((time.perf_counter() - t) * 1000)
        wrong_plans += plan.filter != expected
        t = time.perf_counter()
        out = eng.search_request("bench_resumes", request, k=k)
        search_ms.append((time.perf_counter() - t) * 1000)
        assert out.result is not None
        got = {h.doc_id for h in out.result.hits}
        qualifying = {i for i, m in meta.items() if matches(expected, m)}
        violations += sum(1 for i in got if not matches(expected, meta[i]))
        qualifying_total += len(qualifying)
        returned_qualifying += len(got & qualifying)
        other = eng.search_request("bench_resumes_swapped", request, k=k)
        assert other.result is not None
        swap_diffs += out.result.model_dump_json(include=keep) != other.result.model_dump_json(include=keep)
    report = {
        "resumes": args.count,
        "requests": args.requests,
        "ingest_s": round(t1 - t0, 1),
        "ingest_swapped_s": round(t2 - t1, 1),
        "plans_not_as_expected": wrong_plans,
        "violations": violations,
        "qualifying": qualifying_total,
        "completeness": returned_qualifying / qualifying_total if qualifying_total else 1.0,
        "name_swap_diffs": swap_diffs,
        "plan_ms_median": round(statistics.median(plan_ms), 2),
        "search_request_ms_median": round(statistics.median(search_ms), 1),
        "search_request_ms_p95": round(sorted(search_ms)[int(0.95 * (len(search_ms) - 1))], 1),
    }
    width = max(len(key) for key in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    eng.close()


if __name__ == "__main__":
    main()
