-- Purges erase bytes, not only rows (ranklock.store.erasure): the answers a purge removed, by their
-- public id (a replay of one names the purge), when the rewrite of what still held the bytes
-- finished (NULL: the purge was interrupted after it committed; the same purge run again finishes
-- it), and what it could not reach, as the sentences it printed.
ALTER TABLE ranklock.purges
    ADD COLUMN answer_keys text[] NOT NULL DEFAULT '{}',
    ADD COLUMN erased_at timestamptz,
    ADD COLUMN unreached text[] NOT NULL DEFAULT '{}';
-- Purges made before this migration deleted rows only; nothing says their bytes were rewritten.

-- A collection an ingest created for itself is provisional until a snapshot of it is ready: if that
-- first ingest dies (killed before its first snapshot), the next ingest or `ranklock collections`
-- removes it instead of keeping an empty collection with settings nobody chose again
-- (ranklock.snapshot.abandoned).
ALTER TABLE ranklock.collections ADD COLUMN provisional boolean NOT NULL DEFAULT false;
