"""BM25 in plain PostgreSQL: the lexical branch's default ranker.

    score(chunk, q) = sum over distinct query terms t present in the chunk of
        idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

(Robertson/Sparck Jones idf with +1 inside the log, as Lucene and bm25s do,
so a term in more than half the chunks still scores a little instead of
negatively.)  ``tf`` and ``len`` count the positions of the chunk's
tsvector, ``N``, ``df`` and ``avglen`` come from the snapshot's statistics
(ranklock.snapshot.lexical_stats), fixed when the snapshot was built.

Scores are float8 and computed by one expression, either summed from the
postings (whose weights the builder computed with that same expression) or
from the chunk's own tsvector; the plans differ only in which chunks they
score, never in the ranking.

*Impact plan* (natural queries under the snapshot's k1 and b), exact top
``depth`` documents in one statement:

1. ``theta``: a lower bound of the score of the branch's last document.  When
   the query's postings are few (at most ``FULL_SCAN_POSTINGS``) theta = 0.
   Otherwise the top ``SEED_PER_TERM`` postings of each term by impact are
   scored and filtered, and the ``depth``-th best document score is theta.
2. MaxScore: terms sorted by their largest weight; the longest prefix whose
   maxima sum below theta is *non-essential* (a chunk holding only those
   cannot reach theta).  The rest of theta is shared among the ``n``
   essential terms: a chunk that can reach theta has, for at least one
   essential term, a weight >= (theta - non-essential sum) / n.  ``cand`` is
   those postings, one index range scan per term on (term_id, w DESC).
3. The candidates are scored either by summing every query term's postings
   over them (cheap per posting, and a top-N sort then reads only the chunks
   it needs) or from their tsvectors (cheap when candidates are few), which
   ever the gate estimates cheaper (``SCORE_COST_RATIO``).  The margins on
   theta (1e-5 relative, maxima inflated by 1e-6) only ever grow the
   candidate set, so float rounding cannot drop a document.

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
#: the 1M-chunk collection: ~27 us a candidate against ~0.5 us a posting); decides
#: between summing postings and scoring tsvectors.
SCORE_COST_RATIO = 50
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
    """The BM25 score of chunk ``alias`` from its tsvector, over the terms in CTE ``qt``.

    Term contributions are summed as numeric, which is exact: the result does
    not depend on the order the terms are visited in.
    """
    return sql.SQL(
        "(SELECT coalesce(sum((qt.idf * x.tf * (%(k1)s::float8 + 1) / (x.tf + %(k1)s::float8 * "
        "(1 - %(b)s::float8 + %(b)s::float8 * {a}.doc_len / %(bm25_avgdl)s::float8)))::numeric), 0)::float8 "
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
    -- Few postings: no seeding, theta = 0 makes every chunk with a posting a candidate.
    SELECT CASE WHEN (SELECT coalesce(sum(df), 0) FROM qt) <= %(bm25_full)s THEN 0::float8
                ELSE coalesce((SELECT best FROM seed_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s - 1)), 0)
           END AS theta
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
    -- Every chunk that can reach theta is in cand (all chunks with a posting
    -- when theta = 0); summing the weights of all query terms over those
    -- chunks gives their exact scores without touching their tsvectors.
    -- Summed as numeric: exact, so the order rows arrive in (hash join,
    -- parallel workers) cannot change the last bit of a score.
    SELECT p.row_id, sum(p.w::numeric)::float8 AS score FROM qt JOIN {postings} AS p ON p.term_id = qt.term_id
    WHERE (SELECT full_scan FROM gate)
      AND CASE WHEN (SELECT theta FROM theta) = 0 THEN true ELSE p.row_id IN (SELECT row_id FROM cand) END
    GROUP BY p.row_id
),
full_top AS (
    -- The top depth * max_chunks_per_doc chunks passing the filter hold the
    -- best chunk of every top-depth document.  row_id order is (doc_id,
    -- chunk) order (the builder numbers rows so), so ties break as in the branch.
    {full_top}
)
SELECT doc_id, chunk, score FROM full_top WHERE (SELECT full_scan FROM gate)
UNION ALL
SELECT c.doc_id, c.chunk, {score} AS score FROM cand JOIN {table} AS c ON c.row_id = cand.row_id
WHERE NOT (SELECT full_scan FROM gate) AND {where}"""
    ).format(
        qt=_query_terms(terms),
        postings=postings,
        table=plan.table,
        score=_score(),
        where=where,
        full_top=_full_top(plan, where),
    )


def _full_top(plan: SearchPlan, where: sql.Composable) -> sql.Composable:
    if plan.as_of is None and plan.filter_sql == sql.SQL("TRUE"):
        # Nothing to filter: a top-N sort of the sums, then only those chunks are read.
        return sql.SQL(
            "SELECT c.doc_id, c.chunk, s.score FROM ("
            "SELECT row_id, score FROM summed ORDER BY score DESC, row_id LIMIT %(depth)s * %(bm25_max_chunks)s"
            ") AS s JOIN {table} AS c ON c.row_id = s.row_id"
        ).format(table=plan.table)
    # Chunks read in score order until enough pass the filter.
    return sql.SQL(
        "SELECT c.doc_id, c.chunk, s.score FROM (SELECT row_id, score FROM summed ORDER BY score DESC, row_id) AS s "
        "JOIN {table} AS c ON c.row_id = s.row_id WHERE {where} "
        "ORDER BY s.score DESC, s.row_id LIMIT %(depth)s * %(bm25_max_chunks)s"
    ).format(table=plan.table, where=where)
