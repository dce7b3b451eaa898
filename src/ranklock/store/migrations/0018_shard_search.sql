-- Per-shard search on a Citus cluster (issue 46): query then fetch, as Elasticsearch does.
--
-- A sharded search sends one statement to the coordinator.  Its query phase is one Citus task per
-- shard (ranklock.shard_query, below): each runs the one-node plan once, on its shard's own tables,
-- with the snapshot's global statistics bound (ranklock.shard_search), and returns its top hits
-- with their segment, row id and score.  The coordinator merges them and fuses by the one-node SQL,
-- then fetches the text of the k hits it keeps by (segment, row id) (ranklock.shard_fetch): no
-- liveness check, since every hit was found live on its shard.  On a server without Citus these
-- functions are never called.
--
-- Why a statement travels as text: a task of a Citus query runs one function on each shard, and a
-- function cannot be handed a statement of its own.  So the coordinator composes the shard's
-- statement (ranklock.search.sharded, with psycopg.sql) with positional parameters ($1, $2, ...)
-- and sends their types and values beside it, bound; the worker prepares the statement with those
-- types and executes it with those values, which PostgreSQL's own input functions read (a float8
-- in its shortest exact text reads back to the same double).  No value is ever in the statement's
-- text: the only names the worker changes in it are the tables, each replaced by its shard's.

-- On a worker, inside one task: the statement run on the shard of ``anchor`` (a row's tableoid in
-- the task's own shard of a table co-located with the segments).  ``tables`` are the tables the
-- statement names, as psycopg writes them ("schema"."name"); each becomes this shard's relation
-- (a distributed table's co-located shard, a reference table's one shard).  Returns the shard's
-- hits as a JSON array.  Nothing here reads the clock (a test holds every ranking function to it):
-- bench/cluster.py times each shard's task with EXPLAIN ANALYZE.
CREATE FUNCTION ranklock.shard_search(anchor oid, tables text[], statement text, types regtype[], vals text[])
RETURNS jsonb
LANGUAGE plpgsql
AS $fn$
DECLARE
    -- Citus names every shard relation <table>_<shard id>.
    shard bigint := substring(anchor::regclass::text FROM '_([0-9]+)"?$')::bigint;
    low text;
    stmt text := statement;
    named text;
    rel regclass;
    placed bigint;
    hits jsonb;
BEGIN
    SELECT s.shardminvalue INTO low FROM pg_catalog.pg_dist_shard AS s WHERE s.shardid = shard;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ranklock: shard % of the search anchor % is not in this node''s Citus metadata',
            shard, anchor::regclass;
    END IF;
    FOREACH named IN ARRAY tables LOOP
        rel := to_regclass(named);
        CONTINUE WHEN rel IS NULL;
        -- Co-located shards cover the same hash range; a reference table has one shard, on every node.
        SELECT s.shardid INTO placed FROM pg_catalog.pg_dist_shard AS s
        WHERE s.logicalrelid = rel AND (s.shardminvalue IS NULL OR s.shardminvalue = low);
        IF placed IS NULL THEN
            RAISE EXCEPTION 'ranklock: table % has no shard beside shard % of %', named, shard, anchor::regclass;
        END IF;
        stmt := replace(stmt, named, shard_name(rel, placed));
    END LOOP;
    -- Prepared, so each value is read once, by its type's input function, and planned as a constant
    -- (the first executions of a prepared statement get a plan of their own values).  A statement
    -- left by a failed call on this pooled connection goes first.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements AS p WHERE p.name = 'ranklock_shard_search') THEN
        DEALLOCATE ranklock_shard_search;
    END IF;
    EXECUTE format(
        'PREPARE ranklock_shard_search (%s) AS SELECT coalesce(jsonb_agg(h), ''[]'') FROM (%s) AS h',
        (SELECT string_agg(u.t::text, ', ' ORDER BY u.i) FROM unnest(types) WITH ORDINALITY AS u(t, i)),
        stmt
    );
    EXECUTE format(
        'EXECUTE ranklock_shard_search (%s)',
        (SELECT string_agg(quote_nullable(u.v), ', ' ORDER BY u.i) FROM unnest(vals) WITH ORDINALITY AS u(v, i))
    ) INTO hits;
    DEALLOCATE ranklock_shard_search;
    RETURN hits;
