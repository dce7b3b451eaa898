-- Purges erase bytes, not only rows (ranklock.store.erasure): the answers a purge removed, by their
-- public id (a replay of one names the purge), when the rewrite of what still held the bytes
-- finished (NULL: the purge was interrupted after it committed; the same purge run again finishes
-- it), and what it could not reach, as the sentences it printed.
ALTER TABLE ranklock.purges
    ADD COLUMN answer_keys text[] NOT NULL DEFAULT '{}',
    ADD COLUMN erased_at timestamptz,
    ADD COLUMN unreached text[] NOT NULL DEFAULT '{}';
-- Purges made before this migration deleted rows only; nothing says their bytes were rewritten.
