"""BM25 in plain PostgreSQL: the lexical branch's default ranker.

    score(chunk, q) = sum over distinct query terms t present in the chunk of
        qtf(t) * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

``qtf(t)`` is how many times the query holds t (rule ``bm25/2``; 1 for
snapshots built under ``bm25/1``, see ranklock.snapshot.rules): the weight
``w = idf * tf-part`` is stored once per posting, and every plan adds
``qtf * w``, so a repeated term is summed once per occurrence, as in Lucene.

(Robertson/Sparck Jones idf with +1 inside the log, as Lucene and bm25s do,
so a term in more than half the chunks still scores a little instead of
negatively.)  ``tf`` and ``len`` count the positions of the chunk's
tsvector, ``N``, ``df`` and ``avglen`` come from the snapshot's statistics
(ranklock.snapshot.lexical_stats), fixed when the snapshot was built.

Weights are float8, computed by one expression (by the builder for the
postings and the forward table, by the query for a chunk's tsvector), and a
score is their float8 sum in one fixed order, ascending term id: every plan
adds the same weights in the same order, so every plan gives the same last
bit and the plans differ only in which chunks they score.  (The sum was
numeric until issue 14: exact in any order, but a float8-to-numeric
conversion costs ~0.7 us a term, three quarters of scoring a chunk.)

Natural queries under the snapshot's k1 and b take one of four plans, chosen
before the statement is built from the number of postings of the query's
terms (:func:`query_postings_sql`):

*Full sum* (at most ``FULL_SCAN_POSTINGS`` postings): every posting is
summed as float8 (fast; its last bit depends on the order rows arrive in),
the float top ``depth * max_chunks_per_doc`` chunks passing the filter, and
anything within 1e-9 of the last of them, are summed again in term order.

*Impact plan* (more postings), exact top ``depth`` documents in one
statement.  A chunk's exact score is read from the forward table (one index
probe); a term's postings are read in decreasing weight from the impact
index.

1. ``theta``, a lower bound of the score of the branch's last document: the
   top ``SEED_PER_TERM`` postings of each term are scored exactly and
   filtered; the ``depth``-th best document is theta.  (Fewer than ``depth``
   documents among them pass the filter: theta = 0 and the plan falls back
   to the full sum.)
2. Read depths.  If every term t is read down to a weight f_t and the f_t sum
   to at most theta, a chunk never read scores below theta (all its weights
   are below their f_t): it cannot make the top.  The terms' impact
   quantiles (``wq``, from the snapshot) give f_t for "the top
   ``LEVEL_BASE * 2^i`` postings" before reading anything.  The cheapest
   choice is taken among: the ``j`` terms of smallest maximum weight left
   unread (f_t = max weight, MaxScore's non-essential terms) and the others
   read to level ``i``.  Then one level deeper (reading is cheap, probing is
   not), and the unread terms shallowly (``SKIP_LEVEL``), which only lowers
   the f_t.
3. Every chunk read gets an upper bound: its weights read plus f_t for each
   term it was not seen in.  Those below theta go.  The ``PROBE`` chunks of
   highest bound are scored exactly, which raises theta (usually to near
   the true last score) and the bound cut is applied again.
4. The rest are scored exactly from the forward table.

Margins (1e-9 relative on theta, 1e-6 on maximum weights) only ever keep
more chunks, so float rounding in the bounds cannot drop a document.

*Dense plan* (issue 14: queries of frequent words at a million chunks, where
no impact bound falls below theta and ~400k chunks were scored one by one).
Taken instead of the impact plan when the snapshot has dense blocks
(ranklock.snapshot.lexical_stats: the weights of every term in at least
1/64 of the chunks as float4 pgvector blocks of 16,000 row ids), 1 to
``DENSE_MAX_TERMS`` query terms have them (D) and the others (R) have at
most ``DENSE_REST_POSTINGS`` postings.  theta as above (seeds: a budget of
``DENSE_SEEDS`` shared by the terms).  Then every chunk gets a tight bound:
S(c), the float4 sum of its D weights (pgvector sums each block in C, ~1 ms
per term per million chunks), plus r(c), the exact sum of its R weights
(R's postings read whole).  Chunks in no R list are kept when S > the cut,
found as the set bits of ``binary_quantize(S - cut)`` and turned into row
ids only there; a chunk of R is looked up in S (its block cast to real[]
once).  S is only ever a bound, with a relative margin ``DENSE_REL`` (1e-5
covers the float4 rounding of up to 83 terms, see its comment) and an
absolute ``DENSE_ABS``: the ``DENSE_PROBE`` best bounds are scored exactly
to raise theta, and the survivors are scored exactly from the forward
table, as in the impact plan, so the top ``depth`` keeps the same bits.

*Admitted plan* (a hard constraint that admits few chunks).  With a filter
or ``as_of``, the impact and dense plans take theta from the seeds that pass
it; when fewer than ``depth`` documents among them do, theta is 0 and every
posting of the query's terms is summed (seconds for frequent words at a
million chunks, whatever the filter).  So when the constraint admits at most
``exact_threshold`` chunks (the setting that makes the vector branch scan a
small filtered set exactly), or so few that the seeds cannot bound theta, and
scoring those costs less than reading the postings (a chunk scored ~
``CHUNK_POSTINGS`` postings read), every admitted
chunk holding a query term is scored exactly from the forward table, and
nothing else is read (:func:`choose_admitted_plan`, once the completeness
count has counted them).

*Match plan* (websearch syntax, or k1/b other than the snapshot's): every
chunk matching the tsquery (GIN index) is scored.  Websearch decides the
match with its phrases and exclusions; the score uses its positive terms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from psycopg import sql

from ..errors import SnapshotError
from ..snapshot.lexical_stats import BM25_STATS_VERSION, dense_table, forward_table, postings_table, terms_table
from .tsquery import tsquery_sql

if TYPE_CHECKING:
    from .spec import SearchSpec

__all__ = [
    "CHUNK_POSTINGS",
    "DEEPER",
    "DENSE_ABS",
    "DENSE_MAX_TERMS",
    "DENSE_PROBE",
    "DENSE_REL",
    "DENSE_REST_POSTINGS",
    "DENSE_SEEDS",
    "FULL_SCAN_POSTINGS",
    "PROBE",
    "SEED_PER_TERM",
    "SKIP_LEVEL",
    "Bm25Plan",
    "LexicalQuery",
    "bm25_hits_sql",
    "choose_admitted_plan",
    "prepare_bm25",
    "query_postings_sql",
]

#: Below this many postings for all query terms together, score them all.
FULL_SCAN_POSTINGS = 20000
#: Postings per query term read, in impact order and scored exactly, to bound theta.
SEED_PER_TERM = 256
#: Chunks of highest upper bound scored exactly to raise theta before the bound cut.
PROBE = 1000
#: Levels read beyond the cheapest sufficient one: a posting read costs ~0.3 us,
#: a chunk probed ~3 us (1M-chunk collection), so reading deeper to prune more pays.
DEEPER = 1
#: Level the MaxScore-skipped terms are still read to (top LEVEL_BASE * 2^SKIP_LEVEL postings),
#: tightening the bound of every chunk not seen in them.
SKIP_LEVEL = 5
#: Dense plan: postings scored to bound theta, shared by the query's terms
#: (at least 32 each): a long query's 15 terms x 256 seeds cost more than
#: they prune, since the dense bounds are tight and probing does the rest.
DENSE_SEEDS = 1024
#: Dense plan: chunks of highest bound scored exactly to raise theta (its bounds are tight: few are needed).
DENSE_PROBE = 250
#: Dense plan: at most this many postings of the query's other (non-dense) terms, read whole.
DENSE_REST_POSTINGS = 200_000
#: Dense plan: relative margin on a float4 sum of dense contributions.  Each
#: weight rounded to float4, its product with the term's qtf and each float4
#: addition err by at most u = 2^-24 relative, all terms are >= 0, so the
#: float4 sum of T contributions is within about (3T + 1) u of their exact sum
#: (the +1: the cut itself rounded to float4): 2e-5 covers T <= 111.
DENSE_REL = 2e-5
#: Dense plan: absolute margin (float4 underflow of tiny weights).
DENSE_ABS = 1e-6
#: Dense plan: at most this many dense terms in a query (DENSE_REL's limit, with room); more take the impact plan.
DENSE_MAX_TERMS = 64
#: Admitted plan: scoring one chunk from the forward table costs about this many postings read
#: (~3 us against ~0.3 us at 1M chunks); the plan is taken only when it reads less.
CHUNK_POSTINGS = 10


class LexicalQuery(Protocol):
    """What BM25's plan choice reads of the lexical branch (ranklock.search.lexical.LexicalBranch)."""

    @property
    def query(self) -> str: ...
    @property
    def language(self) -> str: ...
    @property
    def accent(self) -> str: ...
    @property
    def syntax(self) -> str: ...
    @property
    def ranker(self) -> str: ...
    @property
    def k1(self) -> float: ...
    @property
    def b(self) -> float: ...


