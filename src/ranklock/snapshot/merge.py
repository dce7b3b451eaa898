"""Merges: fold segments into one, as a new snapshot holding the same documents.

Every write adds a segment, and every segment costs a search something (an
index scan, a lookup per query term), so small segments are folded together
as they accumulate, by a policy that depends only on the segments' sizes:

Segments are only ever merged with segments of the same key (the same
window interval and partition value, ranklock.segmenting), so routing keeps
working after a merge.  Within a key:

* *small* segments (under ``SMALL_CHUNKS`` chunks) are merged into one as
  soon as there are more than ``MAX_SMALL`` of them, leaving out any that is
  larger than the smaller ones together: cheap, since they are small, and it
  keeps a collection fed by one-document ingests at a handful of segments;
* larger ones are tiered by powers of ``MERGE_FACTOR`` of their size, and
  ``MERGE_FACTOR`` segments of one tier are merged: a document is rewritten
  about log(N) times over its life, never the corpus on every write;
* a segment whose dead rows reach ``DEAD_SHARE`` of its chunks is rewritten
  (merged alone) to drop them.

A merge is a snapshot like any other (ranklock.snapshot.build): it copies the
live rows of the merged segments into one new segment (no chunking, no
embedding), references the others, and is activated.  Scores never depend on
the segmentation (the BM25 statistics are the snapshot's), so exact-mode
results are the same before and after; an HNSW graph is per segment, so
approximate answers can change, and stay flagged ``approximate_index``.

>>> plan_merge([SegmentSize(1, 900_000, 0)] + [SegmentSize(i, 3, 0) for i in range(2, 8)])
[2, 3, 4, 5, 6, 7]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..collection import CollectionInfo, read_collection
from ..embed.base import Embedder
from ..errors import SnapshotError
from ..store.database import Database
from . import lifecycle
from .build import BuildReport, build_snapshot, reap_dead_builds
from .segments import read_layout
from .writer import writing

__all__ = [
    "DEAD_SHARE",
    "MAX_SMALL",
    "MERGE_FACTOR",
    "SMALL_CHUNKS",
    "MergeOutcome",
    "SegmentSize",
    "merge",
    "plan_merge",
    "sizes",
]

#: A segment under this many chunks is small.
SMALL_CHUNKS = 10_000
#: At most this many small segments are left unmerged.
MAX_SMALL = 4
#: Segments of one size tier (a power of this many times SMALL_CHUNKS) are merged this many at a time.
MERGE_FACTOR = 10
#: A segment with at least this share of its chunks dead is rewritten without them.
DEAD_SHARE = 0.5


@dataclass(frozen=True)
class SegmentSize:
    """What the policy knows of a segment: its id, chunks and dead rows in the snapshot, and its key."""

    id: int
    chunks: int
    dead: int
    key: tuple[str, str] = ("", "")


def plan_merge(segments: Sequence[SegmentSize]) -> list[int]:
    """The segments the policy would merge now (ascending ids), or [] when none: those of one key, the first
    key (in order) that has some to merge."""
    by_key: dict[tuple[str, str], list[SegmentSize]] = {}
    for g in segments:
        by_key.setdefault(g.key, []).append(g)
    for key in sorted(by_key):
        picked = _plan_one_key(by_key[key])
        if picked:
            return picked
    return []


def _plan_one_key(segments: Sequence[SegmentSize]) -> list[int]:
    small = sorted((g for g in segments if g.chunks < SMALL_CHUNKS), key=lambda g: (g.chunks, g.id))
    if len(small) > MAX_SMALL:
        # Leave out a small segment larger than all the smaller ones together: merging it would
        # rewrite more than the others hold (a 9,000-chunk collection fed one document at a time
        # would be rewritten every few writes).  A merge then at least doubles the segment of every
        # document it rewrites, so a document is rewritten at most log2(SMALL_CHUNKS) times while
        # small, and the segments left out, each larger than the smaller ones together, are few.
        while len(small) > MAX_SMALL and small[-1].chunks > sum(g.chunks for g in small[:-1]):
            small.pop()
        if len(small) > MAX_SMALL:
            return sorted(g.id for g in small)
    tiers: dict[int, list[SegmentSize]] = {}
    for g in segments:
        if g.chunks >= SMALL_CHUNKS:
            tiers.setdefault(int(math.log(g.chunks / SMALL_CHUNKS, MERGE_FACTOR)), []).append(g)
    for tier in sorted(tiers):
        if len(tiers[tier]) >= MERGE_FACTOR:
            return sorted(g.id for g in tiers[tier])
    for g in sorted(segments, key=lambda g: g.id):
        if g.chunks and g.dead >= DEAD_SHARE * g.chunks:
            return [g.id]
    return []


def sizes(db: Database, snapshot_id: int) -> list[SegmentSize]:
    """The segments of a snapshot with their chunks and dead rows."""
    layout = read_layout(db, snapshot_id)
    dead = {
        int(r["seg"]): int(r["n"])
        for r in db.fetchall(
            "SELECT seg, count(*) AS n FROM ranklock.snapshot_dead_rows WHERE snapshot_id = %s GROUP BY seg",
            [snapshot_id],
        )
    }
    return [
        SegmentSize(g.id, g.chunks, dead.get(g.id, 0), (str(g.window_start or ""), g.partition_key or ""))
        for g in layout.segments
    ]


@dataclass(frozen=True)
class MergeOutcome:
    """A merge snapshot's build report and the segments it folded into its own."""

    build: BuildReport
    segments: tuple[int, ...]


