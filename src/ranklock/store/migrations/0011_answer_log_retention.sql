-- The answer log under the query log's retention policy (issue 27), and logs that keep only hashes.
--
-- Each answer's size, measured as the query log measures its entries (the trigger
-- function of migration 0005), and the watermark of what retention removed.
ALTER TABLE ranklock.answer_log ADD COLUMN bytes integer;

CREATE TRIGGER answer_log_bytes BEFORE INSERT ON ranklock.answer_log
    FOR EACH ROW EXECUTE FUNCTION ranklock.query_log_bytes();

CREATE TABLE ranklock.answer_log_retention (
    only_row        boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    pruned_through  bigint NOT NULL DEFAULT 0,
    pruned_rows     bigint NOT NULL DEFAULT 0,
    pruned_bytes    bigint NOT NULL DEFAULT 0,
    last_pruned_at  timestamptz
);
INSERT INTO ranklock.answer_log_retention DEFAULT VALUES;

-- RANKLOCK_LOG_TEXT=hash: an answered row keeps the sha256 of its canonical answer JSON instead of the
-- JSON (the question in `request` is replaced by its sha256 the same way).
ALTER TABLE ranklock.answer_log ADD COLUMN answer_sha256 text;
ALTER TABLE ranklock.answer_log DROP CONSTRAINT answer_log_check;
ALTER TABLE ranklock.answer_log ADD CONSTRAINT answer_log_check
    CHECK ((status = 'answered') = (answer_id IS NOT NULL AND (answer IS NOT NULL OR answer_sha256 IS NOT NULL)));
