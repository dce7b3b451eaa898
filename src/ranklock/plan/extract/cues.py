"""Cue words: how near the cue words of a field stand to a mention, and claiming them for it."""

from __future__ import annotations

import re

from .scopes import _clause_bounds
from .state import _Mention, _State


def _cue_distance(st: _State, name: str, start: int, end: int) -> int | None:
    """Distance from the mention to the nearest cue word of field ``name`` in the same clause."""
    lo, hi = _clause_bounds(st.text, start, end)
    best: int | None = None
    for cue in st.schema.cues(name):
        if cue in ("years", "in"):
            continue  # a unit or a preposition, not a cue
        for m in re.finditer(rf"\b{re.escape(cue)}\b", st.text[lo:hi], re.IGNORECASE):
            s, e = lo + m.start(), lo + m.end()
            d = s - end if s >= end else start - e
            if best is None or d < best:
                best = max(d, 0)
    return best


def _claim_cues(st: _State, mention: _Mention) -> None:
    lo, hi = _clause_bounds(st.text, mention.start, mention.end)
    for cue in (*st.schema.cues(mention.field), "period", "of"):
        if cue == "in":
            continue
        for m in re.finditer(rf"\b{re.escape(cue)}\b", st.text[lo:hi], re.IGNORECASE):
            st.claim(lo + m.start(), lo + m.end(), mention)