@dataclass(frozen=True)
class Bm25Plan:
    """How the lexical branch runs BM25 on one snapshot: which plan, with which bound statistics.

    ``strategy`` is the plan (``full``, ``impact``, ``dense``, ``admitted``), or
    None for the match plan (websearch syntax, or k1/b other than the
    snapshot's); ``params`` are the values its SQL binds (``bm25_plan`` among
    them, so ``search_sql`` shows the plan).
    """

    snapshot_id: int
    #: The query is scored from the snapshot's postings and forward table (natural syntax, the snapshot's k1 and b).
    impact: bool
    params: Mapping[str, Any]

    @property
    def strategy(self) -> str | None:
        got = self.params.get("bm25_plan")
        return None if got is None else str(got)


def _impact_eligible(lex: LexicalQuery, entry: dict[str, Any]) -> bool:
    return lex.syntax == "natural" and lex.k1 == entry["k1"] and lex.b == entry["b"]


def query_postings_sql(lex: LexicalQuery, snapshot_id: int, stats: dict[str, Any]) -> tuple[sql.Composable, list[Any]]:
    """An expression of the query's postings counts, and its values; NULL when not needed.

    The expression is a bigint[]: the postings of all the query's terms, those
    of its terms without dense blocks, and how many of its terms have dense
    blocks (0 when the snapshot has none).  Only natural BM25 queries under
    the snapshot's k1 and b choose a plan on them (see :func:`prepare_bm25`).
    """
    entry = (stats or {}).get("bm25")
    if lex.ranker != "bm25" or not entry or entry.get("version") != BM25_STATS_VERSION:
        return sql.SQL("NULL::bigint[]"), []
    if not _impact_eligible(lex, entry):
        return sql.SQL("NULL::bigint[]"), []
    # A df no term reaches when the snapshot has no dense blocks.
    min_df = int(entry["dense"]["min_df"]) if entry.get("dense") else 2**31 - 1
    return sql.SQL(
        "(SELECT ARRAY[coalesce(sum(df), 0), coalesce(sum(df) FILTER (WHERE df < %s::int), 0), "
        "count(*) FILTER (WHERE df >= %s::int)]::bigint[] "
        "FROM {} WHERE lexeme = ANY (ranklock.query_terms(%s::regconfig, %s, %s, %s)))"
    ).format(terms_table(snapshot_id)), [min_df, min_df, lex.language, lex.accent, lex.syntax, lex.query]


