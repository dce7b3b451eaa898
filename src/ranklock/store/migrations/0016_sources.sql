-- A folder is a source (issue 45): the documents an ingest read from a folder of files remember
-- it, so the next ingest of that folder deletes those whose files are gone (ranklock.snapshot.sources)
-- and leaves every other document alone.  ``path`` is the folder's real path (symbolic links
-- resolved), so the same folder named another way is the same source.  ``mirrored_at`` is when
-- the last mirror of it that was written began to read the folder (seconds since the epoch, the
-- reading machine's clock): a mirror that read the folder before that is older news and writes
-- nothing (it would bring back files deleted since).
CREATE TABLE ranklock.sources (
    id             bigserial PRIMARY KEY,
    collection_id  bigint NOT NULL REFERENCES ranklock.collections ON DELETE CASCADE,
    path           text NOT NULL,
    mirrored_at    double precision,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (collection_id, path)
);

-- The source a document version was last given by (NULL: JSONL, standard input, a list of
-- documents, or a version stored before sources existed).  No foreign key: a purge rewrites this
-- table by copy and swap (ranklock.store.rewrite), which keeps its indexes but not foreign keys, and
-- a source row goes only with its collection, as the versions do.
ALTER TABLE ranklock.documents ADD COLUMN source_id bigint;
CREATE INDEX ON ranklock.documents (collection_id, source_id) WHERE source_id IS NOT NULL;
