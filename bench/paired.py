"""Is one run's mean per-query metric really below another's?  A paired test on two per-query files.

Reads two JSON files ``{query_id: value}`` (``bench/chunk_rules.py --per-query``
writes them) over the same queries and prints the mean difference (B - A),
how many queries went up and down, a two-sided paired randomization test
(Fisher's sign flip: under "no difference" each query's difference is as
likely negative as positive; Smucker, Allan & Carterette 2007 recommend it
for IR metrics) and a 95 % bootstrap interval of the mean difference.  Both
are seeded, so a rerun prints the same figures.

    python bench/paired.py /tmp/pq-midword-scifact.json /tmp/pq-v2-scifact.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def paired(a: dict[str, float], b: dict[str, float], *, rounds: int = 100_000, seed: int = 0) -> dict[str, float]:
    """Mean difference of ``b - a`` over their common queries, with a sign-flip p-value and a bootstrap interval."""
    if set(a) != set(b):
        raise SystemExit(f"the runs judge different queries: {len(set(a) ^ set(b))} differ; compare like with like")
    d = np.array([b[q] - a[q] for q in sorted(a)], dtype=np.float64)
    rng = np.random.default_rng(seed)
    observed = abs(d.mean())
    flips = rng.choice((-1.0, 1.0), size=(rounds, d.size))
    # +1 in numerator and denominator: the observed assignment is one of the permutations.
    p = (1 + int((np.abs((flips * d).mean(axis=1)) >= observed - 1e-15).sum())) / (rounds + 1)
    boot = d[rng.integers(0, d.size, size=(rounds, d.size))].mean(axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {
        "queries": int(d.size),
        "mean_a": float(np.mean([a[q] for q in sorted(a)])),
        "mean_b": float(np.mean([b[q] for q in sorted(b)])),
        "diff": float(d.mean()),
        "up": int((d > 0).sum()),
        "down": int((d < 0).sum()),
        "p_randomization": p,
        "ci95_low": float(lo),
        "ci95_high": float(hi),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="paired randomization test of two per-query metric files")
    ap.add_argument("a", type=Path, help="the baseline run's per-query JSON")
    ap.add_argument("b", type=Path, help="the compared run's per-query JSON")
    ap.add_argument("--rounds", type=int, default=100_000)
    args = ap.parse_args()
    r = paired(json.loads(args.a.read_text()), json.loads(args.b.read_text()), rounds=args.rounds)
    print(
        f"{args.b.name} - {args.a.name}: {r['mean_b']:.4f} - {r['mean_a']:.4f} = {r['diff']:+.4f} over "
        f"{r['queries']} queries ({r['up']} up, {r['down']} down); randomization p = {r['p_randomization']:.3f}; "
        f"95% bootstrap interval [{r['ci95_low']:+.4f}, {r['ci95_high']:+.4f}]"
    )
    json.dump(r, sys.stdout)
    print()


if __name__ == "__main__":
    main()