def prepare_bm25(
    lex: LexicalQuery,
    snapshot_id: int,
    stats: dict[str, Any],
    postings: int | Sequence[int] | None,
    *,
    collection: str = "COLLECTION",
) -> Bm25Plan:
    """The BM25 plan of ``lex`` on the snapshot's statistics, or an error saying why it has none.

    Natural queries under the snapshot's k1 and b take the impact plan when
    their terms have more than ``FULL_SCAN_POSTINGS`` postings together
    (``postings``, counted by :func:`query_postings_sql`: that count alone, or
    [all, those of terms without dense blocks, dense terms]), the dense plan
    when, moreover, the snapshot has dense blocks, 1 to ``DENSE_MAX_TERMS``
    query terms have them and the others have at most
    ``DENSE_REST_POSTINGS`` postings, and the plain sum of every posting
    otherwise: the statement carries only the plan it runs.
    """
    entry = (stats or {}).get("bm25")
    if not entry or entry.get("version") != BM25_STATS_VERSION:
        raise SnapshotError(
            f"snapshot {snapshot_id} has no BM25 statistics of the current layout (version {BM25_STATS_VERSION}); "
            f"build them once with `ranklock snapshot lexical-stats {collection} {snapshot_id}` "
            f"(Python: engine.lexical_stats({collection!r}, {snapshot_id})), or search with lexical_ranker='ts_rank_cd'."
        )
    impact = _impact_eligible(lex, entry)
    counts = [postings] if isinstance(postings, int) else [int(x) for x in postings or [0]]
    total, rest, n_dense = counts[0], counts[1] if len(counts) > 1 else counts[0], counts[2] if len(counts) > 2 else 0
    dense = entry.get("dense")
    lp: dict[str, Any] = {}
    if impact:
        lp["bm25_postings"] = total
        lp["bm25_chunks"] = int(entry.get("N") or 0)
        if total <= FULL_SCAN_POSTINGS:
            lp["bm25_plan"] = "full"
        elif dense and 1 <= n_dense <= DENSE_MAX_TERMS and rest <= DENSE_REST_POSTINGS:
            lp["bm25_plan"] = "dense"
        else:
            lp["bm25_plan"] = "impact"
    lp.update(
        {
            "bm25_avgdl": float(entry["avgdl"]) or 1.0,
            "bm25_seed": SEED_PER_TERM,
            "bm25_full": FULL_SCAN_POSTINGS,
            "bm25_probe": PROBE,
            "bm25_deeper": DEEPER,
            "bm25_skip_level": SKIP_LEVEL,
            "bm25_level_base": int(entry["level_base"]),
            "bm25_max_chunks": max(1, int(stats.get("max_chunks_per_doc", 1) or 1)),
        }
    )
    if lp.get("bm25_plan") == "dense" and dense:
        lp.update(
            {
                "bm25_dense_seeds": DENSE_SEEDS,
                "bm25_probe": DENSE_PROBE,
                "bm25_dense_min_df": int(dense["min_df"]),
                "bm25_dense_block": int(dense["block"]),
                "bm25_dense_rest": DENSE_REST_POSTINGS,
                "bm25_dense_rel": DENSE_REL,
                "bm25_dense_abs": DENSE_ABS,
            }
        )
    return Bm25Plan(snapshot_id=snapshot_id, impact=impact, params=lp)


