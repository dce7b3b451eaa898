-- The reranker stage (issue 26): what reranked a search or an ask, and its order.
--
-- A reranked search logs its fused result as every search does (request, branches,
-- final order, digest) and, in this column, the reranker record (name, model,
-- weights sha256, params), N, the reranked order with each score, and the digest of
-- the reranked result, so a replay reports the fusion and the rerank layer apart.
-- NULL: the search or the answer was not reranked.
ALTER TABLE ranklock.query_log ADD COLUMN rerank jsonb;
ALTER TABLE ranklock.answer_log ADD COLUMN rerank jsonb;