END
$fn$;

-- On the coordinator: the query phase, one Citus task per shard.  ``anchors`` has one row on each
-- of the ``shards`` shards (ranklock.snapshot.shards), so each task runs ranklock.shard_search once.  A search routed
-- to one partition value (``route_key``) runs on the one shard holding it instead: the first row of
-- that value in ``route`` (a chunk table distributed by it), a query Citus routes to one node.  The
-- SQL is this function's own; only the table names are given, as regclass.  Called from a plain
-- statement of the coordinator, so Citus plans this query alone: no step of the merge becomes a
-- distributed subplan.
CREATE FUNCTION ranklock.shard_query(
    anchors regclass, route regclass, route_key text, shards integer,
    tables text[], statement text, types regtype[], vals text[]
)
RETURNS SETOF jsonb
LANGUAGE plpgsql
AS $fn$
DECLARE
    answered bigint;
BEGIN
    IF route IS NULL THEN
        RETURN QUERY EXECUTE format(
            'SELECT ranklock.shard_search(a.tableoid, $1, $2, $3, $4) FROM %s AS a', anchors
        ) USING tables, statement, types, vals;
    ELSE
        RETURN QUERY EXECUTE format(
            'SELECT ranklock.shard_search(t.tableoid, $1, $2, $3, $4) FROM ('
            'SELECT x.tableoid FROM %s AS x WHERE x.shard_key = $5 LIMIT 1) AS t', route
        ) USING tables, statement, types, vals, route_key;
    END IF;
    -- Every shard answers, or the search fails: never fewer hits than the snapshot holds.
    GET DIAGNOSTICS answered = ROW_COUNT;
    IF answered <> shards THEN
        RAISE EXCEPTION 'ranklock: % of the % shards of this search answered (its anchors are %)', answered, shards, anchors
            USING HINT = 'Write to the collection once (an ingest places the anchors again), then search again.';
    END IF;
END
$fn$;

-- On the coordinator: the fetch phase, the text of the hits kept, by (segment, row id).  Per segment
-- (``segs``, its chunk table in ``chunk_tables``, its distribution column in ``columns``, and for a
-- segment placed by its partition value that value in ``keys``, else NULL) one query Citus prunes to
-- the shards holding the hits.  Every hit must be found: a row gone since the query phase (a purge
-- in between) fails the search, which starts over, rather than return fewer hits.
CREATE FUNCTION ranklock.shard_fetch(
    chunk_tables regclass[], columns text[], keys text[], segs bigint[],
    hit_segs bigint[], hit_docs text[], hit_rows bigint[]
)
RETURNS TABLE (seg bigint, row_id bigint, char_start integer, char_end integer, text text)
LANGUAGE plpgsql
AS $fn$
DECLARE
    i integer;
    found_rows bigint;
    got bigint := 0;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(segs), 0) LOOP
        CONTINUE WHEN NOT (segs[i] = ANY (hit_segs));
        RETURN QUERY EXECUTE format(
            'SELECT $3::bigint, c.row_id, c.char_start, c.char_end, c.text FROM %s AS c '
            'WHERE c.%I = ANY ($1) AND c.row_id = ANY ($2)', chunk_tables[i], columns[i]
        ) USING
            CASE WHEN keys[i] IS NULL
                 THEN ARRAY(SELECT u.d FROM unnest(hit_segs, hit_docs) AS u(s, d) WHERE u.s = segs[i])
                 ELSE ARRAY[keys[i]] END,
            ARRAY(SELECT u.r FROM unnest(hit_segs, hit_rows) AS u(s, r) WHERE u.s = segs[i]),
            segs[i];
        GET DIAGNOSTICS found_rows = ROW_COUNT;
        got := got + found_rows;
    END LOOP;
    IF got <> coalesce(cardinality(hit_rows), 0) THEN
        RAISE EXCEPTION 'ranklock: % of the % hits of this search were deleted from their shards while it ran',
            coalesce(cardinality(hit_rows), 0) - got, coalesce(cardinality(hit_rows), 0)
            USING HINT = 'A purge ran at the same time; search again.';
    END IF;
END
$fn$;
