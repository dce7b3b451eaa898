-- Text analysis version 2 (TOKENIZER_VERSION "pg-ts/2"): exact identifiers
-- and the query-term list BM25 scores over.
--
-- PostgreSQL's default parser splits part numbers and codes: `XJ-900`
-- becomes `xj` + `-900` (a signed integer) and `4711-B` becomes `4711` + `b`,
-- so a query for one code matches every code sharing a piece.  An extra pass
-- finds identifier-shaped tokens in the raw text and adds each, lower-cased
-- and whole, as one more lexeme.  The parser's pieces stay in the tsvector,
-- so a search for `xj` still finds `XJ-900`; the whole token only adds a
-- rarer, exact match.  Documents and queries go through the same functions.

-- Identifier-shaped tokens, lower-cased, in text order, repeats kept (their
-- count is the term frequency).  A token is letters/digits joined by . - _ /
-- + @ : and must contain a digit or an @, so ordinary hyphenated words
-- ("well-known") are left to the parser, which keeps them whole already.
CREATE OR REPLACE FUNCTION ranklock.ident_tokens(accent text, txt text)
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT coalesce(array_agg(m.tok ORDER BY m.n), '{}')
    FROM (
        SELECT lower(r[1]) AS tok, n
        FROM regexp_matches(ranklock.fold_accents(accent, txt),
                            '([[:alnum:]]+(?:[-._/+@:][[:alnum:]]+)+)', 'g') WITH ORDINALITY AS x(r, n)
    ) AS m
    WHERE m.tok ~ '[0-9@]'
$$;

-- A tsvector holding each identifier not already a lexeme of `base`, with
-- one position per occurrence (positions are ordinals: identifiers take
-- part in term statistics, not in phrase matching, which uses the parser's
-- pieces).  The tokens hold only letters, digits and . - _ / + @ :, so
-- quoting them for the tsvector literal needs no escaping.
CREATE OR REPLACE FUNCTION ranklock.ident_tsvector(base tsvector, accent text, txt text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT coalesce(string_agg('''' || t.tok || ''':' || least(t.n, 16383), ' ' ORDER BY t.n), '')::tsvector
    FROM unnest(ranklock.ident_tokens(accent, txt)) WITH ORDINALITY AS t(tok, n)
    WHERE NOT (t.tok = ANY (tsvector_to_array(base)))
$$;

CREATE OR REPLACE FUNCTION ranklock.doc_tsvector(cfg regconfig, accent text, txt text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT b.v || ranklock.ident_tsvector(b.v, accent, txt)
    FROM (SELECT to_tsvector(cfg, ranklock.fold_accents(accent, txt)) AS v) AS b
$$;

-- The text of a websearch query without its exclusions (-word, -"a phrase")
-- and its OR keywords: what is left are the terms a match is scored on.
CREATE OR REPLACE FUNCTION ranklock.websearch_positive_text(q text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT regexp_replace(
               regexp_replace(q, '(^|\s)-("[^"]*("|$)|\S+)', ' ', 'g'),
               '(^|\s)or(\s|$)', ' ', 'gi')
$$;

-- The distinct lexemes a query is scored on, sorted bytewise so the list
-- (and any SQL built from it) is the same on every server.  They come from
-- the very function that analyses documents, so a query term and a document
-- term can only be equal when both were analysed alike.
CREATE OR REPLACE FUNCTION ranklock.query_terms(cfg regconfig, accent text, syntax text, q text)
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT coalesce(array_agg(l ORDER BY l COLLATE "C"), '{}')
    FROM unnest(tsvector_to_array(ranklock.doc_tsvector(
             cfg, accent,
             CASE WHEN syntax = 'websearch' THEN ranklock.websearch_positive_text(q) ELSE q END))) AS l
$$;

-- OR of lexemes as a tsquery, built without re-parsing them: each lexeme is
-- quoted for tsquery input (quote and backslash escaped).  No lexemes gives
-- the empty tsquery, whose numnode is 0.
CREATE OR REPLACE FUNCTION ranklock.terms_tsquery(terms text[])
RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT coalesce(string_agg('''' || replace(replace(t, '\', '\\'), '''', '''''') || '''', ' | '
                               ORDER BY t COLLATE "C"), '')::tsquery
    FROM unnest(terms) AS t
$$;

-- natural: OR of the query's terms (stop words dropped, stemmed, exact
-- identifiers added).  websearch: PostgreSQL's websearch syntax ("quoted
-- phrases", -exclusion, OR); it decides which chunks match, and BM25 then
-- scores them on query_terms, the positive terms only.
CREATE OR REPLACE FUNCTION ranklock.query_tsquery(cfg regconfig, accent text, syntax text, q text)
RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT CASE WHEN syntax = 'websearch'
                THEN websearch_to_tsquery(cfg, ranklock.fold_accents(accent, q))
                ELSE ranklock.terms_tsquery(ranklock.query_terms(cfg, accent, syntax, q))
           END
$$;
