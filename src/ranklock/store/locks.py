"""Every PostgreSQL advisory lock ranklock takes, named in one place.

An advisory lock is named by two int4 keys: a namespace (the constants below)
and an object id (a collection or a snapshot id); :data:`MIGRATIONS`, :data:`LOG_PRUNE` and
:data:`ANSWER_LOG_PRUNE` are taken with their single key.  Keeping every namespace here is what guarantees
that two concepts never share one::

    namespace      keyed by     held by
    MIGRATIONS     (nothing)    the process applying schema migrations on open
    BUILD          snapshot     its builder, from the INSERT of its row until it is ready or failed
    VERSIONS       collection   every ingest (shared) while its versions are unreferenced;
                                garbage collection of versions (exclusive)
    VALUE_COUNTS   snapshot     the writer making a snapshot's per-value counts of its dead rows;
                                a purge dropping them, from its swap to its commit
    SEGMENT_COUNTS segment      the writer making a segment's per-value counts; a purge
                                dropping them, from its swap to its commit
    LOG_PRUNE      (nothing)    the process pruning the query log (one prune at a time per database)
    ANSWER_LOG_PRUNE (nothing)  the process pruning the answer log
    WRITER         collection   a writer (ingest, activate, rollback, drop) from reading
                                the active snapshot until it has switched it
    READ_GATE      snapshot     a search's read transaction (shared, ranklock.search.fusion); a
                                purge swapping the snapshot's segment tables (exclusive,
                                ranklock.snapshot.gate)
    SHARD_ANCHORS  shard count  the build making the cluster's search anchors of that shard
                                count (ranklock.snapshot.shards), once

Example::

    >>> conn.execute("SELECT pg_advisory_lock(%s, %s)", [locks.WRITER, collection_id])
"""

from __future__ import annotations

__all__ = [
    "ALL",
    "ANSWER_LOG_PRUNE",
    "BUILD",
    "LOG_PRUNE",
    "MIGRATIONS",
    "READ_GATE",
    "SEGMENT_COUNTS",
    "SHARD_ANCHORS",
    "VALUE_COUNTS",
    "VERSIONS",
    "WRITER",
]

MIGRATIONS = 7_142_001
BUILD = 7_142_002
VERSIONS = 7_142_003
VALUE_COUNTS = 7_142_004
LOG_PRUNE = 7_142_005
WRITER = 7_142_006
ANSWER_LOG_PRUNE = 7_142_007
SEGMENT_COUNTS = 7_142_008
READ_GATE = 7_142_009
SHARD_ANCHORS = 7_142_010

#: Every namespace by name (a test checks they are distinct and that no module spells one itself).
ALL = {
    "MIGRATIONS": MIGRATIONS,
    "BUILD": BUILD,
    "VERSIONS": VERSIONS,
    "VALUE_COUNTS": VALUE_COUNTS,
    "LOG_PRUNE": LOG_PRUNE,
    "WRITER": WRITER,
    "ANSWER_LOG_PRUNE": ANSWER_LOG_PRUNE,
    "SEGMENT_COUNTS": SEGMENT_COUNTS,
    "READ_GATE": READ_GATE,
    "SHARD_ANCHORS": SHARD_ANCHORS,
}
