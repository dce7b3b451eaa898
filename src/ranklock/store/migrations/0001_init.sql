-- ranklock catalogue.  Per-snapshot chunk tables live in the ranklock_data
-- schema and are created by the snapshot builder, because their vector
-- dimension and typed columns depend on the collection.
CREATE SCHEMA IF NOT EXISTS ranklock;
CREATE SCHEMA IF NOT EXISTS ranklock_data;

CREATE TABLE ranklock.collections (
    id                   bigserial PRIMARY KEY,
    name                 text NOT NULL UNIQUE,
    language             text NOT NULL,              -- a pg_ts_config name
    accent               text NOT NULL DEFAULT 'sensitive' CHECK (accent IN ('sensitive', 'insensitive')),
    embedder_id          text NOT NULL,
    embedder_sha256      text NOT NULL,
    dim                  integer NOT NULL CHECK (dim > 0 AND dim <= 16000),
    fields               jsonb NOT NULL DEFAULT '[]', -- declared typed fields
    index_kind           text NOT NULL DEFAULT 'hnsw' CHECK (index_kind IN ('hnsw', 'ivfflat', 'exact')),
    index_params         jsonb NOT NULL DEFAULT '{}',
    chunker              jsonb NOT NULL,
    normalization        text NOT NULL DEFAULT 'NFKC',
    search_defaults      jsonb NOT NULL DEFAULT '{}',
    active_snapshot_id   bigint,
    previous_snapshot_id bigint,
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- Document versions: a version is identified by the sha256 of its
-- normalised content; an update appends a version, it never overwrites one.
CREATE TABLE ranklock.documents (
    collection_id  bigint NOT NULL REFERENCES ranklock.collections ON DELETE CASCADE,
    doc_id         text NOT NULL,
    content_hash   text NOT NULL,
    title          text NOT NULL DEFAULT '',
    body           text NOT NULL,
    metadata       jsonb NOT NULL DEFAULT '{}',
    display        jsonb NOT NULL DEFAULT '{}',       -- shown, never ranked (names, contacts)
    effective_from timestamptz,
    effective_to   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, doc_id, content_hash)
);

CREATE TABLE ranklock.snapshots (
    id             bigserial PRIMARY KEY,
    collection_id  bigint NOT NULL REFERENCES ranklock.collections ON DELETE CASCADE,
    parent_id      bigint,
    status         text NOT NULL CHECK (status IN ('building', 'ready', 'failed')),
    builder_pid    integer,
    manifest       jsonb,
    manifest_hash  text,
    doc_count      integer,
    chunk_count    integer,
    stats          jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    built_at       timestamptz
);

CREATE TABLE ranklock.snapshot_documents (
    snapshot_id   bigint NOT NULL REFERENCES ranklock.snapshots ON DELETE CASCADE,
    doc_id        text NOT NULL,
    content_hash  text NOT NULL,
    PRIMARY KEY (snapshot_id, doc_id)
);

-- Embeddings keyed by what produced them: the exact text and the exact
-- weights.  A rebuilt snapshot reuses them instead of re-embedding.
CREATE TABLE ranklock.embedding_cache (
    embedder_sha256 text NOT NULL,
    text_sha256     text NOT NULL,
    embedding       vector NOT NULL,
    PRIMARY KEY (embedder_sha256, text_sha256)
);

CREATE TABLE ranklock.query_log (
    id              bigserial PRIMARY KEY,
    collection      text NOT NULL,
    snapshot_id     bigint,
    manifest_hash   text,
    fingerprint     text NOT NULL,
    request         jsonb NOT NULL,      -- everything needed to replay
    result_digest   text NOT NULL,       -- sha256 of the canonical result
    result          jsonb NOT NULL,      -- ids, ranks and raw scores per branch
    timings         jsonb NOT NULL,
    logged_at       timestamptz NOT NULL DEFAULT now()
);
