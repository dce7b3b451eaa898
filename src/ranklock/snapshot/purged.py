"""What the purge records say about ids and snapshots, without keeping a purged id (ranklock.snapshot.purge).

A purge keeps, of each id it erased, only its keyed hash (:func:`~ranklock.snapshot.purge.purged_id_hash`).
That is enough to answer the two questions asked after it:

* an ingest: *was this id purged?* (:func:`purged_among`): re-adding erased data needs the owner's
  say (``allow_purged``), and the ingest names the id either way;
* ``snapshot show`` and a replay: *which purges changed this snapshot?* (:func:`purges_of`): a purge
  rewrites the snapshots that held the documents, so their manifest hash and their scores change.

>>> purged_among(db, coll, ["n1", "n2"])   # doctest: +SKIP
{'n2': 3}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..collection import CollectionInfo
from ..store.database import Database
from .purge import purged_id_hash

__all__ = ["purged_among", "purges_of"]


def purged_among(db: Database, coll: CollectionInfo, ids: Sequence[str]) -> dict[str, int]:
    """The ids among ``ids`` that a purge of ``coll`` erased, each with the id of the latest purge that did."""
    if not ids:
        return {}
    by_hash = {purged_id_hash(coll.name, i): i for i in ids}
    rows = db.fetchall(
        "SELECT h, max(p.id) AS purge_id FROM ranklock.purges AS p CROSS JOIN LATERAL unnest(p.id_hashes) AS h "
        "WHERE p.collection_id = %s AND h = ANY (%s) GROUP BY h",
        [coll.id, sorted(by_hash)],
    )
    return {by_hash[r["h"]]: int(r["purge_id"]) for r in rows}


def purges_of(db: Database, snapshot_id: int) -> list[dict[str, Any]]:
    """The purges that rewrote snapshot ``snapshot_id``, oldest first: id, time, documents, log entries removed."""
    rows = db.fetchall(
        "SELECT id, at, documents, cardinality(query_ids) AS queries, cardinality(answer_ids) AS answers "
        "FROM ranklock.purges WHERE %s = ANY (snapshots) ORDER BY id",
        [snapshot_id],
    )
    return [
        {
            "purge_id": int(r["id"]),
            "at": r["at"].isoformat(),
            "documents": int(r["documents"]),
            "query_log_entries_removed": int(r["queries"]),
            "answer_log_entries_removed": int(r["answers"]),
        }
        for r in rows
    ]
