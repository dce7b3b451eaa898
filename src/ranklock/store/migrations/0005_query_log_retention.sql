-- Query-log retention (issue 11): each entry's size, and the watermark that
-- tells an entry pruned by retention from one that never existed.
--
-- Entries logged before this migration keep bytes NULL; retention measures
-- them when it reaches them (coalesce with pg_column_size), so the migration
-- does not rewrite a large log.
ALTER TABLE ranklock.query_log ADD COLUMN bytes integer;

-- The row's size as PostgreSQL stores it before compression: what a size
-- policy can add up without reading the entries' JSON again.
CREATE FUNCTION ranklock.query_log_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.bytes := pg_column_size(NEW);
    RETURN NEW;
END
$$;

CREATE TRIGGER query_log_bytes BEFORE INSERT ON ranklock.query_log
    FOR EACH ROW EXECUTE FUNCTION ranklock.query_log_bytes();

-- One row.  Retention deletes the log's oldest ids first, so every id at or
-- below pruned_through is gone because of retention.
CREATE TABLE ranklock.query_log_retention (
    only_row        boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    pruned_through  bigint NOT NULL DEFAULT 0,
    pruned_rows     bigint NOT NULL DEFAULT 0,
    pruned_bytes    bigint NOT NULL DEFAULT 0,
    last_pruned_at  timestamptz
);
INSERT INTO ranklock.query_log_retention DEFAULT VALUES;
