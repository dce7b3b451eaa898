"""The lexical branch: which chunks match the query, and their raw scores.

Two rankers, both computed inside PostgreSQL:

``bm25`` (default)
    Okapi BM25 over the snapshot's precomputed term statistics; see
    ranklock.search.bm25.  :meth:`LexicalBranch.prepare` points the branch at
    the snapshot's statistics and picks the BM25 plan before the SQL is built.
``ts_rank_cd``
    PostgreSQL's cover-density ranking of every chunk matching the tsquery.

Example::

    >>> branch = yield from LexicalBranch.prepare(ctx)   # doctest: +SKIP
    >>> branch.ctes(spec)                                 # the lex_hits ... lex CTEs
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from psycopg import sql

from ..errors import QueryError
from ..snapshot.segments import snapshot_totals
from ..store.steps import Fetch, Steps
from .bm25 import Bm25Plan, choose_plan, query_postings_sql
from .rrf import rrf_weight_sql, tie_window
from .spec import SearchSpec, Signal, shard_ids, where_sql
from .tsquery import tsquery_sql

if TYPE_CHECKING:
    from ..settings import SearchParams
    from .spec import BranchContext, Scope

__all__ = ["LEXICAL_RANKERS", "QUERY_SYNTAXES", "LexicalBranch"]

LEXICAL_RANKERS = ("bm25", "ts_rank_cd")
QUERY_SYNTAXES = ("natural", "websearch")


@dataclass(frozen=True)
class LexicalBranch:
    """The keyword branch: BM25 (or ts_rank_cd) over the chunks' tsvectors."""

    name: ClassVar[str] = "lexical"
    alias: ClassVar[str] = "l"
    cte: ClassVar[str] = "lex"
    signal: ClassVar[Signal] = Signal("lexical_rank", "lexical_score", "score", "float8", "BM25")
    ranks_every_document: ClassVar[bool] = False
    can_fall_short: ClassVar[bool] = False
    #: Its parameters (ranker, syntax, k1, b) are the search's own, echoed with them.
    echo_keys: ClassVar[tuple[str, ...]] = ()

    #: The normalised query text.
    query: str
    language: str
    accent: str
    syntax: str
    ranker: str
    k1: float
    b: float
    #: The BM25 plan on the snapshot's statistics (None for ts_rank_cd).
    bm25: Bm25Plan | None = None

    @classmethod
    def prepare(cls, ctx: BranchContext) -> Steps[tuple[LexicalBranch | None, str | None]]:
        """The branch for ``ctx``'s query, after one probe: (the branch or None, a warning or None).

        When the query has only stop words or only exclusions, lexical mode is
        refused (QueryError) and hybrid mode runs without this branch.
        """
        from ..validation import short_repr

        sp, coll = ctx.params, ctx.coll
        if sp.lexical_ranker not in LEXICAL_RANKERS:
            raise QueryError(f"unknown lexical ranker {sp.lexical_ranker!r}; use one of {', '.join(LEXICAL_RANKERS)}.")
        if sp.query_syntax not in QUERY_SYNTAXES:
            raise QueryError(f"unknown query syntax {sp.query_syntax!r}; use one of {', '.join(QUERY_SYNTAXES)}.")
        branch = cls(
            query=ctx.spec.query,
            language=coll.language,
            accent=coll.accent,
            syntax=sp.query_syntax,
            ranker=sp.lexical_ranker,
            k1=sp.k1,
            b=sp.b,
        )
        layout = ctx.spec.layout
        # Is anything searchable, and (BM25) how many postings its terms have: fixed by the snapshot and its
        # segments as they are (their versions, ranklock.search.context.Guard) and the query: read once a process.
        key = ("lexical", ctx.version, layout.ids, coll.language, coll.accent, branch.syntax, branch.query)
        rows = ctx.memo.probes.get(key) if ctx.memo is not None else None
        if rows is None:
            count_sql, count_params = query_postings_sql(branch, layout)
            rows = yield Fetch(
                sql.SQL(
                    "SELECT numnode(ranklock.query_tsquery(%s::regconfig, %s, %s, %s)) AS n, "
                    "cardinality(ranklock.query_terms(%s::regconfig, %s, %s, %s)) AS positive, {} AS postings"
                ).format(count_sql),
                [*(2 * [coll.language, coll.accent, branch.syntax, branch.query]), *count_params],
            )
            if ctx.memo is not None:
                ctx.memo.probes.put(key, rows)
        row = rows[0] if rows else None
        lexical_only = ctx.spec.mode == cls.name
        if row is None or row["n"] == 0:
            if lexical_only:
                raise QueryError(
                    f"the query {short_repr(ctx.request_query)} has no searchable words in {coll.language} (only "
                    "stop words or punctuation); add content words, or use --mode semantic."
                )
            return None, "query has only stop words: the lexical branch was skipped"
        if not row["positive"]:
            # websearch "-word" alone: it would match (and tie) nearly every chunk.
            if lexical_only:
                raise QueryError(
                    f"the query {short_repr(ctx.request_query)} only excludes words (-word); say what to look for "
                    "too, e.g. 'canyon -alpha', or drop the minus signs."
                )
            return None, "query only excludes words: the lexical branch was skipped"
        if branch.ranker != "bm25":
            return branch, None
        postings = None if row["postings"] is None else [int(x) for x in row["postings"]]
        bm25 = choose_plan(
            branch, layout, snapshot_totals(ctx.snap), postings, terms=int(row["positive"]), collection=coll.name
        )
        terms_sql = bm25.terms_sql(ctx.spec)
        if terms_sql is not None:
            # A plan that binds the query's terms (every shard scores with the snapshot's df and idf): read them
            # once, here, and once a process (the snapshot and the query fix them, as they fix the probe).
            terms_key = ("lexical-terms", *key[1:])
            terms = ctx.memo.probes.get(terms_key) if ctx.memo is not None else None
            if terms is None:
                chosen = dataclasses.replace(branch, bm25=bm25)
                terms = yield Fetch(terms_sql, chosen.params(ctx.spec))
                if ctx.memo is not None:
                    ctx.memo.probes.put(terms_key, terms)
            bm25 = bm25.with_terms(terms)
        return dataclasses.replace(branch, bm25=bm25), None

    def constrained(self, scope: Scope, sp: SearchParams, spec: SearchSpec) -> LexicalBranch:  # noqa: ARG002 (the Branch protocol)
        """Under a constraint, the cheapest way to meet it: score what it admits, or prune and check (bm25)."""
        if self.bm25 is None:
            return self
        return dataclasses.replace(self, bm25=self.bm25.constrained(spec, scope.chunks))

    def ctes(self, spec: SearchSpec) -> sql.Composable:
        # On a cluster the hits are every shard's top documents (ranklock.search.sharded), ranked here as on one node.
        hits = (
            sql.SQL("SELECT doc_id, chunk, score FROM shard_rows WHERE branch = {}").format(sql.Literal(self.name))
            if spec.layout.distributed
            else self._hits_sql(spec, where_sql(spec))
        )
        return sql.SQL(
            """lex_hits AS ({hits}),
lex_best AS (
    SELECT doc_id, chunk, score,
           row_number() OVER (PARTITION BY doc_id ORDER BY score DESC, chunk) AS rn
    FROM lex_hits
),
lex_top AS (
    SELECT doc_id, chunk, score,
           rank() OVER (ORDER BY score DESC) AS rank,
           row_number() OVER (ORDER BY score DESC, doc_id, chunk) AS pos
    FROM lex_best WHERE rn = 1
    ORDER BY score DESC, doc_id, chunk
    LIMIT %(depth)s::bigint
),
lex AS (SELECT doc_id, chunk, score, rank, {rrf} AS rrf FROM lex_top{window})"""
        ).format(hits=hits, rrf=rrf_weight_sql(spec), window=tie_window(spec))

    def shard_hits(self, spec: SearchSpec) -> sql.Composable:
        """Its top ``depth`` documents on one shard, each by its best chunk: the one-node ``lex_best`` and ``lex_top``.

        A document's chunks share a shard, so its best chunk is the shard's; the
        global top ``depth`` is in the shards' tops (ranklock.search.sharded).
        """
        return sql.SQL(
            """SELECT {name} AS branch, b.seg, b.row_id, b.doc_id, b.chunk, b.score FROM (
    SELECT h.seg, h.row_id, h.doc_id, h.chunk, h.score,
           row_number() OVER (PARTITION BY h.doc_id ORDER BY h.score DESC, h.chunk) AS rn
    FROM ({hits}) AS h
) AS b
WHERE b.rn = 1 ORDER BY b.score DESC, b.doc_id, b.chunk LIMIT %(depth)s::bigint"""
        ).format(name=sql.Literal(self.name), hits=self._hits_sql(spec, where_sql(spec)))

    def _hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        """Rows (doc_id, chunk, score) of every chunk that can rank in the branch, passing ``where``."""
        if self.ranker == "bm25":
            if self.bm25 is None:
                # Never fall back silently to another ranker: the result would
                # claim BM25 and be something else.
                raise QueryError(
                    "BM25 was asked but the branch carries no BM25 statistics; build it through "
                    "Engine.search, or pass lexical_ranker='ts_rank_cd'."
                )
            return self.bm25.hits_sql(spec, where)
        return sql.SQL(
            "SELECT c.doc_id, c.chunk, ts_rank_cd(c.tsv, q.tsq)::float8 AS score{ids} "
            "FROM {table} AS c, (SELECT {tsq} AS tsq) AS q "
            "WHERE c.tsv @@ q.tsq AND {where}"
        ).format(ids=shard_ids(spec, "c"), table=spec.table, tsq=tsquery_sql(), where=where)

    def params(self, spec: SearchSpec) -> Mapping[str, Any]:  # noqa: ARG002 (the Branch protocol)
        out: dict[str, Any] = {"q": self.query, "cfg": self.language, "accent": self.accent, "syntax": self.syntax}
        if self.ranker == "bm25":
            out.update({"k1": self.k1, "b": self.b})
            out.update(self.bm25.params() if self.bm25 is not None else {})
        return out

    def settings(self) -> list[tuple[str, str]]:
        return []

    @property
    def approximate(self) -> bool:
        return False

    def echo(self) -> dict[str, Any]:
        return {}
