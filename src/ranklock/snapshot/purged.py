"""What the purge records say about ids and snapshots, without keeping a purged id (ranklock.snapshot.purge).

A purge keeps, of each id it erased, only its keyed hash (:meth:`~ranklock.snapshot.purge_key.PurgeKey.hash`,
under the home's purge key: a record made with another home's key is not recognised).
That is enough to answer the two questions asked after it:

* an ingest: *was this id purged?* (:func:`purged_among`): re-adding erased data needs the owner's
  say (``allow_purged``), and the ingest names the id either way;
* ``snapshot show`` and a replay: *which purges changed this snapshot?* (:func:`purges_of`): a purge
  rewrites the snapshots that held the documents, so their manifest hash and their scores change.

>>> purged_among(db, coll, ["n1", "n2"], key)   # doctest: +SKIP
{'n2': 3}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..collection import CollectionInfo
from ..store.database import Database
from .purge_key import PurgeKey

__all__ = ["purged_among", "purges_of"]


def purged_among(db: Database, coll: CollectionInfo, ids: Sequence[str], key: PurgeKey) -> dict[str, int]:
    """The ids among ``ids`` that a purge of ``coll`` erased, each with the id of the latest purge that did
    (as far as ``key``, the home's purge key, can tell)."""
    if not ids:
        return {}
    by_hash = {h: i for i in ids for h in key.hashes(coll.name, i)}
    rows = db.fetchall(
        "SELECT h, max(p.id) AS purge_id FROM ranklock.purges AS p CROSS JOIN LATERAL unnest(p.id_hashes) AS h "
        "WHERE p.collection_id = %s AND (p.key_id = %s OR p.key_id IS NULL) AND h = ANY (%s) GROUP BY h",
        [coll.id, key.key_id, sorted(by_hash)],
    )
    out: dict[str, int] = {}
    for r in rows:
        doc_id = by_hash[r["h"]]
        out[doc_id] = max(out.get(doc_id, 0), int(r["purge_id"]))
    return out


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