def choose_admitted_plan(spec: SearchSpec, bm25: Bm25Plan, admitted_chunks: int, exact_threshold: int) -> Bm25Plan:
    """Score the chunks a hard constraint admits instead of the query's postings, when they are few.

    Called once the completeness count knows ``admitted_chunks`` (before the
    statement is built, so ``search_sql`` shows the same plan).  Only the
    impact and dense plans are replaced, and only under a filter or ``as_of``,
    when scoring the admitted chunks reads less than the postings and either
    they are at most ``exact_threshold`` or the seeds are unlikely to bound
    theta: about ``DENSE_SEEDS * admitted / N`` seed chunks pass the
    constraint, and under ``2 * depth`` of them theta stays 0 or weak (at 1M
    chunks a 3 % filter took 3.3 s p50 that way).
    """
    lp = bm25.params
    if bm25.strategy not in ("impact", "dense") or _unfiltered(spec):
        return bm25
    if admitted_chunks * CHUNK_POSTINGS >= int(lp.get("bm25_postings") or 0):
        return bm25
    chunks = max(1, int(lp.get("bm25_chunks") or 1))
    if admitted_chunks <= exact_threshold or DENSE_SEEDS * admitted_chunks < 2 * spec.depth * chunks:
        return dataclasses.replace(bm25, params={**lp, "bm25_plan": "admitted"})
    return bm25


def _admitted_sql(
    spec: SearchSpec, where: sql.Composable, terms: sql.Composable, forward: sql.Composable
) -> sql.Composable:
    """The admitted plan: every chunk passing ``where`` that holds a query term, scored exactly."""
    return sql.SQL(
        """WITH qt AS MATERIALIZED ({qt}),
qids AS MATERIALIZED (SELECT array_agg(term_id ORDER BY term_id) AS ids, array_agg(qtf ORDER BY term_id) AS qtfs FROM qt),
admitted AS MATERIALIZED (SELECT c.row_id FROM {table} AS c WHERE {where}),
scored AS MATERIALIZED (
    -- = ANY of an array: one ordered pass over the forward table; && keeps the chunks holding a query term.
    SELECT f.row_id, {score} AS score FROM {forward} AS f
    WHERE f.row_id = ANY (ARRAY(SELECT a.row_id FROM admitted AS a)) AND f.tids && (SELECT ids FROM qids)
)
{top}"""
    ).format(
        qt=_query_terms(spec, terms),
        table=spec.table,
        where=where,
        score=_forward_score(),
        forward=forward,
        top=_top(spec, where),
    )


def _query_terms(spec: SearchSpec, terms: sql.Composable) -> sql.Composable:
    """CTE ``qt``: the query's terms with their statistics and ``qtf``, how often the query holds each.

    A term contributes ``qtf * w`` (rule bm25/2, ranklock.snapshot.rules; 1 under bm25/1), so
    ``max_w`` is the most a term adds to a chunk: its largest weight times ``qtf`` (with a margin),
    while ``wq``, the weight quantiles the impact plan reads postings to, stay weights.
    """
    if not spec.rules.query_tf:
        return sql.SQL(
            "SELECT t.term_id, t.lexeme, t.df, t.idf, 1 AS qtf, t.max_w::float8 * 1.000001 AS max_w, t.wq "
            "FROM {terms} AS t "
            "WHERE t.lexeme = ANY (ranklock.query_terms(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s))"
        ).format(terms=terms)
    return sql.SQL(
        "SELECT t.term_id, t.lexeme, t.df, t.idf, q.qtf, q.qtf * t.max_w::float8 * 1.000001 AS max_w, t.wq "
        "FROM {terms} AS t "
        "JOIN ranklock.query_term_freqs(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s) AS q ON q.lexeme = t.lexeme"
    ).format(terms=terms)


def _score(alias: str = "c") -> sql.Composable:
    """The BM25 score of chunk ``alias`` from its tsvector, over the terms in CTE ``qt``.

    Term contributions (``qtf * w``) are summed in ascending term id, the one
    order every plan uses, so the result does not depend on the order rows
    arrive in.
    """
    return sql.SQL(
        "(SELECT coalesce(sum(qt.qtf * (qt.idf * x.tf * (%(k1)s::float8 + 1) / (x.tf + %(k1)s::float8 * "
        "(1 - %(b)s::float8 + %(b)s::float8 * {a}.doc_len / %(bm25_avgdl)s::float8))) ORDER BY qt.term_id), 0) "
        "FROM unnest({a}.tsv) AS u JOIN qt ON qt.lexeme = u.lexeme "
        "CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) AS x)"
    ).format(a=sql.Identifier(alias))


