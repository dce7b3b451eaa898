-- A collection's whole life (issue 41): snapshot retention, pinned log entries, dropped collections.

-- Snapshot retention (ranklock.snapshot.retention): {"keep": N, "keep_for_s": S}, each null when that
-- rule is off; NULL: the default policy (ranklock.settings.SNAPSHOT_KEEP newest snapshots).
ALTER TABLE ranklock.collections ADD COLUMN retention jsonb;

-- A pinned entry is kept by log retention, and the snapshot it ran against by snapshot retention,
-- until it is unpinned (`ranklock log pin`, `ranklock log pin --unpin`): a replay that must keep working.
ALTER TABLE ranklock.query_log ADD COLUMN pinned boolean NOT NULL DEFAULT false;
ALTER TABLE ranklock.answer_log ADD COLUMN pinned boolean NOT NULL DEFAULT false;
CREATE INDEX query_log_pinned_idx ON ranklock.query_log (snapshot_id) WHERE pinned;
CREATE INDEX answer_log_pinned_idx ON ranklock.answer_log (snapshot_id) WHERE pinned;

-- Dropped collections (`ranklock collection drop`): the name, when, and the log entries removed
-- with it, so a replay of one of them says the collection was dropped instead of "not found".
CREATE TABLE ranklock.collection_drops (
    id          bigserial PRIMARY KEY,
    collection  text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    snapshots   bigint[] NOT NULL,
    documents   integer NOT NULL,
    query_ids   bigint[] NOT NULL,
    answer_ids  bigint[] NOT NULL
);

-- The `admin` scope: a token that may drop a collection over HTTP (DELETE /api/collections/NAME).
ALTER TABLE ranklock.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE ranklock.api_tokens ADD CONSTRAINT api_tokens_scopes_check
    CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['admin', 'read', 'paid-generator']);
