-- Segments (issue 24): a snapshot is a set of immutable segments plus the set of live documents.
--
-- A segment is what a snapshot build used to write: a chunk table with its
-- indexes and its BM25 tables (ranklock_data.<kind>_<id>), written once.  Its
-- id is the id of the snapshot whose build wrote it, so the tables keep the
-- names they had.  A snapshot lists its segments; the documents of those
-- segments that a later write replaced or deleted are its dead documents
-- (and their chunks its dead rows), masked in every read.  BM25 statistics
-- are the snapshot's: segment counts summed, dead chunks subtracted
-- (snapshot_dead_terms), never one segment's.
CREATE TABLE ranklock.segments (
    id             bigint PRIMARY KEY,       -- from the snapshots' sequence: table names never collide
    collection_id  bigint NOT NULL REFERENCES ranklock.collections ON DELETE CASCADE,
    created_by     bigint NOT NULL,          -- the snapshot whose build wrote it
    documents      integer NOT NULL,
    chunks         integer NOT NULL,
    total_len      bigint NOT NULL,          -- sum of doc_len over its chunks
    max_chunks     integer NOT NULL,         -- most chunks of one of its documents
    window_start   timestamptz,              -- the [start, end) interval it covers, when the collection has a window
    window_end     timestamptz,
    partition_key  text,                     -- the partition key value it holds, when the collection declares one
    stats          jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON ranklock.segments (collection_id);
CREATE INDEX ON ranklock.segments (created_by);

-- How a collection cuts its segments (collection create --window FIELD:UNIT, --partition FIELD):
-- {"window": {"field": ..., "unit": "day"|"week"|"month"|"year"}, "partition": FIELD}; {} when it does not.
ALTER TABLE ranklock.collections ADD COLUMN segmenting jsonb NOT NULL DEFAULT '{}';

CREATE TABLE ranklock.snapshot_segments (
    snapshot_id  bigint NOT NULL REFERENCES ranklock.snapshots ON DELETE CASCADE,
    segment_id   bigint NOT NULL REFERENCES ranklock.segments,
    PRIMARY KEY (snapshot_id, segment_id)
);
CREATE INDEX ON ranklock.snapshot_segments (segment_id);

-- The documents a segment holds (its chunk table holds their chunks).
CREATE TABLE ranklock.segment_documents (
    segment_id    bigint NOT NULL REFERENCES ranklock.segments ON DELETE CASCADE,
    doc_id        text COLLATE "C" NOT NULL,
    content_hash  text NOT NULL,
    PRIMARY KEY (segment_id, doc_id)
);
CREATE INDEX ON ranklock.segment_documents (doc_id);

-- Per snapshot: the documents of its segments that are not live, their chunks,
-- and how many of those chunks hold each lexeme (subtracted from the df).
CREATE TABLE ranklock.snapshot_dead (
    snapshot_id  bigint NOT NULL REFERENCES ranklock.snapshots ON DELETE CASCADE,
    segment_id   bigint NOT NULL,
    doc_id       text COLLATE "C" NOT NULL,
    PRIMARY KEY (snapshot_id, segment_id, doc_id)
);
CREATE TABLE ranklock.snapshot_dead_rows (
    snapshot_id  bigint NOT NULL REFERENCES ranklock.snapshots ON DELETE CASCADE,
    seg          bigint NOT NULL,
    row_id       bigint NOT NULL,
    PRIMARY KEY (snapshot_id, seg, row_id)
);
CREATE TABLE ranklock.snapshot_dead_terms (
    snapshot_id  bigint NOT NULL REFERENCES ranklock.snapshots ON DELETE CASCADE,
    lexeme       text COLLATE "C" NOT NULL,
    chunks       integer NOT NULL,
    PRIMARY KEY (snapshot_id, lexeme)
);

-- Purges (ranklock.snapshot.purge): when, how many documents, a keyed hash of each purged id
-- (never the id or the content), the snapshots corrected and the log entries removed, so a
-- replay of a removed entry says it was purged.
CREATE TABLE ranklock.purges (
    id             bigserial PRIMARY KEY,
    collection_id  bigint NOT NULL REFERENCES ranklock.collections ON DELETE CASCADE,
    at             timestamptz NOT NULL DEFAULT now(),
    id_hashes      text[] NOT NULL,
    documents      integer NOT NULL,
    snapshots      bigint[] NOT NULL,
    query_ids      bigint[] NOT NULL,
    answer_ids     bigint[] NOT NULL
);

-- Every snapshot built before segments becomes a one-segment snapshot of its
-- own tables, with no dead document: nothing is copied but the document lists.
DO $$
DECLARE
    s record;
    t bigint;
    m integer;
BEGIN
    FOR s IN SELECT id, collection_id, doc_count, chunk_count FROM ranklock.snapshots
             WHERE to_regclass(format('ranklock_data.chunks_%s', id)) IS NOT NULL LOOP
        EXECUTE format('SELECT coalesce(sum(doc_len), 0), coalesce(max(chunk) + 1, 0) FROM ranklock_data.chunks_%s', s.id)
            INTO t, m;
        INSERT INTO ranklock.segments (id, collection_id, created_by, documents, chunks, total_len, max_chunks)
        VALUES (s.id, s.collection_id, s.id, coalesce(s.doc_count, 0), coalesce(s.chunk_count, 0), t, m);
        INSERT INTO ranklock.snapshot_segments VALUES (s.id, s.id);
    END LOOP;
END $$;
INSERT INTO ranklock.segment_documents (segment_id, doc_id, content_hash)
SELECT sd.snapshot_id, sd.doc_id, sd.content_hash FROM ranklock.snapshot_documents sd
JOIN ranklock.segments g ON g.id = sd.snapshot_id;
DROP TABLE ranklock.snapshot_documents;
