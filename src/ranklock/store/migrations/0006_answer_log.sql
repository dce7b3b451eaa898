-- The answer log (issue 12): one row per `ask`, answered or rejected.
--
-- Each row keeps the three layers a replay compares: the retrieval record
-- (the search's query_log id and the numbered chunks, with a sha256 of each
-- text), the prompt (template version and sha256), and the generator record
-- with the answer.  query_id has no foreign key: query-log retention may prune
-- the search entry, and the chunks kept here still let a replay compare
-- retrieval.  The answer is JSON *text*, not jsonb: jsonb reorders object
-- keys, and a replay compares the answer byte for byte.
CREATE TABLE ranklock.answer_log (
    id             bigserial PRIMARY KEY,
    answer_id      text,                 -- Answer.answer_id (content hash); NULL for a rejected answer
    status         text NOT NULL CHECK (status IN ('answered', 'rejected')),
    collection     text NOT NULL,
    snapshot_id    bigint NOT NULL,
    manifest_hash  text,
    query_id       bigint,               -- ranklock.query_log.id of the retrieval (NULL when logging is off)
    request        jsonb NOT NULL,       -- question, filter, as_of, snapshot, chunks, mode
    chunks         jsonb NOT NULL,       -- [[n, doc_id, chunk, rank, score, text sha256], ...]
    prompt_version text NOT NULL,
    prompt_sha256  text NOT NULL,
    generator      jsonb NOT NULL,       -- {name, model, checksum, params}
    answer         text,                 -- canonical Answer JSON; NULL for a rejected answer
    error          text,                 -- why a rejected answer was rejected
    raw            text,                 -- the generator's reply as received, when it is a model
    created_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'answered') = (answer_id IS NOT NULL AND answer IS NOT NULL))
);

CREATE INDEX answer_log_answer_id_idx ON ranklock.answer_log (answer_id, id);
