-- Result cache and query-log lookups (issue 5).
--
-- A cached result belongs to one immutable snapshot, so it can never go stale
-- while the snapshot exists; dropping the snapshot drops its cache rows.
-- The payload is JSON *text*, not jsonb: jsonb reorders object keys, and a
-- cached result must serialise to the very bytes a fresh one does.
CREATE TABLE ranklock.result_cache (
    snapshot_id  bigint NOT NULL REFERENCES ranklock.snapshots ON DELETE CASCADE,
    cache_key    text NOT NULL,        -- sha256 of the canonical key, see ranklock.snapshot.cache
    key          jsonb NOT NULL,       -- the key itself, for inspection
    payload      text NOT NULL,        -- the result without hit texts (rehydrated from the snapshot)
    branches     text,                 -- each branch's candidates, when they were computed
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (snapshot_id, cache_key)
);

CREATE INDEX query_log_collection_idx ON ranklock.query_log (collection, id);
