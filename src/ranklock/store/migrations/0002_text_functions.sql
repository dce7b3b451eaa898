-- Text-search helpers shared by the index builder and the query side, so a
-- document and a query are always analysed by the same function.
--
-- public.unaccent(text) is only STABLE (it looks its dictionary up through
-- search_path); naming the dictionary explicitly makes the result depend on
-- the arguments alone, which is what IMMUTABLE promises.
CREATE OR REPLACE FUNCTION ranklock.fold_accents(accent text, txt text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT CASE WHEN accent = 'insensitive'
                THEN public.unaccent('public.unaccent'::regdictionary, txt)
                ELSE txt END
$$;

CREATE OR REPLACE FUNCTION ranklock.doc_tsvector(cfg regconfig, accent text, txt text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT to_tsvector(cfg, ranklock.fold_accents(accent, txt))
$$;

-- A natural-language question matches by OR of its terms: plainto_tsquery
-- already drops stop words and stems; its AND operators become OR.
CREATE OR REPLACE FUNCTION ranklock.query_tsquery(cfg regconfig, accent text, syntax text, q text)
RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT CASE WHEN syntax = 'websearch'
                THEN websearch_to_tsquery(cfg, ranklock.fold_accents(accent, q))
                ELSE replace(plainto_tsquery(cfg, ranklock.fold_accents(accent, q))::text, ' & ', ' | ')::tsquery
           END
$$;