def _forward_score(alias: str = "f") -> sql.Composable:
    """The BM25 score of forward-table row ``alias`` over the query's terms (CTE ``qids``).

    The same float8 weights as the postings, times the same ``qtf``, summed in
    the same (term id) order.
    """
    return sql.SQL(
        "(SELECT coalesce(sum(x.qtf * {a}.ws[array_position({a}.tids, x.tid)] ORDER BY x.tid), 0) "
        "FROM unnest((SELECT ids FROM qids), (SELECT qtfs FROM qids)) AS x(tid, qtf))"
    ).format(a=sql.Identifier(alias))


def _doc_best(spec: SearchSpec, rows: str, forward: sql.Composable, where: sql.Composable) -> sql.Composable:
    """(doc, best): each document's exact best score over the chunks in CTE ``rows`` passing ``where``."""
    if _unfiltered(spec):
        # doc_no orders like doc_id; no need to read the chunk rows.
        # = ANY of an array: one ordered pass over the forward table (see _summed_ctes).
        return sql.SQL(
            "SELECT f.doc_no AS doc, max({score}) AS best FROM {forward} AS f "
            "WHERE f.row_id = ANY (ARRAY(SELECT r.row_id FROM {rows} AS r)) GROUP BY f.doc_no"
        ).format(score=_forward_score(), rows=sql.Identifier(rows), forward=forward)
    return sql.SQL(
        "SELECT c.doc_id AS doc, max({score}) AS best FROM {forward} AS f "
        "JOIN {table} AS c ON c.row_id = f.row_id "
        "WHERE f.row_id = ANY (ARRAY(SELECT r.row_id FROM {rows} AS r)) AND {where} GROUP BY c.doc_id"
    ).format(score=_forward_score(), rows=sql.Identifier(rows), forward=forward, table=spec.table, where=where)


def _unfiltered(spec: SearchSpec) -> bool:
    return spec.as_of is None and spec.filter_sql == sql.SQL("TRUE")


def bm25_hits_sql(spec: SearchSpec, bm25: Bm25Plan, where: sql.Composable) -> sql.Composable:
    """Rows (doc_id, chunk, score) of the chunks that can make the lexical top ``depth``."""
    snapshot_id = bm25.snapshot_id
    terms, postings, forward = terms_table(snapshot_id), postings_table(snapshot_id), forward_table(snapshot_id)
    if not bm25.impact:
        return sql.SQL(
            "WITH qt AS MATERIALIZED ({qt}) "
            "SELECT c.doc_id, c.chunk, {score} AS score FROM {table} AS c "
            "WHERE c.tsv @@ {tsq} AND {where}"
        ).format(qt=_query_terms(spec, terms), score=_score(), table=spec.table, tsq=tsquery_sql(), where=where)
    # ``margin``: bounds are float sums; 1e-9 relative on theta dwarfs their rounding.
    if bm25.strategy == "full":
        # Few postings: sum them all; nothing to prune.
        return sql.SQL("WITH qt AS MATERIALIZED ({qt}),\n{summed}\n{top}").format(
            qt=_query_terms(spec, terms),
            summed=_summed_ctes(spec, where, postings, forward, when=sql.SQL("TRUE"), impact=False),
            top=_top(spec, where),
        )
    if bm25.strategy == "admitted":
        return _admitted_sql(spec, where, terms, forward)
    dense = bm25.strategy == "dense"
    middle = _dense_ctes(postings, dense_table(snapshot_id)) if dense else _impact_ctes(postings)
    seeds = (
        sql.SQL("greatest(32, %(bm25_dense_seeds)s::bigint / (SELECT count(*) FROM qt))")
        if dense
        else sql.SQL("%(bm25_seed)s::bigint")
    )
    return sql.SQL(
        """WITH qt AS MATERIALIZED ({qt}),
qids AS MATERIALIZED (SELECT array_agg(term_id ORDER BY term_id) AS ids, array_agg(qtf ORDER BY term_id) AS qtfs FROM qt),
seed AS MATERIALIZED (
    SELECT DISTINCT s.row_id FROM qt CROSS JOIN LATERAL (
        SELECT p.row_id FROM {postings} AS p WHERE p.term_id = qt.term_id
        ORDER BY p.w DESC, p.row_id LIMIT {seeds}) AS s
),
seed_docs AS MATERIALIZED ({seed_docs}),
theta AS MATERIALIZED (
    -- Fewer than depth seed documents pass the filter: theta = 0, every posting is summed.
    SELECT th.theta, th.theta - 1e-9 * (1 + th.theta) AS cut FROM (
        SELECT coalesce((SELECT best FROM seed_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s::bigint - 1)), 0)
               AS theta) AS th
),
{middle},
probe AS MATERIALIZED (SELECT row_id FROM cand ORDER BY bound DESC, row_id LIMIT %(bm25_probe)s::bigint),
probe_docs AS MATERIALIZED ({probe_docs}),
theta2 AS MATERIALIZED (
    SELECT th.theta - 1e-9 * (1 + th.theta) AS cut FROM (
        SELECT greatest((SELECT theta FROM theta),
                        coalesce((SELECT best FROM probe_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s::bigint - 1)), 0))
               AS theta) AS th
),
{summed}
{top}"""
    ).format(
        qt=_query_terms(spec, terms),
        postings=postings,
        seeds=seeds,
        middle=middle,
        seed_docs=_doc_best(spec, "seed", forward, where),
        probe_docs=_doc_best(spec, "probe", forward, where),
        summed=_summed_ctes(spec, where, postings, forward, when=sql.SQL("(SELECT theta FROM theta) = 0"), impact=True),
        top=_top(spec, where),
    )


