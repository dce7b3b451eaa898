"""The evaluation plot: mean recall@k per mode, and per-query nDCG deltas between modes.

Drawn with matplotlib's object API and the Agg canvas (no pyplot, no display,
no global state), so it works headless and from several threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_report"]


def plot_report(report: dict[str, Any], path: str | Path) -> Path:
    """Write a two-panel PNG for an evaluation report; return its path.

    Left: mean recall at every cutoff 1..depth, one line per mode, the gated
    cutoffs marked.  Right: for the first mode against each other mode, the
    per-query difference in nDCG at the smallest cutoff, sorted, so wins and
    losses hidden by the mean are visible.
    """
    from .._extras import require

    require("plots", "matplotlib", "--plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    ks = report["ks"]
    for mode, curve in report["recall_curve"].items():
        xs = list(range(1, len(curve) + 1))
        left.plot(xs, curve, label=mode)
        left.scatter([k for k in ks if k <= len(curve)], [curve[k - 1] for k in ks if k <= len(curve)], s=14)
    left.set_xlabel("k")
    left.set_ylabel("mean recall@k")
    left.set_ylim(0, 1)
    left.grid(alpha=0.3)
    left.legend(loc="lower right")
    left.set_title(f"{report['collection']} (snapshot {report['snapshot']['id']})")

    k0 = min(ks)
    modes = list(report["per_query"])
    metric = f"ndcg@{k0}"
    if len(modes) >= 2:
        base = modes[0]
        for other in modes[1:]:
            deltas = sorted(
                (report["per_query"][base][q][metric] - report["per_query"][other][q][metric])
                for q in report["per_query"][base]
            )
            right.plot(range(1, len(deltas) + 1), deltas, label=f"{base} − {other}")
        right.axhline(0, color="black", linewidth=0.8)
        right.legend(loc="upper left")
        right.set_title(f"per-query {metric} delta, sorted")
    else:
        right.text(0.5, 0.5, "one mode: no deltas", ha="center", va="center", transform=right.transAxes)
        right.set_title(f"per-query {metric} delta")
    right.set_xlabel("query (sorted by delta)")
    right.set_ylabel(f"Δ {metric}")
    right.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, format="png")
    return out
