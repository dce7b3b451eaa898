"""BM25 in plain PostgreSQL: the lexical branch's default ranker.

    score(chunk, q) = sum over distinct query terms t present in the chunk of
        idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

(Robertson/Sparck Jones idf with +1 inside the log, as Lucene and bm25s do,
so a term in more than half the chunks still scores a little instead of
negatively.)  ``tf`` and ``len`` count the positions of the chunk's
tsvector, ``N``, ``df`` and ``avglen`` come from the snapshot's statistics
(ranklock.snapshot.lexical_stats), fixed when the snapshot was built.

A chunk's score is always computed the same way, from its own tsvector, in
float8; what differs between the two plans below is only which chunks get
scored, so both return identical scores for the chunks they return.

*Impact plan* (natural queries under the snapshot's k1 and b).  Exact top-k
without scoring every chunk that holds a frequent word, in one statement:

1. ``seed``: the top postings of each query term by impact (the term's
   precomputed weight in the chunk); those chunks are scored and filtered,
   and the ``depth``-th best document score is a lower bound ``theta`` of
   the score the last document of the branch will have.
2. Terms sorted by their largest weight: the longest prefix whose maxima sum
   below ``theta`` is *non-essential* (MaxScore): a chunk holding only those
   terms cannot reach ``theta``.  The rest of ``theta`` is shared among the
   ``n`` essential terms: a chunk that can reach ``theta`` has, for at least
   one essential term, a weight >= (theta - non-essential sum) / n.
3. Candidates are the postings above that share, read from the impact index
   (term_id, w DESC) in one range scan per term; they are scored, filtered,
   and every document that can be in the top ``depth`` is among them with its
   best chunk.  Weights are stored as float4, so the share is lowered by a
   margin far above float4 rounding: the candidate set can only grow.

When the query's terms are rare (their postings sum to at most
``FULL_SCAN_POSTINGS``) step 1 is skipped: theta = 0 makes every posting a
candidate, which is then cheaper than seeding.

*Match plan* (websearch syntax, or k1/b other than the snapshot's): every
chunk matching the tsquery (GIN index) is scored.  Websearch decides the
match with its phrases and exclusions; the score uses its positive terms.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..errors import SnapshotError
from ..snapshot.lexical_stats import BM25_STATS_VERSION, postings_table, terms_table

if TYPE_CHECKING:
    from .hybrid import SearchPlan

__all__ = ["FULL_SCAN_POSTINGS", "SCORE_COST_RATIO", "SEED_PER_TERM", "bm25_hits_sql", "prepare_bm25"]

#: Below this many postings for all query terms together, score them all.
FULL_SCAN_POSTINGS = 20000
#: Scoring a chunk from its tsvector costs about this many summed postings (measured on
#: large100k: ~30 us a candidate against ~1.5 us a posting); decides sum-all vs prune.
SCORE_COST_RATIO = 20
#: Postings per query term read, in impact order, to bound theta.
SEED_PER_TERM = 100

BM25Builder = Callable[["SearchPlan", sql.Composable], sql.Composable]


def prepare_bm25(plan: SearchPlan, snapshot_id: int, stats: dict[str, Any]) -> None:
    """Point ``plan`` at the snapshot's BM25 statistics, or say why it has none."""
    entry = (stats or {}).get("bm25")
    if not entry or entry.get("version") != BM25_STATS_VERSION:
        raise SnapshotError(
            f"snapshot {snapshot_id} has no BM25 statistics (it was built before ranklock scored with BM25); "
            f"compute them once with `ranklock.snapshot.lexical_stats.build_lexical_stats(engine.db, {snapshot_id})`, "
            "re-ingest, or search with lexical_ranker='ts_rank_cd'."
        )
    impact = plan.syntax == "natural" and plan.k1 == entry["k1"] and plan.b == entry["b"]
    plan.lexical_params.update(
        {
            "bm25_avgdl": float(entry["avgdl"]) or 1.0,
            "bm25_seed": SEED_PER_TERM,
            "bm25_full": FULL_SCAN_POSTINGS,
            "bm25_ratio": SCORE_COST_RATIO,
            "bm25_max_chunks": max(1, int(stats.get("max_chunks_per_doc", 1) or 1)),
        }
    )
    builder: BM25Builder = partial(bm25_hits_sql, snapshot_id=snapshot_id, impact=impact)
    plan.bm25_sql = builder


def _query_terms(terms: sql.Composable) -> sql.Composable:
    return sql.SQL(
        "SELECT t.term_id, t.lexeme, t.df, t.idf, t.max_w::float8 * 1.000001 AS max_w FROM {terms} AS t "
        "WHERE t.lexeme = ANY (ranklock.query_terms(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s))"
    ).format(terms=terms)