def _impact_ctes(postings: sql.Composable) -> sql.Composable:
    """The impact plan's CTEs from read depths to ``cand`` (row_id, bound): steps 2 and 3 of the module docstring."""
    return sql.SQL(
        """ranked AS MATERIALIZED (
    SELECT qt.term_id, qt.df, qt.qtf, qt.max_w, qt.wq, row_number() OVER (ORDER BY qt.max_w, qt.term_id) AS pos FROM qt
),
opts AS (
    -- Terms 1..j (smallest maxima) unread, the others read to level i: the
    -- top base * 2^i postings, everything when the term has no more.  A term
    -- adds qtf times its weight, so its bound is qtf times the weight it is read to.
    SELECT j.j, i.i,
           sum(CASE WHEN r.pos <= j.j THEN r.max_w
                    WHEN r.df <= %(bm25_level_base)s::bigint * 2 ^ i.i THEN 0
                    ELSE r.qtf * r.wq[i.i + 1] END) AS fsum,
           sum(CASE WHEN r.pos <= j.j THEN 0 ELSE least(r.df, %(bm25_level_base)s::bigint * 2 ^ i.i) END) AS cost
    FROM generate_series(0, (SELECT count(*) FROM qt)::int) AS j(j)
    CROSS JOIN generate_series(0, (SELECT coalesce(max(cardinality(wq)), 0) FROM qt)) AS i(i)
    CROSS JOIN ranked AS r
    WHERE (SELECT theta FROM theta) > 0
    GROUP BY j.j, i.i
),
pick AS MATERIALIZED (
    SELECT b.j, least(b.i + %(bm25_deeper)s::int, (SELECT coalesce(max(cardinality(wq)), 0) FROM qt)) AS i
    FROM (SELECT o.j, o.i FROM opts AS o, theta AS th WHERE o.fsum <= th.cut OR o.fsum = 0
          ORDER BY o.cost, o.i, o.j DESC LIMIT 1) AS b
),
thr AS MATERIALIZED (
    -- f: every posting of the term with w >= f is read; one not read has w < f, and adds less than qtf * f.
    SELECT r.term_id, r.qtf, t.f, r.qtf * t.f AS fq
    FROM ranked AS r CROSS JOIN pick AS pk
    CROSS JOIN LATERAL (
        SELECT CASE WHEN r.pos <= pk.j THEN least(pk.i, %(bm25_skip_level)s::int) ELSE pk.i END AS lvl) AS l
    CROSS JOIN LATERAL (
        SELECT CASE WHEN r.df <= %(bm25_level_base)s::bigint * 2 ^ l.lvl THEN 0::float8 ELSE r.wq[l.lvl + 1] END AS f) AS t
),
cand AS MATERIALIZED (
    -- Upper bound of each chunk read: its contributions read, plus qtf * f for the terms it was not seen in.
    SELECT e.row_id, fs.fsum + sum(thr.qtf * e.w - thr.fq) AS bound
    FROM thr CROSS JOIN LATERAL (
        SELECT p.row_id, p.w FROM {postings} AS p WHERE p.term_id = thr.term_id AND p.w >= thr.f) AS e
    CROSS JOIN (SELECT sum(fq) AS fsum FROM thr) AS fs
    GROUP BY e.row_id, fs.fsum
    HAVING fs.fsum + sum(thr.qtf * e.w - thr.fq) >= (SELECT cut FROM theta)
)"""
    ).format(postings=postings)


