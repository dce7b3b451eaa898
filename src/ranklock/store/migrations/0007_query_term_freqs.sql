-- Query-term frequency (issue 22): BM25 rule "bm25/2" sums a query term once
-- per occurrence, as Lucene (a repeated SHOULD clause becomes a boost of its
-- count), Elasticsearch and bm25s do, and as Robertson's BM25 does with its
-- k3 -> infinity (the query-term factor (k3 + 1) qtf / (k3 + qtf) -> qtf).
--
-- A query is analysed exactly as a document is (ranklock.doc_tsvector), so a
-- query term's frequency is counted the way a chunk's tf is: the number of
-- positions of its lexeme.  websearch queries count their positive terms.
-- Lexemes come sorted bytewise, like ranklock.query_terms, which lists the
-- same lexemes.
CREATE OR REPLACE FUNCTION ranklock.query_term_freqs(cfg regconfig, accent text, syntax text, q text)
RETURNS TABLE (lexeme text, qtf integer) LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT ROWS 16 AS $$
    SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)
    FROM unnest(ranklock.doc_tsvector(
             cfg, accent,
             CASE WHEN syntax = 'websearch' THEN ranklock.websearch_positive_text(q) ELSE q END)) AS u
    ORDER BY u.lexeme COLLATE "C"
$$;