def _score(alias: str = "c") -> sql.Composable:
    """The BM25 score of chunk ``alias`` from its tsvector, over the terms in CTE ``qt``."""
    return sql.SQL(
        "(SELECT coalesce(sum(qt.idf * x.tf * (%(k1)s::float8 + 1) / (x.tf + %(k1)s::float8 * "
        "(1 - %(b)s::float8 + %(b)s::float8 * {a}.doc_len / %(bm25_avgdl)s::float8))), 0)::float8 "
        "FROM unnest({a}.tsv) AS u JOIN qt ON qt.lexeme = u.lexeme "
        "CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) AS x)"
    ).format(a=sql.Identifier(alias))


def bm25_hits_sql(plan: SearchPlan, where: sql.Composable, *, snapshot_id: int, impact: bool) -> sql.Composable:
    """Rows (doc_id, chunk, score) of the chunks that can make the lexical top ``depth``."""
    terms, postings = terms_table(snapshot_id), postings_table(snapshot_id)
    if not impact:
        from .lexical import tsquery_sql

        return sql.SQL(
            "WITH qt AS MATERIALIZED ({qt}) "
            "SELECT c.doc_id, c.chunk, {score} AS score FROM {table} AS c "
            "WHERE c.tsv @@ {tsq} AND {where}"
        ).format(qt=_query_terms(terms), score=_score(), table=plan.table, tsq=tsquery_sql(), where=where)
    return sql.SQL(
        """WITH qt AS MATERIALIZED ({qt}),
seed AS MATERIALIZED (
    SELECT DISTINCT s.row_id FROM qt CROSS JOIN LATERAL (
        SELECT p.row_id FROM {postings} AS p WHERE p.term_id = qt.term_id
        ORDER BY p.w DESC, p.row_id LIMIT %(bm25_seed)s) AS s
),
seed_docs AS (
    SELECT c.doc_id, max({score}) AS best FROM seed JOIN {table} AS c ON c.row_id = seed.row_id
    WHERE {where} GROUP BY c.doc_id
),
theta AS MATERIALIZED (
    SELECT coalesce((SELECT best FROM seed_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s - 1)), 0) AS theta
),
ordered AS MATERIALIZED (
    SELECT qt.term_id, sum(qt.max_w) OVER (ORDER BY qt.max_w, qt.term_id) AS cum FROM qt
),
share AS MATERIALIZED (
    SELECT th.theta,
           coalesce(max(o.cum) FILTER (WHERE o.cum < th.theta), 0) AS nonessential,
           count(*) FILTER (WHERE o.cum >= th.theta) AS n
    FROM theta AS th CROSS JOIN ordered AS o GROUP BY th.theta
),
cand AS MATERIALIZED (
    SELECT DISTINCT e.row_id
    FROM ordered AS o CROSS JOIN share AS s
    CROSS JOIN LATERAL (
        SELECT p.row_id FROM {postings} AS p
        WHERE p.term_id = o.term_id
          AND p.w >= (s.theta - s.nonessential) / greatest(s.n, 1) - 1e-5 * s.theta
    ) AS e
    WHERE o.cum >= s.theta
),
gate AS MATERIALIZED (
    -- Summing every posting of the query's terms costs about 1/%(bm25_ratio)s of
    -- scoring one candidate from its tsvector: sum when that is cheaper.
    SELECT CASE WHEN t.postings <= %(bm25_full)s THEN true
                ELSE t.postings <= %(bm25_ratio)s * (SELECT count(*) FROM cand) END AS full_scan
    FROM (SELECT coalesce(sum(df), 0) AS postings FROM qt) AS t
),
summed AS MATERIALIZED (
    SELECT p.row_id, sum(p.w) AS score FROM qt JOIN {postings} AS p ON p.term_id = qt.term_id
    WHERE (SELECT full_scan FROM gate) GROUP BY p.row_id
),
full_top AS (
    -- Chunks in branch order, fetched one by one until enough pass the
    -- filter: the top depth * max_chunks_per_doc chunks hold the best chunk
    -- of every top-depth document.  row_id order is (doc_id, chunk) order
    -- (the builder numbers rows so), so ties break exactly as in the branch.
    SELECT c.doc_id, c.chunk, s.score
    FROM (SELECT row_id, score FROM summed ORDER BY score DESC, row_id) AS s
    JOIN {table} AS c ON c.row_id = s.row_id
    WHERE {where}
    ORDER BY s.score DESC, s.row_id
    LIMIT %(depth)s * %(bm25_max_chunks)s
)
SELECT doc_id, chunk, score FROM full_top WHERE (SELECT full_scan FROM gate)
UNION ALL
SELECT c.doc_id, c.chunk, {score} AS score FROM cand JOIN {table} AS c ON c.row_id = cand.row_id
WHERE NOT (SELECT full_scan FROM gate) AND {where}"""
    ).format(qt=_query_terms(terms), postings=postings, table=plan.table, score=_score(), where=where)