def _dense_ctes(postings: sql.Composable, dense: sql.Composable) -> sql.Composable:
    """The dense plan's CTEs: ``cand`` (row_id, bound) from the dense terms' summed blocks and the others' postings.

    A chunk's bound is r + S * (1 + DENSE_REL) + DENSE_ABS: r the float8 sum
    of its weights of the other terms (their postings read whole), S the
    float4 sum of its dense terms' weights (0 where a block has no row).
    A chunk without a posting of the other terms is kept when S exceeds the
    cut brought to S's scale, found as bits by binary_quantize without
    leaving C; only the set bits' positions are turned into row ids.  A
    chunk of the other terms is looked up in S only when r plus the dense
    terms' maximum weights reaches the cut.
    """
    return sql.SQL(
        """blocks AS MATERIALIZED (
    -- S per block of row ids, summed by pgvector (float4); a term the query repeats, times its qtf.
    SELECT d.blk, sum(CASE WHEN qt.qtf = 1 THEN d.v
                           ELSE d.v * array_fill(qt.qtf::real, ARRAY[vector_dims(d.v)])::vector END) AS s
    FROM {dense} AS d JOIN qt ON qt.term_id = d.term_id
    WHERE qt.df >= %(bm25_dense_min_df)s::int AND (SELECT theta FROM theta) > 0
    GROUP BY d.blk
),
dcut AS MATERIALIZED (
    -- cut: the theta cut brought to S's scale, (cut - abs) / (1 + rel) as float4, and as a
    -- vector; dmax: the dense terms' largest weights summed, above any chunk's dense part.
    SELECT dc.cut, array_fill(dc.cut, ARRAY[%(bm25_dense_block)s::int])::vector AS v,
           (SELECT coalesce(sum(qt.max_w), 0) FROM qt WHERE qt.df >= %(bm25_dense_min_df)s::int) AS dmax
    FROM (SELECT ((th.cut - %(bm25_dense_abs)s::float8) / (1 + %(bm25_dense_rel)s::float8))::real AS cut
          FROM theta AS th) AS dc
),
bq AS MATERIALIZED (
    -- Bit i of a block: S > cut, the bound of a chunk without other postings can reach
    -- theta.  The difference of two floats is positive exactly when the first is larger:
    -- no rounding hides a chunk here.
    SELECT b.blk, vector_dims(b.s) AS n,
           binary_quantize(b.s - CASE WHEN vector_dims(b.s) = %(bm25_dense_block)s::int THEN dc.v
                                      ELSE subvector(dc.v, 1, vector_dims(b.s)) END) AS bits
    FROM blocks AS b CROSS JOIN dcut AS dc
),
rest AS MATERIALIZED (
    -- The other terms' postings, read whole (the plan is chosen only when they are few).
    SELECT p.row_id, sum(qt.qtf * p.w) AS r FROM qt JOIN {postings} AS p ON p.term_id = qt.term_id
    WHERE qt.df < %(bm25_dense_min_df)s::int AND (SELECT theta FROM theta) > 0
    GROUP BY p.row_id
),
barr AS MATERIALIZED (
    -- S as real[] (subscripted below) and the bits as text, only for the blocks that need them:
    -- turning 16,000 floats into either costs ~0.1 ms a block.
    SELECT q.blk, q.n,
           CASE WHEN bit_count(q.bits) > 0 OR q.blk IN (
                    -- Blocks of the chunks of other terms whose bound can reach theta
                    -- even with every dense term at its maximum weight.
                    SELECT (r.row_id / %(bm25_dense_block)s::bigint)::int FROM rest AS r
                    WHERE r.r + (SELECT dmax FROM dcut) >= (SELECT cut FROM theta))
                THEN b.s::real[] END AS a,
           CASE WHEN bit_count(q.bits) > 0 THEN q.bits::text END AS bits
    FROM bq AS q JOIN blocks AS b ON b.blk = q.blk
),
hits AS (
    -- Positions of the set bits: the bit string split on '1', the pieces' lengths summed
    -- (octet_length: length() would count the UTF-8 characters of each piece).
    SELECT b.blk::bigint * %(bm25_dense_block)s::bigint + p.pos - 1 AS row_id, b.a[p.pos::int]::float8 AS s
    FROM barr AS b CROSS JOIN LATERAL (
        SELECT sum(octet_length(z.piece) + 1) OVER (ORDER BY z.k) AS pos
        FROM unnest(string_to_array(b.bits, '1')) WITH ORDINALITY AS z(piece, k)) AS p
    WHERE b.bits IS NOT NULL AND p.pos <= b.n
),
cand AS MATERIALIZED (
    -- A chunk both in rest and among the hits keeps its larger bound, rest's (r >= 0).
    SELECT x.row_id, max(x.bound) AS bound FROM (
        SELECT y.row_id, y.bound FROM (
            SELECT r.row_id,
                   r.r + coalesce(b.a[mod(r.row_id, %(bm25_dense_block)s::bigint)::int + 1], 0)::float8
                         * (1 + %(bm25_dense_rel)s::float8) + %(bm25_dense_abs)s::float8 AS bound
            FROM rest AS r LEFT JOIN barr AS b ON b.blk = (r.row_id / %(bm25_dense_block)s::bigint)::int
            WHERE r.r + (SELECT dmax FROM dcut) >= (SELECT cut FROM theta)) AS y
        WHERE y.bound >= (SELECT cut FROM theta)
        UNION ALL
        SELECT h.row_id, h.s * (1 + %(bm25_dense_rel)s::float8) + %(bm25_dense_abs)s::float8 FROM hits AS h
    ) AS x
    GROUP BY x.row_id
    HAVING max(x.bound) >= (SELECT cut FROM theta)
)"""
    ).format(dense=dense, postings=postings)