def merge(
    db: Database,
    coll: CollectionInfo,
    emb: Embedder,
    *,
    lock_wait: float,
    everything: bool = False,
) -> MergeOutcome | None:
    """Merge the active snapshot's segments the policy picks (``everything``: all of them, key by key), activated.

    Returns the last merge snapshot's build report with every segment it
    folded, or None when there is nothing to merge (one segment per key, or
    nothing the policy picks).  Under the collection's writer lock, like
    every write.  A collection cut by window or partition merges each key's
    segments into one segment of that key (a snapshot per key).
    """
    last: BuildReport | None = None
    folded: list[int] = []
    with writing(db, coll.id, coll.name, lock_wait):
        coll = read_collection(db, coll.name)
        if coll.active_snapshot_id is None:
            raise SnapshotError(f"collection {coll.name!r} has no active snapshot to merge; ingest documents first.")
        reap_dead_builds(db, coll.id)
        while True:
            active = read_collection(db, coll.name).active_snapshot_id
            assert active is not None
            segs = sizes(db, active)
            if everything:
                groups: dict[tuple[str, str], list[int]] = {}
                for g in segs:
                    groups.setdefault(g.key, []).append(g.id)
                picked = next((sorted(ids) for _, ids in sorted(groups.items()) if len(ids) > 1), [])
            else:
                picked = plan_merge(segs)
            dead = {g.id for g in segs if g.dead}
            # A sharded snapshot placed before per-shard search (issue 46) is written once more, so the new
            # one is placed (ranklock.snapshot.shards.place_snapshot): its smallest segment rewritten alone.
            unplaced = everything and bool(coll.shards) and not read_layout(db, active).shard_search
            if unplaced and not picked and segs:
                picked = [min(segs, key=lambda g: (g.chunks, g.id)).id]
            if len(picked) < 2 and not (picked and (picked[0] in dead or unplaced)):
                break
            last = build_snapshot(db, coll, [], emb, parent_id=active, merge=picked)
            lifecycle.activate(db, coll, last.snapshot_id, lock_wait, keep_previous=True)
            folded += picked
            if not everything:
                break
    return None if last is None else MergeOutcome(last, tuple(sorted(folded)))
