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
   top ``SEED_PER_TERM`` postings of each term (shared by the segments in
   proportion to their chunks) are scored exactly and filtered; the
   ``depth``-th best document is theta.  (Fewer than ``depth``
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
1/1024 of the chunks as pgvector sparsevec blocks of 16,000 row ids, each
made a dense float4 vector at query time), 1 to
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

*Under a hard constraint* (a filter or ``as_of``), once the completeness
count knows how many chunks it admits (:func:`choose_admitted_plan`), the
cheapest of three ways by an estimate in posting reads: the *admitted plan*
scores every admitted chunk holding a query term exactly from the forward
table, and reads nothing else; or the impact and dense plans prune as above
with their seeds read in impact order until enough pass the constraint, and
check it once for each row that can reach the top, in the admitted set listed
once (``bm25_admit = set``) or in one ordered pass of the rows read
(``probe``); nothing after a check checks again (:func:`_admits`).  Every
check reads the segments' narrow filter tables (ranklock.snapshot.filter_table)
where they have them.

*On shards* (a Citus cluster): few postings are summed on every shard (the
sharded plan); otherwise a global theta from every shard's seeds bounds the
impact or dense plan's candidates on every shard, in one statement
(:func:`_sharded_pruned_sql`).

*Match plan* (websearch syntax, or k1/b other than the snapshot's): every
chunk matching the tsquery (GIN index) is scored.  Websearch decides the
match with its phrases and exclusions; the score uses its positive terms.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from psycopg import sql

from ..errors import SnapshotError
from ..snapshot.lexical_stats import BM25_STATS_VERSION, terms_table, weight_sql
from ..snapshot.segments import Layout, dead_rows_sql, has_filter_tables, live_sql, union_sql
from ..store.tables import SegmentKind, segment_table
from .spec import where_sql
from .tsquery import tsquery_sql

if TYPE_CHECKING:
    from .spec import SearchSpec

__all__ = [
    "CHUNK_POSTINGS",
    "CONSTRAINED_WAYS",
    "DEEPER",
    "DENSE_ABS",
    "DENSE_MAX_TERMS",
    "DENSE_PROBE",
    "DENSE_REL",
    "DENSE_REST_POSTINGS",
    "DENSE_SEEDS",
    "FULL_SCAN_POSTINGS",
    "LIST_POSTINGS",
    "PROBE",
    "PROBE_POSTINGS",
    "SEED_PER_TERM",
    "SKIP_LEVEL",
    "Bm25Plan",
    "LexicalQuery",
    "bm25_hits_sql",
    "choose_admitted_plan",
    "prepare_bm25",
    "query_postings_sql",
    "sharded_terms_sql",
    "with_sharded_terms",
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
#: Under a constraint (:func:`choose_admitted_plan`), in posting reads (a posting read in impact order and
#: looked up in the admitted set, ~0.13 us at 1M chunks, measured with bench/filtered_plans.py): scoring one
#: chunk exactly from the forward table (~5 us) ...
CHUNK_POSTINGS = 40
#: ... checking the filter row of one posting read, in an ordered pass (~1 us with the read) ...
PROBE_POSTINGS = 10
#: ... and listing one admitted chunk in the admitted set (~0.3-0.4 us: its index entry read, kept, hashed).
LIST_POSTINGS = 2
#: The ways a constrained search may take, the cheapest chosen (tests and benchmarks pin one).
CONSTRAINED_WAYS: tuple[str, ...] = ("admitted", "set", "probe")


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
    segments'); ``params`` are the values its SQL binds (``bm25_plan`` among
    them, so ``search_sql`` shows the plan).
    """

    #: The query is scored from the segments' postings and forward tables (natural syntax, their k1 and b).
    impact: bool
    params: Mapping[str, Any]

    @property
    def strategy(self) -> str | None:
        got = self.params.get("bm25_plan")
        return None if got is None else str(got)


#: A df no term reaches: the min_df of a segment without dense blocks.
NO_DENSE = 2**31 - 1


def _impact_eligible(lex: LexicalQuery, entries: Sequence[Mapping[str, Any]]) -> bool:
    return lex.syntax == "natural" and all(lex.k1 == e["k1"] and lex.b == e["b"] for e in entries)


def _entries(layout: Layout, collection: str) -> list[Mapping[str, Any]]:
    """Every segment's BM25 statistics, or an error naming the snapshot that must build them."""
    entries = []
    for g in layout.segments:
        entry = g.bm25
        if not entry or entry.get("version") != BM25_STATS_VERSION:
            sid = layout.snapshot_id
            raise SnapshotError(
                f"snapshot {sid} has no BM25 statistics of the current layout (version {BM25_STATS_VERSION}) "
                f"in segment {g.id}; build them once with `ranklock snapshot lexical-stats {collection} {sid}` "
                f"(Python: engine.lexical_stats({collection!r}, {sid})), or search with lexical_ranker='ts_rank_cd'."
            )
        entries.append(entry)
    return entries


def _min_df(entry: Mapping[str, Any]) -> int:
    dense = entry.get("dense")
    return int(dense["min_df"]) if dense else NO_DENSE


def query_postings_sql(lex: LexicalQuery, layout: Layout) -> tuple[sql.Composable, list[Any]]:
    """An expression of the query's postings counts over the segments, and its values; NULL when not needed.

    The expression is a bigint[]: the postings of all the query's terms, those
    of its terms without dense blocks (in their segment), and the most terms
    with dense blocks in one segment (0 when none has any).  Only natural BM25
    queries under the segments' k1 and b choose a plan on them (see
    :func:`prepare_bm25`).
    """
    if lex.ranker != "bm25":
        return sql.SQL("NULL::bigint[]"), []
    entries = [g.bm25 for g in layout.segments]
    if not all(e and e.get("version") == BM25_STATS_VERSION for e in entries):
        return sql.SQL("NULL::bigint[]"), []
    if not _impact_eligible(lex, [e for e in entries if e]):
        return sql.SQL("NULL::bigint[]"), []
    arms = []
    params: list[Any] = []
    for g in layout.segments:
        arms.append(
            sql.SQL(
                "SELECT {seg}::bigint AS seg, x.df, %s::int AS min_df FROM {terms} AS x "
                "WHERE x.lexeme = ANY (ranklock.query_terms(%s::regconfig, %s, %s, %s))"
            ).format(seg=sql.Literal(g.id), terms=terms_table(g.id))
        )
        params += [_min_df(g.bm25 or {}), lex.language, lex.accent, lex.syntax, lex.query]
    return sql.SQL(
        "(SELECT ARRAY[coalesce(sum(z.total), 0), coalesce(sum(z.rest), 0), coalesce(max(z.nd), 0)]::bigint[] FROM ("
        "SELECT t.seg, sum(t.df) AS total, coalesce(sum(t.df) FILTER (WHERE t.df < t.min_df), 0) AS rest, "
        "count(*) FILTER (WHERE t.df >= t.min_df) AS nd FROM ({arms}) AS t GROUP BY t.seg) AS z)"
    ).format(arms=sql.SQL(" UNION ALL ").join(arms)), params


def prepare_bm25(
    lex: LexicalQuery,
    layout: Layout,
    totals: tuple[int, int, int],
    postings: int | Sequence[int] | None,
    *,
    terms: int = 1,
    collection: str = "COLLECTION",
) -> Bm25Plan:
    """The BM25 plan of ``lex`` on the snapshot ``layout``, or an error saying why it has none.

    ``totals`` are the snapshot's live chunks, their total length and its most
    chunks of a document.  Natural queries under the segments' k1 and b take
    the impact plan when their terms have more than ``FULL_SCAN_POSTINGS``
    postings together (``postings``, counted by :func:`query_postings_sql`:
    that count alone, or [all, those of terms without dense blocks, dense
    terms]), the dense plan when, moreover, every segment has dense blocks of
    one block size, 1 to ``DENSE_MAX_TERMS`` query terms have them in a
    segment and the others have at most ``DENSE_REST_POSTINGS`` postings, and
    the plain sum of every posting otherwise: the statement carries only the
    plan it runs.
    """
    entries = _entries(layout, collection)
    n, total_len, max_chunks = totals
    read_chunks = sum(g.chunks for g in layout.segments)
    avgdl = _avgdl(n, total_len)
    impact = _impact_eligible(lex, entries)
    counts = [postings] if isinstance(postings, int) else [int(x) for x in postings or [0]]
    total, rest, n_dense = counts[0], counts[1] if len(counts) > 1 else counts[0], counts[2] if len(counts) > 2 else 0
    blocks = {int(e["dense"]["block"]) for e in entries if e.get("dense")}
    dense = len(blocks) == 1 and all(e.get("dense") for e in entries)
    lp: dict[str, Any] = {}
    if impact:
        lp["bm25_postings"] = total
        lp["bm25_terms"] = terms
        dense_plan = dense and 1 <= n_dense <= DENSE_MAX_TERMS and rest <= DENSE_REST_POSTINGS
        if total <= FULL_SCAN_POSTINGS:
            lp["bm25_plan"] = "sharded" if layout.distributed else "full"
        elif dense_plan:
            lp["bm25_plan"] = "sharded_dense" if layout.distributed else "dense"
        else:
            lp["bm25_plan"] = "sharded_impact" if layout.distributed else "impact"
    lp.update(
        {
            # The snapshot's statistics: its live chunks and their average length (exact integers, so the
            # same documents give the same value however they were cut into segments).
            "bm25_chunks": n,
            "bm25_avgdl": avgdl,
            "bm25_sid": layout.snapshot_id,
            "bm25_segs": list(layout.ids),
            # A segment's weights were computed with its own average length: under the snapshot's, a
            # length part grows at most by this factor (see ranklock.snapshot.lexical_stats).
            "bm25_lf": [max(1.0, avgdl / (float(e["avgdl"]) or 1.0)) for e in entries],
            "bm25_min_df": [_min_df(e) for e in entries],
            # Each segment's share of the chunks read: its part of the seed budget (below).
            "bm25_share": [g.chunks / (read_chunks or 1) for g in layout.segments],
            "bm25_seed": SEED_PER_TERM,
            "bm25_seed_reads": SEED_PER_TERM,
            "bm25_full": FULL_SCAN_POSTINGS,
            "bm25_probe": PROBE,
            "bm25_deeper": DEEPER,
            "bm25_skip_level": SKIP_LEVEL,
            "bm25_level_base": int(entries[0]["level_base"]),
            "bm25_max_chunks": max(1, max_chunks),
        }
    )
    if lp.get("bm25_plan") in ("dense", "sharded_dense"):
        lp.update(
            {
                "bm25_dense_seeds": DENSE_SEEDS,
                "bm25_probe": DENSE_PROBE,
                "bm25_dense_block": blocks.pop(),
                "bm25_dense_rest": DENSE_REST_POSTINGS,
                "bm25_dense_rel": DENSE_REL,
                "bm25_dense_abs": DENSE_ABS,
            }
        )
    return Bm25Plan(impact=impact, params=lp)


def _avgdl(n: int, total_len: int) -> float:
    """The snapshot's average chunk length from its exact integer totals (correctly rounded, as Python divides).

    Computed from the live chunks' count and total length, never from a
    segment: the same documents give the same bits however they were cut.
    """
    return total_len / n if n else 1.0


def choose_admitted_plan(spec: SearchSpec, bm25: Bm25Plan, admitted_chunks: int) -> Bm25Plan:
    """Under a hard constraint: the cheapest of scoring the admitted chunks, or pruning with a set or probes.

    Called once the completeness count knows ``admitted_chunks`` (before the
    statement is built, so ``search_sql`` shows the same plan).  Only the
    impact and dense plans, and only under a filter or ``as_of``.  Each way's
    cost is estimated in posting reads (a posting read in impact order and
    looked up in a hash, about 0.13 us at 1M chunks, is the unit):

    * the admitted plan scores every admitted chunk (``CHUNK_POSTINGS``
      each);
    * the pruning plans read each term's postings in impact order until its
      seeds pass the constraint, about ``seeds / s`` of them at a selectivity
      ``s`` (never more than the terms hold), score their seeds and probes
      exactly, and check what they read: in the admitted set, listed once
      (``LIST_POSTINGS`` an admitted chunk, then a lookup a posting read:
      ``bm25_admit = set``, on filter tables only), or in one ordered pass of
      the rows read (``PROBE_POSTINGS`` each: ``probe``).

    The constants are measured (docs/benchmarks.md, bench/filtered_plans.py);
    the shape holds on any corpus: the admitted plan grows with what the
    constraint admits, the set with it too but 10 times more slowly, the
    probes with the inverse of the selectivity.
    """
    lp = bm25.params
    chunks = max(1, int(lp.get("bm25_chunks") or 1))
    admitted = max(1, admitted_chunks)
    if bm25.strategy in ("sharded_impact", "sharded_dense") and _constrained(spec):
        # Its seeds are read down to a weight, not until enough pass: read as many more as the filter rejects.
        return dataclasses.replace(bm25, params={**lp, "bm25_seed_reads": SEED_PER_TERM * chunks / admitted})
    if bm25.strategy not in ("impact", "dense") or not _constrained(spec):
        return bm25
    dense = bm25.strategy == "dense"
    seeds = DENSE_SEEDS if dense else SEED_PER_TERM * max(1, int(lp.get("bm25_terms") or 1))
    scored = (seeds + (DENSE_PROBE if dense else PROBE)) * CHUNK_POSTINGS
    reads = min(int(lp.get("bm25_postings") or 0), seeds * chunks / admitted)
    costs = {"probe": scored + reads * PROBE_POSTINGS, "admitted": admitted * CHUNK_POSTINGS}
    if has_filter_tables(spec.layout):
        costs["set"] = scored + reads + admitted * LIST_POSTINGS
    way = min((w for w in costs if w in CONSTRAINED_WAYS), key=lambda w: (costs[w], w), default="probe")
    if way == "admitted":
        return dataclasses.replace(bm25, params={**lp, "bm25_plan": "admitted"})
    return dataclasses.replace(bm25, params={**lp, "bm25_admit": way, "bm25_admitted_share": admitted / chunks})


def _constrained(spec: SearchSpec) -> bool:
    """A filter or ``as_of`` constrains the search (dead rows are masked, but admit nearly everything)."""
    return spec.as_of is not None or spec.filter_sql != sql.SQL("TRUE")


def _unfiltered(spec: SearchSpec) -> bool:
    """Nothing to check on a chunk row: no filter, no ``as_of``, no dead row to mask."""
    return not _constrained(spec) and spec.layout.dead_rows == 0


# -- the SQL -------------------------------------------------------------------------------------


def _union(spec: SearchSpec, kind: SegmentKind, columns: str) -> sql.Composable:
    """One kind of BM25 table over the snapshot's segments, each row tagged with its segment (``seg``)."""
    return union_sql(spec.layout, kind, sql.SQL(columns))


def _k1_b_avgdl() -> tuple[sql.Composable, sql.Composable, sql.Composable]:
    return sql.SQL("%(k1)s::float8"), sql.SQL("%(b)s::float8"), sql.SQL("%(bm25_avgdl)s::float8")


def _query_terms(spec: SearchSpec) -> sql.Composable:
    """CTEs ``qlex``, ``qseg``, ``qdf``, ``qt`` and ``qids``: the query's terms, in every segment that has them.

    ``qlex``: each lexeme of the query, how often the query holds it (``qtf``,
    rule bm25/2, ranklock.snapshot.rules; 1 under bm25/1) and its place in
    lexeme byte order (``ord``), the one order every score is summed in.
    ``qdf``: the snapshot's df of each (its segments' summed, its dead chunks
    subtracted) and its idf, by the builder's very expression.  ``qt``: one
    row per (segment, term): the segment's term id and impact quantiles
    ``wq`` (its own weights), and ``scale``: a weight ``w`` of that segment's
    postings adds at most ``scale * w`` to a score under the snapshot's
    statistics (qtf times the idf ratio times the length factor);
    ``max_w`` is the most the term adds to a chunk of the segment, with a
    margin.  ``qids``: per segment, its term ids with their qtf and idf in
    ``ord`` order, for scoring a chunk from the forward table.
    """
    qtf = sql.SQL("q.qtf") if spec.rules.query_tf else sql.SQL("1")
    template = """qlex AS MATERIALIZED (
    SELECT q.lexeme, {qtf} AS qtf, row_number() OVER (ORDER BY q.lexeme COLLATE "C") AS ord
    FROM ranklock.query_term_freqs(%(cfg)s::regconfig, %(accent)s, %(syntax)s, %(q)s) AS q
),
qseg AS MATERIALIZED (
    SELECT t.seg, t.term_id, t.lexeme, t.df, t.idf, t.max_w, t.wq FROM {terms} AS t
    WHERE t.lexeme = ANY (ARRAY(SELECT qlex.lexeme FROM qlex))
),
qdf AS MATERIALIZED (
    SELECT l.lexeme, l.qtf, l.ord, ln(1 + (%(bm25_chunks)s::float8 - x.df + 0.5) / (x.df + 0.5)) AS idf
    FROM qlex AS l JOIN (
        SELECT s.lexeme, sum(s.df) - coalesce(max(dt.chunks), 0) AS df FROM {stats} AS s
        LEFT JOIN ranklock.snapshot_dead_terms AS dt ON dt.snapshot_id = %(bm25_sid)s::bigint AND dt.lexeme = s.lexeme
        GROUP BY s.lexeme
    ) AS x ON x.lexeme = l.lexeme
),
qt AS MATERIALIZED (
    SELECT s.seg, s.term_id, d.ord, d.qtf, d.idf, s.df, s.wq, g.min_df, g.share,
           d.qtf * (d.idf / s.idf) * g.lf AS scale,
           d.qtf * (d.idf / s.idf) * g.lf * s.max_w::float8 * 1.000001 AS max_w
    FROM qseg AS s JOIN qdf AS d ON d.lexeme = s.lexeme
    JOIN unnest(%(bm25_segs)s::bigint[], %(bm25_lf)s::float8[], %(bm25_min_df)s::int[], %(bm25_share)s::float8[])
      AS g(seg, lf, min_df, share)
      ON g.seg = s.seg
),
qids AS MATERIALIZED (
    SELECT seg, array_agg(term_id ORDER BY ord) AS ids, array_agg(qtf ORDER BY ord) AS qtfs,
           array_agg(idf ORDER BY ord) AS idfs
    FROM qt GROUP BY seg
)"""
    # A read routed to fewer segments still counts the df over all of the snapshot's.
    stats = (
        sql.SQL(
            "(SELECT t.lexeme, t.df FROM {} AS t WHERE t.lexeme = ANY (ARRAY(SELECT qlex.lexeme FROM qlex)))"
        ).format(union_sql(spec.layout.full(), "terms", sql.SQL("t.lexeme, t.df")))
        if spec.layout.routed
        else sql.SQL("qseg")
    )
    return sql.SQL(template).format(
        qtf=qtf, terms=_union(spec, "terms", "t.term_id, t.lexeme, t.df, t.idf, t.max_w, t.wq"), stats=stats
    )


def _score(alias: str = "c") -> sql.Composable:
    """The BM25 score of chunk ``alias`` from its tsvector, over the query's terms (CTE ``qdf``).

    Term contributions (``qtf * w``) are summed in lexeme order (``ord``), the
    one order every plan uses, so the result does not depend on the order
    rows arrive in.
    """
    k1, b, avgdl = _k1_b_avgdl()
    a = sql.Identifier(alias)
    weight = weight_sql(sql.SQL("d.idf"), sql.SQL("x.tf"), sql.SQL("{}.doc_len").format(a), k1, b, avgdl)
    return sql.SQL(
        "(SELECT coalesce(sum(d.qtf * {weight} ORDER BY d.ord), 0) "
        "FROM unnest({a}.tsv) AS u JOIN qdf AS d ON d.lexeme = u.lexeme "
        "CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1) AS tf) AS x)"
    ).format(weight=weight, a=a)


def _forward_score(alias: str = "f", ids: str = "q") -> sql.Composable:
    """The BM25 score of forward-table row ``alias`` over the query's terms of its segment (``qids`` row ``ids``).

    The weights are computed from the chunk's term frequencies and length
    with the snapshot's statistics, by the builder's expression, and summed
    in lexeme order: the same bits as :func:`_score` and every other plan,
    in whatever segment the chunk is.  Each query term's place in the chunk
    is searched once (``OFFSET 0`` keeps the planner from pasting the search
    into both uses of ``tf`` in the expression) and the terms the chunk lacks
    are dropped before the weights: the same additions in the same order as
    summing their NULLs, at two thirds of the cost.
    """
    k1, b, avgdl = _k1_b_avgdl()
    f = sql.Identifier(alias)
    weight = weight_sql(
        sql.SQL("x.idf"), sql.SQL("{f}.tfs[x.at]").format(f=f), sql.SQL("{}.len").format(f), k1, b, avgdl
    )
    return sql.SQL(
        "(SELECT coalesce(sum(x.qtf * {weight} ORDER BY x.n), 0) FROM ("
        "SELECT y.qtf, y.idf, y.n, array_position({f}.tids, y.tid) AS at "
        "FROM unnest({q}.ids, {q}.qtfs, {q}.idfs) WITH ORDINALITY AS y(tid, qtf, idf, n) OFFSET 0) AS x "
        "WHERE x.at IS NOT NULL)"
    ).format(weight=weight, f=f, q=sql.Identifier(ids))


def _forward(spec: SearchSpec) -> sql.Composable:
    return _union(spec, "forward", "t.row_id, t.doc_no, t.tids, t.tfs, t.len")


def _postings(spec: SearchSpec) -> sql.Composable:
    return _union(spec, "postings", "t.term_id, t.w, t.row_id, t.tf, t.len")


def _rows_of(cte: str, alias: str = "f") -> sql.Composable:
    """``f.row_id = ANY (ARRAY(<cte's row ids of f's segment>))``: one ordered pass over each segment's table ``f``.

    = ANY of an array: the index scan visits the rows in row_id order instead
    of one random probe each, which the planner would pick for a CTE it
    thinks small.  ``f.seg`` is a constant in each arm of the union, so each
    arm gets the row ids of its own segment only.
    """
    c, f = sql.Identifier(cte), sql.Identifier(alias)
    return sql.SQL("{f}.row_id = ANY (ARRAY(SELECT {c}.row_id FROM {c} WHERE {c}.seg = {f}.seg))").format(c=c, f=f)


def _doc_best(spec: SearchSpec, rows: str) -> sql.Composable:
    """(seg, doc, best): each document's exact best score over the chunks in CTE ``rows``, all admitted (:func:`_admits`).

    doc_no orders like doc_id within a segment, and a live document lives in
    one: the chunk rows need not be read.  (Dead rows were masked by
    joining the union of chunk tables once: it probed every segment's index
    for each chunk, 4 probes a seed at 4 segments.)
    """
    return sql.SQL(
        "SELECT f.seg, f.doc_no AS doc, max({score}) AS best FROM {forward} AS f JOIN qids AS q ON q.seg = f.seg "
        "WHERE {rows} GROUP BY f.seg, f.doc_no"
    ).format(score=_forward_score(), forward=_forward(spec), rows=_rows_of(rows))


def _admits(
    spec: SearchSpec, bm25: Bm25Plan, alias: str, *, ordered: bool = False, checked: str | None = None
) -> sql.Composable:
    """Whether the row ``alias`` (its ``seg`` and ``row_id``) is live and passes the hard constraints.

    Checked once per row that can reach the top, where the plan first meets
    it (a seed, a candidate, a summed chunk), so nothing after that checks
    again.  On the snapshot's filter tables (ranklock.snapshot.filter_table):
    a lookup in the admitted set listed once (CTE ``adm``) where the
    constraint admits few enough chunks that listing them pays
    (``bm25_admit = set``, see :func:`choose_admitted_plan`), else membership
    in ``checked``: a CTE of the rows that passed, checked in one ordered pass
    of the filter rows (:func:`_checked_rows`).

    ``ordered``: the rows are read in an order that must stop at a LIMIT (a
    term's postings in impact order, for the seeds).  The check is wrapped in
    IS TRUE, which keeps PostgreSQL from turning it into a join: as a
    semi-join the planner read every posting of the term first (540,000 of a
    frequent word at 1M chunks, 270 ms) and sorted them.  A membership in
    ``checked`` is wrapped too: a semi-join the planner thought one row long
    rescanned the ordered pass once per row.
    """
    if _unfiltered(spec):
        return sql.SQL("TRUE")
    if not _constrained(spec):
        live = live_sql(spec.layout, alias)
        return sql.SQL("({}) IS TRUE").format(live) if ordered else live
    if bm25.params.get("bm25_admit") == "set":
        check = sql.SQL("{key} IN (SELECT adm.k FROM adm)").format(key=_row_key(spec, alias))
        return sql.SQL("({}) IS TRUE").format(check) if ordered else check
    if checked is None:
        raise ValueError("a check outside the admitted set needs the CTE of the rows that passed")
    return _member(alias, checked)


def _member(alias: str, checked: str) -> sql.Composable:
    """Row ``alias`` is one of CTE ``checked``'s (seg, row_id): a hash of them, built once (IS TRUE, see :func:`_admits`)."""
    return sql.SQL("(({a}.seg, {a}.row_id) IN (SELECT o.seg, o.row_id FROM {c} AS o)) IS TRUE").format(
        a=sql.Identifier(alias), c=sql.Identifier(checked)
    )


#: A row's key in the admitted set: its segment id in the high 31 bits, its row id in the low 32 (one bigint
#: hashes in about half the time of a (seg, row_id) pair: 14 against 25 ms for 100,000 admitted rows).
_KEY_BITS = 32


def _row_key(spec: SearchSpec, alias: str) -> sql.Composable:
    """The admitted-set key of row ``alias``: one bigint where ids fit (checked), else the (seg, row_id) pair."""
    a = sql.Identifier(alias)
    if _keys_fit(spec):
        return sql.SQL("({a}.seg << {bits} | {a}.row_id)").format(a=a, bits=sql.Literal(_KEY_BITS))
    return sql.SQL("({a}.seg, {a}.row_id)").format(a=a)


def _keys_fit(spec: SearchSpec) -> bool:
    """Every segment id fits 31 bits and every row id 32.

    A segment numbers its rows from 0 as it writes them; its filter table
    records how many it wrote (a purge deletes rows, never renumbers).
    """
    return all(
        g.id < 2**31 and int((g.filter or {}).get("rows", 2**_KEY_BITS)) < 2**_KEY_BITS for g in spec.layout.segments
    )


def _checked_rows(spec: SearchSpec, cte: str) -> sql.Composable:
    """(seg, row_id) of the rows of CTE ``cte`` that pass the constraints, checked in one ordered pass of the filter rows."""
    return sql.SQL("SELECT c.seg, c.row_id FROM {rows} AS c WHERE {of} AND {where}").format(
        rows=spec.filter_rows, of=_rows_of(cte, "c"), where=where_sql(spec)
    )


def _adm(spec: SearchSpec, bm25: Bm25Plan) -> sql.Composable:
    """CTE ``adm`` (with its leading comma) when the plan looks rows up in the admitted set, else nothing."""
    if bm25.params.get("bm25_admit") != "set" or not _constrained(spec):
        return sql.SQL("")
    key = _row_key(spec, "c")
    if not _keys_fit(spec):
        key = sql.SQL("ROW(c.seg, c.row_id)")
    return sql.SQL(",\nadm AS MATERIALIZED (SELECT {key} AS k FROM {rows} AS c WHERE {where})").format(
        key=key, rows=spec.filter_rows, where=where_sql(spec)
    )


def _admitted_sql(spec: SearchSpec) -> sql.Composable:
    """The admitted plan: every chunk the constraints admit (CTE ``adm``) that holds a query term, scored exactly."""
    return sql.SQL(
        """WITH {qt},
adm AS MATERIALIZED (SELECT c.seg, c.row_id FROM {rows} AS c WHERE {where}),
scored AS MATERIALIZED (
    -- && keeps the chunks holding a query term.
    SELECT f.seg, f.row_id, {score} AS score FROM {forward} AS f JOIN qids AS q ON q.seg = f.seg
    WHERE {adm} AND f.tids && q.ids
)
{top}"""
    ).format(
        qt=_query_terms(spec),
        rows=spec.filter_rows,
        where=where_sql(spec),
        score=_forward_score(),
        forward=_forward(spec),
        adm=_rows_of("adm"),
        top=_top(spec),
    )


def bm25_hits_sql(spec: SearchSpec, bm25: Bm25Plan, where: sql.Composable) -> sql.Composable:
    """Rows (doc_id, chunk, score) of the chunks that can make the lexical top ``depth``."""
    if not bm25.impact:
        if spec.layout.distributed:
            # The match plan on shards: the same chunks (the tsquery decides), the same weights from the
            # postings' tf and length (a chunk's tsvector, turned around), summed in lexeme order.
            return _sharded_sql(spec, sql.SQL("{} AND c.tsv @@ {}").format(where, tsquery_sql()))
        return sql.SQL(
            "WITH {qt} SELECT c.doc_id, c.chunk, {score} AS score FROM {table} AS c WHERE c.tsv @@ {tsq} AND {where}"
        ).format(qt=_query_terms(spec), score=_score(), table=spec.table, tsq=tsquery_sql(), where=where)
    # ``margin``: bounds are float sums; 1e-9 relative on theta dwarfs their rounding.
    if bm25.strategy == "full":
        # Few postings: sum them all; nothing to prune.
        return sql.SQL("WITH {qt},\n{summed}\n{top}").format(
            qt=_query_terms(spec),
            summed=_summed_ctes(spec, bm25, when=sql.SQL("TRUE"), impact=False),
            top=_top(spec),
        )
    if bm25.strategy == "admitted":
        return _admitted_sql(spec)
    if bm25.strategy == "sharded":
        return _sharded_sql(spec, where)
    if bm25.strategy in ("sharded_impact", "sharded_dense"):
        return _sharded_pruned_sql(spec, dense=bm25.strategy == "sharded_dense")
    dense = bm25.strategy == "dense"
    # Under a constraint the plan's candidates are checked once (_admits), then only admitted rows go on.
    checked = not _unfiltered(spec)
    middle = (_dense_ctes if dense else _impact_ctes)(spec, "cand_all" if checked else "cand")
    if checked and not _constrained(spec):
        middle = sql.SQL(
            "{middle},\ncand AS MATERIALIZED (SELECT k.seg, k.row_id, k.bound FROM cand_all AS k WHERE {admits})"
        ).format(middle=middle, admits=_admits(spec, bm25, "k"))
    elif checked:
        # The candidates' rows checked in one ordered pass of the filter rows, in either way: they are few, and
        # the admitted set's hash would be built a second time.
        middle = sql.SQL(
            "{middle},\ncand_ok AS MATERIALIZED ({checked}),\n"
            "cand AS MATERIALIZED (SELECT k.seg, k.row_id, k.bound FROM cand_all AS k WHERE {admits})"
        ).format(
            middle=middle,
            checked=_checked_rows(spec, "cand_all"),
            admits=_member("k", "cand_ok"),
        )
    seeds = (
        sql.SQL("greatest(32, %(bm25_dense_seeds)s::bigint / (SELECT count(DISTINCT ord) FROM qt))")
        if dense
        else sql.SQL("%(bm25_seed)s::bigint")
    )
    batched = checked and _constrained(spec) and bm25.params.get("bm25_admit") == "probe"
    if batched:
        # Each term's top postings over the share the constraint admits, then their rows checked in one
        # ordered pass of the filter tables: about as many pass as seeds are wanted, at ~1 us a row where a
        # probe of each, in impact order, cost ~5 us.
        seed = sql.SQL(
            """seed_read AS MATERIALIZED (
    SELECT DISTINCT qt.seg, s.row_id FROM qt CROSS JOIN LATERAL (
        SELECT p.row_id FROM {postings} AS p WHERE p.seg = qt.seg AND p.term_id = qt.term_id
        ORDER BY p.w DESC, p.row_id LIMIT ceil({seeds} * qt.share / %(bm25_admitted_share)s::float8)::bigint) AS s
),
seed AS MATERIALIZED ({checked})"""
        ).format(postings=_postings(spec), seeds=seeds, checked=_checked_rows(spec, "seed_read"))
    else:
        seed = sql.SQL(
            """seed AS MATERIALIZED (
    -- A term's top postings, the budget shared by the segments in proportion to their chunks: a
    -- small new segment seeds a few (seeding every segment in full cost 4x the seeds at 4 segments).
    -- Any seed set gives a valid theta (real scores of real documents); fewer only loosen it.  Under a
    -- constraint, the top postings of admitted chunks: read in impact order until enough pass.
    SELECT DISTINCT qt.seg, s.row_id FROM qt CROSS JOIN LATERAL (
        SELECT p.row_id FROM {postings} AS p WHERE p.seg = qt.seg AND p.term_id = qt.term_id AND {seed_admits}
        ORDER BY p.w DESC, p.row_id LIMIT ceil({seeds} * qt.share)::bigint) AS s
)"""
        ).format(postings=_postings(spec), seed_admits=_admits(spec, bm25, "p", ordered=True), seeds=seeds)
    return sql.SQL(
        """WITH {qt}{adm},
{seed},
seed_docs AS MATERIALIZED ({seed_docs}),
theta AS MATERIALIZED (
    -- Fewer than depth seed documents: theta = 0, every posting is summed.
    SELECT th.theta, th.theta - 1e-9 * (1 + th.theta) AS cut FROM (
        SELECT coalesce((SELECT best FROM seed_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s::bigint - 1)), 0)
               AS theta) AS th
),
{middle},
probe AS MATERIALIZED (SELECT seg, row_id FROM cand ORDER BY bound DESC, seg, row_id LIMIT %(bm25_probe)s::bigint),
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
        qt=_query_terms(spec),
        adm=_adm(spec, bm25),
        seed=seed,
        middle=middle,
        seed_docs=_doc_best(spec, "seed"),
        probe_docs=_doc_best(spec, "probe"),
        summed=_summed_ctes(spec, bm25, when=sql.SQL("(SELECT theta FROM theta) = 0"), impact=True),
        top=_top(spec),
    )


def _sharded_sql(spec: SearchSpec, where: sql.Composable) -> sql.Composable:
    """The sharded plan: per segment, every posting of the query's terms summed on the shard holding its chunk.

    One arm per segment, each a statement Citus pushes down whole: the
    postings grouped by their distribution column (``doc_id``) and joined to
    the co-located chunk table on it, so every task sums its own chunks'
    postings in lexeme order (the full plan's expression: the same bits),
    applies the filter and keeps its top ``depth * max_chunks`` by the total
    order; the coordinator merges the tasks' lists by the same order.  The
    query's term ids are also an array the shard's impact index is probed
    with (a join with the broadcast ``qt`` alone read every posting of the
    shard: the planner cannot see how few rows ``qt`` holds).  A segment placed by its partition value is one shard: its arm names it
    (``shard_key = '<value>'``), and a search routed to one tenant runs on
    that tenant's node alone.  Taken for few postings (:func:`_sharded_impact_sql` otherwise).
    """
    return sql.SQL(
        "WITH {qt}\nSELECT h.doc_id, h.chunk, h.score FROM ({arms}) AS h "
        "ORDER BY h.score DESC, h.doc_id, h.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(qt=_query_terms(spec), arms=sql.SQL("\nUNION ALL\n").join(_summed_arms(spec, where)))


def _summed_arms(
    spec: SearchSpec, where: sql.Composable, *, when: sql.Composable | None = None
) -> list[sql.Composable]:
    """The sharded plan's arm of each segment (:func:`_sharded_sql`), run only ``when`` (if given)."""
    k1, b, avgdl = _k1_b_avgdl()
    weight = weight_sql(sql.SQL("qt.idf"), sql.SQL("p.tf"), sql.SQL("p.len"), k1, b, avgdl)
    return [
        sql.SQL(
            """(SELECT c.doc_id, c.chunk, s.score FROM (
        SELECT p.{dist}, p.row_id, sum(qt.qtf * {weight} ORDER BY qt.ord) AS score
        FROM {postings} AS p JOIN qt ON qt.seg = {seg} AND qt.term_id = p.term_id
        WHERE p.term_id = ANY (ARRAY(SELECT qt.term_id FROM qt WHERE qt.seg = {seg})) AND {pkey} AND {when}
        GROUP BY p.{dist}, p.row_id) AS s
    JOIN (SELECT {seg} AS seg, t.* FROM {chunks} AS t WHERE {tkey}) AS c ON c.{dist} = s.{dist} AND c.row_id = s.row_id
    WHERE {where}
    ORDER BY s.score DESC, c.doc_id, c.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint)"""
        ).format(
            dist=sql.Identifier(g.distribution or "doc_id"),
            weight=weight,
            postings=segment_table("postings", g.id),
            seg=sql.SQL("{}::bigint").format(sql.Literal(g.id)),
            pkey=g.key_sql("p"),
            when=sql.SQL("TRUE") if when is None else when,
            chunks=segment_table("chunks", g.id),
            tkey=g.key_sql("t"),
            where=where,
        )
        for g in spec.layout.segments
    ]


def _sharded_pruned_sql(spec: SearchSpec, *, dense: bool) -> sql.Composable:
    """The impact or dense plan on shards: a global theta first, then every shard scores only what can reach it.

    One statement, which Citus runs as a few steps (docs/scaling.md):

    1. Seeds, on every shard: each term's postings down to the weight of its
       ``bm25_seed_reads``-th posting in impact order (read off the terms'
       quantiles: a range of the impact index, as ``LATERAL ... LIMIT`` over
       the query's terms cannot be pushed down), scored exactly from the
       forward table, filtered, each shard's best ``depth`` documents.
    2. theta, on the coordinator: the ``depth``-th best of those (a real score
       of real documents, so a lower bound of the branch's last).
    3. The candidates.  Impact (``dense`` false): each term's read depth by the
       impact plan's own rule (:func:`_read_depths_ctes`, on the coordinator),
       then on every shard each term's postings down to its depth and each
       chunk's bound.  Dense: the dense plan's bounds themselves
       (:func:`_dense_ctes`): the blocks are reference tables, summed on the
       coordinator, the other terms' postings read on the shards.
    4. Every shard: its candidates reaching theta scored exactly and filtered,
       its top ``depth * max_chunks``; the coordinator merges.

    The exact score is the forward table's, by the one expression every plan
    uses, with the query's term ids, frequencies and idfs bound as arrays
    (``bm25_ids_<segment>``: Citus pushes down no subquery correlated with a
    relation of the coordinator), so each chunk gets the bits it gets on one
    node.  When the seeds cannot bound theta (fewer than ``depth`` documents
    pass the filter), theta is 0: the impact plan reads every posting of the
    terms and scores every chunk read; the dense plan sums them (the sharded
    plan's arms, run only then).
    """
    unfiltered = _unfiltered(spec)
    # The dead rows in one CTE of the statement: Citus sends them to the workers once (508 kB at 200k
    # chunks with 10 % replaced), where each use of the catalog's rows was sent again (7 times a search).
    dead = spec.layout.dead_rows > 0
    where = where_sql(spec, dead="dead_rows" if dead else None)
    seed_docs: list[sql.Composable] = []
    arms: list[sql.Composable] = []
    for g in spec.layout.segments:
        seg, dist = sql.SQL("{}::bigint").format(sql.Literal(g.id)), sql.Identifier(g.distribution or "doc_id")
        chunks, tkey = segment_table("chunks", g.id), g.key_sql("t")
        # The filter reads the chunk row (co-located with the forward row); nothing to read unfiltered.
        rows = (
            sql.SQL("")
            if unfiltered
            else sql.SQL(
                " JOIN (SELECT {seg} AS seg, t.* FROM {chunks} AS t WHERE {tkey}) AS c "
                "ON c.{dist} = f.{dist} AND c.row_id = f.row_id"
            ).format(seg=seg, chunks=chunks, tkey=tkey, dist=dist)
        )
        parts = {
            "seg": seg,
            "dist": dist,
            "postings": segment_table("postings", g.id),
            "forward": segment_table("forward", g.id),
            "chunks": chunks,
            "xkey": g.key_sql("x"),
            "fkey": g.key_sql("f"),
            "tkey": tkey,
            "score": _bound_forward_score(g.id),
            "where": where,
            "rows": rows,
        }
        seed_docs.append(
            sql.SQL(
                "(SELECT max({score}) AS best FROM {forward} AS f{rows} "
                "WHERE (f.{dist}, f.row_id) IN (SELECT e.{dist}, e.row_id FROM seedw CROSS JOIN LATERAL ("
                "SELECT x.{dist}, x.row_id FROM {postings} AS x WHERE x.term_id = seedw.term_id AND x.w >= seedw.f "
                "AND {xkey}) AS e WHERE seedw.seg = {seg}) AND {fkey} "
                "AND {where} GROUP BY f.{dist}, f.doc_id ORDER BY best DESC LIMIT %(depth)s::bigint)"
            ).format(**parts)
        )
        candidates = (
            # An array of row ids, so each shard probes its forward rows (and their chunks) by index: as a
            # semi-join with the broadcast candidates the planner scanned the whole chunk table of the shard.
            sql.SQL(
                "f.row_id = ANY (ARRAY(SELECT k.row_id FROM cand AS k "
                "WHERE k.seg = {seg} AND k.bound >= (SELECT cut FROM theta)))"
            )
            if dense
            else sql.SQL(
                """(f.{dist}, f.row_id) IN (
            SELECT e.{dist}, e.row_id FROM thr_all AS thr CROSS JOIN LATERAL (
                SELECT x.{dist}, x.row_id, x.w FROM {postings} AS x
                WHERE x.term_id = thr.term_id AND x.w >= thr.f AND {xkey}) AS e
            WHERE thr.seg = {seg}
            GROUP BY e.{dist}, e.row_id
            HAVING (SELECT fs.fsum FROM fs WHERE fs.seg = {seg}) + sum(thr.scale * e.w - thr.fq) >= (SELECT cut FROM theta))"""
            )
        ).format(**parts)
        arms.append(
            sql.SQL(
                """(SELECT c.doc_id, c.chunk, s.score FROM (
        SELECT f.{dist}, f.row_id, {score} AS score FROM {forward} AS f WHERE {candidates} AND {fkey}) AS s
    JOIN (SELECT {seg} AS seg, t.* FROM {chunks} AS t WHERE {tkey}) AS c ON c.{dist} = s.{dist} AND c.row_id = s.row_id
    WHERE {where}
    ORDER BY s.score DESC, c.doc_id, c.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint)"""
            ).format(candidates=candidates, **parts)
        )
    if dense:
        middle = _dense_ctes(spec, "cand")
        arms += _summed_arms(spec, where, when=sql.SQL("(SELECT theta FROM theta) = 0"))
    else:
        middle = sql.SQL(
            """{depths},
thr_all AS MATERIALIZED (
    -- theta 0 (the seeds could not bound it): every term read whole, every chunk read scored.
    SELECT seg, term_id, scale, f, fq FROM thr
    UNION ALL SELECT qt.seg, qt.term_id, qt.scale, 0::float8, 0::float8 FROM qt WHERE (SELECT theta FROM theta) = 0
),
fs AS MATERIALIZED (SELECT seg, sum(fq) AS fsum FROM thr_all GROUP BY seg)"""
        ).format(depths=_read_depths_ctes())
    return sql.SQL(
        """WITH {qt},{dead}
seedw AS MATERIALIZED (
    -- Per segment and term: the weight its seeds are read down to, its bm25_seed_reads-th posting's
    -- (the quantile at or past it; everything when the term has no more, or no quantile).
    SELECT qt.seg, qt.term_id,
           CASE WHEN qt.df <= r.n OR cardinality(qt.wq) = 0 THEN 0::float8
                ELSE qt.wq[least(cardinality(qt.wq), greatest(1, ceil(log(2::numeric, (r.n / %(bm25_level_base)s::float8)::numeric))::int + 1))]
           END AS f
    FROM qt CROSS JOIN LATERAL (SELECT greatest(1, ceil(%(bm25_seed_reads)s::float8 * qt.share))::float8 AS n) AS r
),
seed_docs AS MATERIALIZED ({seed_docs}),
theta AS MATERIALIZED (
    -- Fewer than depth seed documents pass the filter: theta = 0.
    SELECT th.theta, th.theta - 1e-9 * (1 + th.theta) AS cut FROM (
        SELECT coalesce((SELECT best FROM seed_docs ORDER BY best DESC LIMIT 1 OFFSET (%(depth)s::bigint - 1)), 0)
               AS theta) AS th
),
{middle}
SELECT h.doc_id, h.chunk, h.score FROM ({arms}) AS h
ORDER BY h.score DESC, h.doc_id, h.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"""
    ).format(
        qt=_bound_terms(),
        seed_docs=sql.SQL("\nUNION ALL\n").join(seed_docs),
        dead=sql.SQL("\ndead_rows AS MATERIALIZED ({}),").format(dead_rows_sql(spec.layout)) if dead else sql.SQL(""),
        middle=middle,
        arms=sql.SQL("\nUNION ALL\n").join(arms),
    )


def _bound_forward_score(segment_id: int) -> sql.Composable:
    """:func:`_forward_score` of forward row ``f`` of one segment, its query terms bound as arrays (sharded plans)."""
    names = {k: sql.Placeholder(f"bm25_{k}_{int(segment_id)}") for k in ("ids", "qtfs", "idfs")}
    k1, b, avgdl = _k1_b_avgdl()
    weight = weight_sql(sql.SQL("x.idf"), sql.SQL("f.tfs[x.at]"), sql.SQL("f.len"), k1, b, avgdl)
    return sql.SQL(
        "(SELECT coalesce(sum(x.qtf * {weight} ORDER BY x.n), 0) FROM ("
        "SELECT y.qtf, y.idf, y.n, array_position(f.tids, y.tid) AS at "
        "FROM unnest({ids}::int[], {qtfs}::int[], {idfs}::float8[]) WITH ORDINALITY AS y(tid, qtf, idf, n) OFFSET 0) AS x "
        "WHERE x.at IS NOT NULL)"
    ).format(weight=weight, **names)


#: The columns of ``qt`` (:func:`_query_terms`), as a sharded plan binds them.
_QT_COLUMNS = (
    ("seg", "bigint"),
    ("term_id", "int"),
    ("ord", "bigint"),
    ("qtf", "int"),
    ("idf", "float8"),
    ("df", "bigint"),
    ("wq", "float8[]"),
    ("min_df", "int"),
    ("share", "float8"),
    ("scale", "float8"),
    ("max_w", "float8"),
)


def sharded_terms_sql(spec: SearchSpec) -> sql.Composable:
    """The query's terms in every segment (``qt``'s rows), in lexeme order: what a sharded plan binds."""
    cols = sql.SQL(", ").join(sql.SQL("qt.{}").format(sql.Identifier(c)) for c, _ in _QT_COLUMNS)
    return sql.SQL("WITH {qt} SELECT {cols} FROM qt ORDER BY qt.seg, qt.ord").format(qt=_query_terms(spec), cols=cols)


def with_sharded_terms(bm25: Bm25Plan, rows: Sequence[Mapping[str, Any]], segments: Sequence[int]) -> Bm25Plan:
    """``bm25`` with the query's terms bound (:func:`sharded_terms_sql`'s rows).

    Each segment's term ids, frequencies and idfs as arrays for the exact
    score on the shards, and the whole of ``qt`` as JSON for the coordinator's
    steps: read from the reference tables once, here, instead of in five
    steps of every statement.  JSON carries each float8 exactly (Python writes
    the shortest text that reads back to the same double, PostgreSQL reads it
    back correctly rounded).
    """
    bound: dict[str, Any] = {}
    for seg in segments:
        mine = [r for r in rows if int(r["seg"]) == int(seg)]
        bound[f"bm25_ids_{seg}"] = [int(r["term_id"]) for r in mine]
        bound[f"bm25_qtfs_{seg}"] = [int(r["qtf"]) for r in mine]
        bound[f"bm25_idfs_{seg}"] = [float(r["idf"]) for r in mine]
    bound["bm25_qt"] = json.dumps([{c: r[c] for c, _ in _QT_COLUMNS} for r in rows])
    return dataclasses.replace(bm25, params={**bm25.params, **bound})


def _bound_terms() -> sql.Composable:
    """CTE ``qt`` of a sharded plan, from the terms :func:`with_sharded_terms` bound."""
    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in _QT_COLUMNS)
    return sql.SQL("qt AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%(bm25_qt)s::jsonb) AS q({cols}))").format(
        cols=cols
    )


def _impact_ctes(spec: SearchSpec, name: str) -> sql.Composable:
    """The impact plan's CTEs from read depths to ``name`` (seg, row_id, bound): steps 2 and 3, per segment.

    A chunk lives in one segment, so its bound only involves its segment's
    read depths: each segment picks its own (the cheapest whose unread bound
    stays under the one theta).
    """
    return sql.SQL(
        """{depths},
{name} AS MATERIALIZED (
    -- Upper bound of each chunk read: its contributions read, plus scale * f for the terms it was not seen in.
    SELECT thr.seg, e.row_id, fs.fsum + sum(thr.scale * e.w - thr.fq) AS bound
    FROM thr CROSS JOIN LATERAL (
        SELECT p.row_id, p.w FROM {postings} AS p
        WHERE p.seg = thr.seg AND p.term_id = thr.term_id AND p.w >= thr.f) AS e
    JOIN (SELECT seg, sum(fq) AS fsum FROM thr GROUP BY seg) AS fs ON fs.seg = thr.seg
    GROUP BY thr.seg, e.row_id, fs.fsum
    HAVING fs.fsum + sum(thr.scale * e.w - thr.fq) >= (SELECT cut FROM theta)
)"""
    ).format(depths=_read_depths_ctes(), postings=_postings(spec), name=sql.Identifier(name))


def _read_depths_ctes() -> sql.Composable:
    """CTEs ``ranked`` to ``thr`` (seg, term_id, scale, f, fq): how deep each term of each segment is read (step 2).

    From the query's terms (``qt``) and ``theta`` alone, so they run where
    those are: on the coordinator of a cluster, for every shard at once.
    """
    return sql.SQL(
        """ranked AS MATERIALIZED (
    SELECT qt.seg, qt.term_id, qt.df, qt.max_w, qt.wq, qt.scale,
           row_number() OVER (PARTITION BY qt.seg ORDER BY qt.max_w, qt.term_id) AS pos
    FROM qt
),
sizes AS MATERIALIZED (
    SELECT seg, count(*)::int AS n, coalesce(max(cardinality(wq)), 0) AS levels FROM qt GROUP BY seg
),
opts AS (
    -- Terms 1..j (smallest maxima) unread, the others read to level i: the
    -- top base * 2^i postings, everything when the term has no more.  A term
    -- adds at most scale times a weight of its segment, so its bound is
    -- scale times the weight it is read to.
    SELECT z.seg, j.j, i.i,
           sum(CASE WHEN r.pos <= j.j THEN r.max_w
                    WHEN r.df <= %(bm25_level_base)s::bigint * 2 ^ i.i THEN 0
                    ELSE r.scale * r.wq[i.i + 1] END) AS fsum,
           sum(CASE WHEN r.pos <= j.j THEN 0 ELSE least(r.df, %(bm25_level_base)s::bigint * 2 ^ i.i) END) AS cost
    FROM sizes AS z
    CROSS JOIN LATERAL generate_series(0, z.n) AS j(j)
    CROSS JOIN LATERAL generate_series(0, z.levels) AS i(i)
    JOIN ranked AS r ON r.seg = z.seg
    WHERE (SELECT theta FROM theta) > 0
    GROUP BY z.seg, j.j, i.i
),
pick AS MATERIALIZED (
    SELECT DISTINCT ON (o.seg) o.seg, o.j, least(o.i + %(bm25_deeper)s::int, z.levels) AS i
    FROM opts AS o JOIN sizes AS z ON z.seg = o.seg CROSS JOIN theta AS th
    WHERE o.fsum <= th.cut OR o.fsum = 0
    ORDER BY o.seg, o.cost, o.i, o.j DESC
),
thr AS MATERIALIZED (
    -- f: every posting of the term with w >= f is read; one not read has w < f, and adds less than scale * f.
    SELECT r.seg, r.term_id, r.scale, t.f, r.scale * t.f AS fq
    FROM ranked AS r JOIN pick AS pk ON pk.seg = r.seg
    CROSS JOIN LATERAL (
        SELECT CASE WHEN r.pos <= pk.j THEN least(pk.i, %(bm25_skip_level)s::int) ELSE pk.i END AS lvl) AS l
    CROSS JOIN LATERAL (
        SELECT CASE WHEN r.df <= %(bm25_level_base)s::bigint * 2 ^ l.lvl THEN 0::float8 ELSE r.wq[l.lvl + 1] END AS f) AS t
)"""
    )


def _rest_sql(spec: SearchSpec) -> sql.Composable:
    """The dense plan's ``rest`` rows (seg, row_id, r): each chunk's bound from the query's terms without blocks.

    On a cluster, one arm per segment, so each shard sums its own postings (a
    LATERAL into the union of the segments' distributed tables had Citus pull
    every posting of the shards to the coordinator first: 41 MB at 20,000
    chunks).
    """
    if not spec.layout.distributed:
        return sql.SQL(
            """SELECT qt.seg, p.row_id, sum(qt.scale * p.w) AS r FROM qt CROSS JOIN LATERAL (
        SELECT x.row_id, x.w FROM {postings} AS x WHERE x.seg = qt.seg AND x.term_id = qt.term_id) AS p
    WHERE qt.df < qt.min_df AND (SELECT theta FROM theta) > 0
    GROUP BY qt.seg, p.row_id"""
        ).format(postings=_postings(spec))
    return sql.SQL("\n    UNION ALL ").join(
        sql.SQL(
            "SELECT {seg} AS seg, p.row_id, sum(qt.scale * p.w) AS r FROM qt CROSS JOIN LATERAL ("
            "SELECT x.{dist}, x.row_id, x.w FROM {postings} AS x WHERE x.term_id = qt.term_id AND {xkey}) AS p "
            "WHERE qt.seg = {seg} AND qt.df < qt.min_df AND (SELECT theta FROM theta) > 0 GROUP BY p.{dist}, p.row_id"
        ).format(
            seg=sql.SQL("{}::bigint").format(sql.Literal(g.id)),
            dist=sql.Identifier(g.distribution or "doc_id"),
            postings=segment_table("postings", g.id),
            xkey=g.key_sql("x"),
        )
        for g in spec.layout.segments
    )


def _dense_ctes(spec: SearchSpec, name: str) -> sql.Composable:
    """The dense plan's CTEs: ``name`` (seg, row_id, bound) from the dense terms' summed blocks and the others' postings.

    Per segment: a chunk's bound is ``m * (r + S * (1 + DENSE_REL)) +
    DENSE_ABS``-like: S the float4 sum of qtf times its weights of the
    segment's dense terms (0 where a block has no row), r the float8 sum of
    its bounds of the other terms (their postings read whole), and ``m`` the
    largest factor by which a dense term's weight can grow under the
    snapshot's statistics.  A chunk without a posting of the other terms is
    kept when S exceeds the cut brought to S's scale, found as bits by
    binary_quantize without leaving C; only the set bits' positions are
    turned into row ids.  A chunk of the other terms is looked up in S only
    when r plus the dense terms' maximum contributions reaches the cut.
    """
    return sql.SQL(
        """dterms AS MATERIALIZED (
    -- Per segment: its dense query terms' largest growth factor, and their largest contributions summed.
    SELECT qt.seg, max(qt.scale / qt.qtf) AS m, sum(qt.max_w) AS dmax FROM qt
    WHERE qt.df >= qt.min_df GROUP BY qt.seg
),
qtfv AS MATERIALIZED (
    -- Each qtf of a repeated term as a vector of a block's length, made once: made per block, with
    -- array_fill and a cast of its array, it cost ~0.15 ms a block, more than summing the block.
    SELECT DISTINCT qt.qtf, array_fill(qt.qtf::real, ARRAY[%(bm25_dense_block)s::int])::vector AS v
    FROM qt WHERE qt.qtf > 1
),
blocks AS MATERIALIZED (
    -- S per segment and block of row ids, summed by pgvector (float4); a term the query repeats, times its qtf
    -- (a short last block by the start of the qtf vector).  Each block is stored as a sparsevec (its postings
    -- only) and made a dense vector once (OFFSET 0: the cast is not pasted into each use of d.v).
    SELECT qt.seg, d.blk, sum(CASE WHEN qt.qtf = 1 THEN d.v
                                   WHEN vector_dims(d.v) = %(bm25_dense_block)s::int THEN d.v * k.v
                                   ELSE d.v * subvector(k.v, 1, vector_dims(d.v)) END) AS s
    FROM qt LEFT JOIN qtfv AS k ON k.qtf = qt.qtf CROSS JOIN LATERAL (
        SELECT x.blk, x.v FROM {dense} AS x WHERE x.seg = qt.seg AND x.term_id = qt.term_id OFFSET 0) AS d
    WHERE qt.df >= qt.min_df AND (SELECT theta FROM theta) > 0
    GROUP BY qt.seg, d.blk
),
dcut AS MATERIALIZED (
    -- cut: the theta cut brought to S's scale, (cut - abs) / (1 + rel) / m as float4, and as a vector.
    SELECT dt.seg, dc.cut, array_fill(dc.cut, ARRAY[%(bm25_dense_block)s::int])::vector AS v, dt.m, dt.dmax
    FROM dterms AS dt CROSS JOIN LATERAL (
        SELECT ((th.cut - %(bm25_dense_abs)s::float8) / (1 + %(bm25_dense_rel)s::float8) / dt.m)::real AS cut
        FROM theta AS th) AS dc
),
bq AS MATERIALIZED (
    -- Bit i of a block: S > cut, the bound of a chunk without other postings can reach
    -- theta.  The difference of two floats is positive exactly when the first is larger:
    -- no rounding hides a chunk here.
    -- S rides along: joining bq back to blocks for it was a nested loop rescanning blocks
    -- (64 kB a row) once per block wherever the planner misjudged their number.
    SELECT b.seg, b.blk, vector_dims(b.s) AS n, b.s,
           binary_quantize(b.s - CASE WHEN vector_dims(b.s) = %(bm25_dense_block)s::int THEN dc.v
                                      ELSE subvector(dc.v, 1, vector_dims(b.s)) END) AS bits
    FROM blocks AS b JOIN dcut AS dc ON dc.seg = b.seg
),
rest AS MATERIALIZED (
    -- The other terms' postings, read whole (the plan is chosen only when they are few), as bounds.
    {rest}
),
hits AS (
    -- Positions of the set bits: the bit string split on '1', the pieces' lengths summed
    -- (octet_length: length() would count the UTF-8 characters of each piece).  S of each read
    -- from its block alone (subvector): turning a whole block into real[] cost ~0.15 ms, more than
    -- the few chunks of a block that need it.
    SELECT b.seg, b.blk::bigint * %(bm25_dense_block)s::bigint + p.pos - 1 AS row_id,
           (subvector(b.s, p.pos::int, 1)::real[])[1]::float8 AS s
    FROM bq AS b CROSS JOIN LATERAL (
        SELECT sum(octet_length(z.piece) + 1) OVER (ORDER BY z.k) AS pos
        FROM unnest(string_to_array(b.bits::text, '1')) WITH ORDINALITY AS z(piece, k)) AS p
    WHERE bit_count(b.bits) > 0 AND p.pos <= b.n
),
{name} AS MATERIALIZED (
    -- A chunk both in rest and among the hits keeps its larger bound, rest's (r >= 0).
    SELECT x.seg, x.row_id, max(x.bound) AS bound FROM (
        SELECT y.seg, y.row_id, y.bound FROM (
            SELECT r.seg, r.row_id,
                   r.r + coalesce((subvector(b.s, mod(r.row_id, %(bm25_dense_block)s::bigint)::int + 1, 1)::real[])[1],
                                  0)::float8
                         * coalesce(dc.m, 0) * (1 + %(bm25_dense_rel)s::float8) + %(bm25_dense_abs)s::float8 AS bound
            FROM rest AS r LEFT JOIN dcut AS dc ON dc.seg = r.seg
            LEFT JOIN bq AS b ON b.seg = r.seg AND b.blk = (r.row_id / %(bm25_dense_block)s::bigint)::int
            WHERE r.r + coalesce(dc.dmax, 0) >= (SELECT cut FROM theta)) AS y
        WHERE y.bound >= (SELECT cut FROM theta)
        UNION ALL
        SELECT h.seg, h.row_id, h.s * dc.m * (1 + %(bm25_dense_rel)s::float8) + %(bm25_dense_abs)s::float8
        FROM hits AS h JOIN dcut AS dc ON dc.seg = h.seg
    ) AS x
    GROUP BY x.seg, x.row_id
    HAVING max(x.bound) >= (SELECT cut FROM theta)
)"""
    ).format(
        dense=_union(spec, "dense", "t.term_id, t.blk, t.v::vector AS v"),
        rest=_rest_sql(spec),
        name=sql.Identifier(name),
    )


def _summed_ctes(spec: SearchSpec, bm25: Bm25Plan, *, when: sql.Composable, impact: bool) -> sql.Composable:
    """CTEs ``summed``, ``summed_cut`` and ``scored``: every posting of the query's terms summed (when ``when``).

    The full plan (not ``impact``) sums every posting exactly, in lexeme order
    (``ORDER BY qt.ord``: the same operations in the same order as the forward
    table's score, so the same bits), and its survivors keep that score: reading
    the forward table again would cost a correlated subquery per chunk (7 of
    the 16 ms of a SciFact search).  The impact plan's fallback sums only to
    find the cut, and scores its survivors from the forward table.
    """
    k1, b, avgdl = _k1_b_avgdl()
    weight = weight_sql(sql.SQL("qt.idf"), sql.SQL("p.tf"), sql.SQL("p.len"), k1, b, avgdl)
    parts = {
        "weight": weight,
        "postings": _postings(spec),
        "when": when,
        "summed_top": _summed_top(spec, bm25),
        # Filtered: only chunks passing it are worth scoring exactly.
        "summed_where": sql.SQL("")
        if _unfiltered(spec)
        else sql.SQL("AND {}").format(_admits(spec, bm25, "summed", checked="summed_ok")),
        "summed_ok": sql.SQL("summed_ok AS MATERIALIZED ({}),\n").format(_checked_rows(spec, "summed"))
        if _constrained(spec) and bm25.params.get("bm25_admit") != "set"
        else sql.SQL(""),
    }
    # One posting read for both: exact and in lexeme order for the full plan, order-free for the fallback.
    comment, order = (
        ("-- Every chunk with a posting, its exact score: contributions summed in lexeme order ...", " ORDER BY qt.ord")
        if not impact
        else (
            "-- Every chunk with a posting, its exact contributions summed as float8\n"
            "    -- (fast, but the last bit depends on the order rows arrive in) ...",
            "",
        )
    )
    summed = (
        """summed AS MATERIALIZED (
    """
        + comment
        + """
    SELECT qt.seg, p.row_id, sum(qt.qtf * {weight}"""
        + order
        + """) AS s FROM qt CROSS JOIN LATERAL (
        SELECT x.row_id, x.tf, x.len FROM {postings} AS x WHERE x.seg = qt.seg AND x.term_id = qt.term_id) AS p
    WHERE {when}
    GROUP BY qt.seg, p.row_id
),
{summed_ok}summed_cut AS MATERIALIZED (
    -- ... so only the float top (and anything within the margin of its last)
    -- is scored exactly; no chunk outside can beat it.
    SELECT CASE WHEN count(*) < %(depth)s::bigint * %(bm25_max_chunks)s::bigint THEN '-Infinity'::float8
                ELSE min(s) - 1e-9 * (1 + abs(min(s))) END AS cut
    FROM ({summed_top}) AS t
),"""
    )
    if not impact:
        return sql.SQL(
            summed
            + """
scored AS MATERIALIZED (
    -- The chunks that can reach the top, with the exact scores summed above.
    SELECT summed.seg, summed.row_id, summed.s AS score FROM summed
    WHERE summed.s >= (SELECT cut FROM summed_cut) {summed_where}
)"""
        ).format(**parts)
    return sql.SQL(
        summed
        + """
survivors AS MATERIALIZED (
    SELECT cand.seg, cand.row_id FROM cand WHERE cand.bound >= (SELECT cut FROM theta2)
    UNION SELECT summed.seg, summed.row_id FROM summed WHERE summed.s >= (SELECT cut FROM summed_cut) {summed_where}
),
scored AS MATERIALIZED (
    -- Scored exactly from the forward table, in lexeme order: the same last bit as every other plan.
    SELECT f.seg, f.row_id, {score} AS score FROM {forward} AS f JOIN qids AS q ON q.seg = f.seg
    WHERE {rows}
)"""
    ).format(**parts, score=_forward_score(), forward=_forward(spec), rows=_rows_of("survivors"))


def _summed_top(spec: SearchSpec, bm25: Bm25Plan) -> sql.Composable:
    """The float sums of the top ``depth * max_chunks_per_doc`` summed chunks passing the constraints."""
    admits = (
        sql.SQL("") if _unfiltered(spec) else sql.SQL(" WHERE {}").format(_admits(spec, bm25, "m", checked="summed_ok"))
    )
    return sql.SQL(
        "SELECT m.s FROM summed AS m{admits} ORDER BY m.s DESC LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(admits=admits)


def _top(spec: SearchSpec) -> sql.Composable:
    """The top ``depth * max_chunks_per_doc`` scored chunks, ties by (doc_id, chunk); every one is admitted.

    They hold the best chunk of every top-``depth`` document.  Chunks tied
    with the last of them are all read before the doc-id tie-break cuts:
    row ids order like (doc_id, chunk) within a segment, never across.  Every
    plan scores admitted chunks only (:func:`_admits`), so the top scores
    come first (and ties with the last), then only those rows are read for
    their ids, from the narrow filter table where the segments have one.
    """
    return sql.SQL(
        "SELECT c.doc_id, c.chunk, s.score FROM ("
        "SELECT seg, row_id, score FROM scored WHERE score >= coalesce((SELECT score FROM scored ORDER BY score "
        "DESC LIMIT 1 OFFSET (%(depth)s::bigint * %(bm25_max_chunks)s::bigint - 1)), '-Infinity'::float8)"
        ") AS s JOIN {table} AS c ON c.seg = s.seg AND c.row_id = s.row_id "
        "ORDER BY s.score DESC, c.doc_id, c.chunk LIMIT %(depth)s::bigint * %(bm25_max_chunks)s::bigint"
    ).format(table=spec.filter_rows)