def _summed_ctes(
    spec: SearchSpec,
    where: sql.Composable,
    postings: sql.Composable,
    forward: sql.Composable,
    *,
    when: sql.Composable,
    impact: bool,
) -> sql.Composable:
    """CTEs ``summed``, ``summed_cut`` and ``scored``: every posting of the query's terms summed (when ``when``)."""
    impact_rows = (
        sql.SQL(
            # = ANY of an array: the index scan visits the survivors in row_id
            # order (one pass over the forward table) instead of one random
            # probe each, which the planner would pick for a CTE it thinks small.
            "SELECT f.row_id, {score} AS score FROM {forward} AS f "
            "WHERE f.row_id = ANY (ARRAY(SELECT cand.row_id FROM cand WHERE cand.bound >= (SELECT cut FROM theta2)))"
            "\n    UNION ALL\n    "
        ).format(score=_forward_score(), forward=forward)
        if impact
        else sql.SQL("")
    )
    unfiltered = _unfiltered(spec)
    return sql.SQL(
        """summed AS MATERIALIZED (
    -- Every chunk with a posting, its weights summed as float8 (fast, but
    -- the last bit depends on the order rows arrive in) ...
    SELECT p.row_id, sum(qt.qtf * p.w) AS s FROM qt JOIN {postings} AS p ON p.term_id = qt.term_id
    WHERE {when}
    GROUP BY p.row_id
),
summed_cut AS MATERIALIZED (
    -- ... so only the float top (and anything within the margin of its last)
    -- is scored exactly; no chunk outside can beat it.
    SELECT CASE WHEN count(*) < %(depth)s::bigint * %(bm25_max_chunks)s::bigint THEN '-Infinity'::float8
                ELSE min(s) - 1e-9 * (1 + abs(min(s))) END AS cut
    FROM ({summed_top}) AS t
),
scored AS MATERIALIZED (
    {impact_rows}-- Their postings summed again in term order: the same last bit as every other plan.
    SELECT p.row_id, sum(qt.qtf * p.w ORDER BY p.term_id) AS score FROM qt JOIN {postings} AS p ON p.term_id = qt.term_id
    WHERE p.row_id IN (SELECT summed.row_id FROM summed {summed_filter}
                       WHERE summed.s >= (SELECT cut FROM summed_cut) {summed_where})
    GROUP BY p.row_id
)"""
    ).format(
        postings=postings,
        when=when,
        summed_top=_summed_top(spec, where),
        impact_rows=impact_rows,
        # Filtered: only chunks passing it are worth scoring exactly.
        summed_filter=sql.SQL("")
        if unfiltered
        else sql.SQL("JOIN {} AS c ON c.row_id = summed.row_id").format(spec.table),
        summed_where=sql.SQL("") if unfiltered else sql.SQL("AND {}").format(where),
    )


def _summed_top(spec: SearchSpec, where: sql.Composable) -> sql.Composable:
    """The float sums of the top ``depth * max_chunks_per_doc`` summed chunks passing the filter."""
    if _unfiltered(spec):
        return sql.SQL("SELECT s FROM summed ORDER BY s DESC LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint")
    return sql.SQL(
        "SELECT m.s FROM summed AS m JOIN {table} AS c ON c.row_id = m.row_id WHERE {where} "
        "ORDER BY m.s DESC LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(table=spec.table, where=where)


def _top(spec: SearchSpec, where: sql.Composable) -> sql.Composable:
    """The top ``depth * max_chunks_per_doc`` scored chunks passing the filter.

    They hold the best chunk of every top-``depth`` document.  row_id order is
    (doc_id, chunk) order (the builder numbers rows so), so ties break as in
    the branch.
    """
    if _unfiltered(spec):
        # Nothing to filter: a top-N sort of the scores, then only those chunks are read.
        return sql.SQL(
            "SELECT c.doc_id, c.chunk, s.score FROM ("
            "SELECT row_id, score FROM scored ORDER BY score DESC, row_id LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
            ") AS s JOIN {table} AS c ON c.row_id = s.row_id"
        ).format(table=spec.table)
    # Chunks read in score order until enough pass the filter.
    return sql.SQL(
        "SELECT c.doc_id, c.chunk, s.score FROM (SELECT row_id, score FROM scored ORDER BY score DESC, row_id) AS s "
        "JOIN {table} AS c ON c.row_id = s.row_id WHERE {where} "
        "ORDER BY s.score DESC, s.row_id LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(table=spec.table, where=where)
