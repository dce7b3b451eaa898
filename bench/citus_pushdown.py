"""What Citus does with each of ranklock's search statements, and the SQL shapes it pushes down (issue 25, phase 1).

Evidence for the sharded-snapshot design, on a local cluster (``ranklock db cluster``, a coordinator and
2 workers) and small generated data (bench/large_corpus.py documents and vectors):

* ``one``: a collection built by the engine on the coordinator; its tables stay local (one node).
* ``sharded``: the same documents, built the same way, then its snapshot tables distributed in place the
  way the design says: ``chunks_<id>``, ``forward_<id>`` and ``postings_<id>`` by ``doc_id``, co-located
  (the last two get a ``doc_id`` column; unique keys must hold the distribution column), ``terms_<id>`` and
  ``dense_<id>`` as reference tables.  The weights were computed once on one node, so any difference in a
  result comes from the query, never from the data.

For each BM25 plan (full, impact, dense, admitted), the vector branch (HNSW, exact) and the fused hybrid
statement, it runs, per query, on ``sharded``:

``as-is``      the statement ``Engine.search_sql`` builds, unchanged;
``group``      the same with every per-chunk ``GROUP BY p.row_id`` grouped by ``p.doc_id, p.row_id``;
``pushdown``   the shapes Citus pushes down in one step per branch: the lexical branch as one subquery
               (postings times ``qtf`` summed per chunk in term order, grouped by ``doc_id``, best chunk per document by
               a window partitioned by ``doc_id``, ``ORDER BY score DESC, doc_id, chunk LIMIT depth``), the
               exact vector branch without its ``OFFSET 0`` fence; for the admitted plan also its own
               shape (the admitted chunks scored from the forward table, term ids bound);
``per-shard``  the plan's own lexical statement run inside each shard by ``run_command_on_shards`` (a
               function on every node maps the shard to its co-located shards), merged on the coordinator;

and compares the rows with the one-node statement on ``one``: rank, doc id, chunk and the float8 scores,
bit for bit.  ``EXPLAIN (ANALYZE)`` gives the distributed subplans (each one a round trip whose result
the coordinator collects and, if needed, sends back to the workers) and the bytes the coordinator
received.  It also checks which transaction-local settings reach the workers.

    python bench/citus_pushdown.py --docs 3000 --queries 20 --home /tmp/citus-bench

Writes bench/out/citus_pushdown.json and prints a table.  Latencies are of a 2-core machine shared with
other work, with all three servers on it: read the plan shapes and bytes, not the milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from large_corpus import FIELDS, GeneratedEmbedder, generate, queries
from ranklock import Engine
from ranklock.search import bm25 as bm25_module
from ranklock.search.execute import constrain_steps, setup_steps
from ranklock.search.fusion import build_search_sql
from ranklock.search.lexical import LexicalBranch
from ranklock.search.request import SearchRequest
from ranklock.search.spec import SearchSpec, where_sql
from ranklock.store.cluster import LocalCluster
from ranklock.store.steps import run_steps
from ranklock.store.tables import snapshot_table, snapshot_table_name

OUT = Path(__file__).resolve().parent / "out" / "citus_pushdown.json"

#: Module constants that force each BM25 plan on a small corpus (as tests/test_bm25*.py do).
FORCE: dict[str, dict[str, int]] = {
    "full": {},
    "impact": {"FULL_SCAN_POSTINGS": 0, "DENSE_MAX_TERMS": 0, "CHUNK_POSTINGS": 10**12},
    "dense": {"FULL_SCAN_POSTINGS": 0, "CHUNK_POSTINGS": 10**12},
    "admitted": {"FULL_SCAN_POSTINGS": 0},
}

#: (case, mode, forced BM25 plan, filter, extra search params).  exact_threshold 0 keeps the HNSW scan.
CASES: list[tuple[str, str, str, str | None, dict[str, Any]]] = [
    ("lexical full", "lexical", "full", None, {}),
    ("lexical full, filter", "lexical", "full", "category = 'cat03'", {}),
    ("lexical impact", "lexical", "impact", None, {}),
    ("lexical dense", "lexical", "dense", None, {}),
    ("lexical admitted", "lexical", "admitted", "bucket < 300", {}),
    ("semantic exact", "semantic", "full", None, {}),
    ("semantic exact, filter", "semantic", "full", "bucket < 2000", {}),
    ("semantic hnsw", "semantic", "full", None, {"exact_threshold": 0}),
    ("hybrid full + exact", "hybrid", "full", None, {}),
    ("hybrid impact + hnsw", "hybrid", "impact", None, {"exact_threshold": 0}),
    ("hybrid dense + exact, as_of", "hybrid", "dense", None, {"as_of": "2030-01-01T00:00:00Z"}),
]

#: The shard count of the distributed tables (Citus's default is 32; fewer keeps EXPLAIN readable).
SHARDS = 8


@contextlib.contextmanager
def forced(plan: str) -> Iterator[None]:
    old = {k: getattr(bm25_module, k) for k in FORCE[plan]}
    for k, v in FORCE[plan].items():
        setattr(bm25_module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(bm25_module, k, v)


def distribute(conn: psycopg.Connection[Any], sid: int, shards: int) -> dict[str, float]:
    """Distribute snapshot ``sid``'s tables in place as the design says; seconds per step."""
    t = {k: snapshot_table(k, sid) for k in ("chunks", "forward", "postings", "terms", "dense")}
    pkey = {k: sql.Identifier(snapshot_table_name(k, sid) + "_pkey") for k in ("chunks", "forward")}
    steps: list[tuple[str, sql.Composable, list[Any]]] = [
        # A unique key of a distributed table must hold its distribution column.
        (
            "chunks key (row_id, doc_id)",
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}, ADD PRIMARY KEY (row_id, doc_id)").format(
                t["chunks"], pkey["chunks"]
            ),
            [],
        ),
        (
            "forward.doc_id",
            sql.SQL(
                'ALTER TABLE {f} ADD COLUMN doc_id text COLLATE "C"; '
                "UPDATE {f} AS f SET doc_id = c.doc_id FROM {c} AS c WHERE c.row_id = f.row_id; "
                "ALTER TABLE {f} ALTER COLUMN doc_id SET NOT NULL, DROP CONSTRAINT {k}, ADD PRIMARY KEY (row_id, doc_id)"
            ).format(f=t["forward"], c=t["chunks"], k=pkey["forward"]),
            [],
        ),
        (
            "postings.doc_id",
            sql.SQL(
                'ALTER TABLE {p} ADD COLUMN doc_id text COLLATE "C"; '
                "UPDATE {p} AS p SET doc_id = c.doc_id FROM {c} AS c WHERE c.row_id = p.row_id"
            ).format(p=t["postings"], c=t["chunks"]),
            [],
        ),
        (
            "distribute chunks",
            sql.SQL("SELECT create_distributed_table(%s, 'doc_id', shard_count => %s)"),
            [t["chunks"].as_string(conn), shards],
        ),
    ]
    for kind in ("forward", "postings"):
        steps.append(
            (
                f"distribute {kind}",
                sql.SQL("SELECT create_distributed_table(%s, 'doc_id', colocate_with => %s)"),
                [t[kind].as_string(conn), t["chunks"].as_string(conn)],
            )
        )
    for kind in ("terms", "dense"):
        steps.append((f"reference {kind}", sql.SQL("SELECT create_reference_table(%s)"), [t[kind].as_string(conn)]))
    seconds = {}
    for name, stmt, params in steps:
        t0 = time.perf_counter()
        conn.execute(stmt, params)
        seconds[name] = round(time.perf_counter() - t0, 3)
    # The coordinator keeps the local copy of what it distributed; it is never read again.
    for kind in ("chunks", "forward", "postings"):
        conn.execute("SELECT truncate_local_data_after_distributing_table(%s)", [t[kind].as_string(conn)])
    return seconds


def planned(eng: Engine, name: str, query: str, mode: str, filt: str | None, extra: dict[str, Any]) -> SearchSpec:
    """The spec ``Engine.search_sql`` would build (the plans from the same count), kept as a value."""
    req = SearchRequest.of(name, query, k=20, mode=mode, filter=filt, **extra)
    req.check()
    coll = eng.collection(name)
    snap = eng._snapshot_for(coll, None)

    def steps() -> Any:
        setup = yield from setup_steps(coll, snap, req, eng._collection_embedder, store_vector=False)
        spec, _ = yield from constrain_steps(eng.rdb.dsn, setup.spec, snap, setup.params, build_counts=False)
        return spec

    spec: SearchSpec = run_steps(eng.rdb, steps())
    return spec


Shape = Callable[[SearchSpec, sql.Composable], sql.Composable]


@dataclass(frozen=True)
class ShapedLexical(LexicalBranch):
    """The lexical branch with its hits statement replaced by ``shape`` and ``extra`` values bound (the prototypes)."""

    shape: Shape | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _hits_sql(self, spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        assert self.shape is not None
        return self.shape(spec, where)

    def params(self, spec: SearchSpec) -> Mapping[str, Any]:
        return {**super().params(spec), **self.extra}


def shaped(spec: SearchSpec, shape: Shape, extra: Mapping[str, Any] | None = None) -> SearchSpec:
    """``spec`` with its lexical branch's hits built by ``shape``; everything else, fusion included, unchanged."""
    lex = spec.branch("lexical")
    assert isinstance(lex, LexicalBranch)
    kept = {f.name: getattr(lex, f.name) for f in fields(LexicalBranch)}
    new = ShapedLexical(**kept, shape=shape, extra=dict(extra or {}))
    return spec.with_branches(tuple(new if b.name == "lexical" else b for b in spec.branches))


# -- the shapes -----------------------------------------------------------------------------------------


def group_by_doc(text: str) -> str:
    """Per-chunk ordered sums grouped by the distribution column too (Citus 14 fails on the others)."""
    return text.replace("GROUP BY p.row_id", "GROUP BY p.doc_id, p.row_id")


_EXACT = re.compile(
    r"SELECT doc_id, chunk, dist FROM \((SELECT c\.doc_id, c\.chunk, \(c\.embedding <=> (%\(qvec\)s)\)::float8 AS dist "
    r"FROM (.+?) AS c WHERE (.+?)) OFFSET 0\) AS e ORDER BY dist \+ 0, doc_id, chunk LIMIT"
)


def exact_without_fence(text: str) -> str:
    """The exact vector scan as one ORDER BY ... LIMIT on the chunk table: Citus pushes the top-N to each shard.

    ``OFFSET 0`` (which keeps each distance computed once on one node) makes
    the subquery one Citus must run first and collect whole.
    """
    out, n = _EXACT.subn(r"\1 ORDER BY (c.embedding <=> \2)::float8 + 0, c.doc_id, c.chunk LIMIT", text)
    return out if n else text


def _shard_top(scored: sql.Composable, spec: SearchSpec, where: sql.Composable) -> sql.Composable:
    """Per shard, the top ``depth`` documents of ``scored`` (rows doc_id, row_id, score of the chunks scored).

    Best chunk per document by a window partitioned by ``doc_id``, then
    ``ORDER BY score DESC, doc_id, chunk LIMIT depth``: Citus sends the sort
    and the LIMIT to every shard and merges by the same order on the coordinator.
    """
    return sql.SQL(
        "SELECT b.doc_id, b.chunk, b.score FROM ("
        "SELECT c.doc_id, c.chunk, s.score, "
        "       row_number() OVER (PARTITION BY c.doc_id ORDER BY s.score DESC, c.chunk) AS rn "
        "FROM ({scored}) AS s "
        "JOIN {chunks} AS c ON c.doc_id = s.doc_id AND c.row_id = s.row_id WHERE {where}) AS b "
        "WHERE b.rn = 1 ORDER BY b.score DESC, b.doc_id, b.chunk LIMIT %(depth)s::bigint"
    ).format(scored=scored, chunks=spec.table, where=where)


def lexical_pushdown(sid: int) -> Shape:
    """The lexical branch as one subquery Citus pushes down: per shard, its top ``depth`` documents.

    Every posting of the query's terms is summed per chunk in term order,
    each times its ``qtf`` (the full plan's exact sum), grouped by ``doc_id``
    too; the terms are the engine's own ``qt`` rows (the reference ``terms``
    table and the query's term frequencies), joined on the workers.
    """

    def build(spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        scored = sql.SQL(
            "SELECT p.doc_id, p.row_id, sum(qt.qtf * p.w ORDER BY p.term_id) AS score "
            "FROM {postings} AS p JOIN ({qt}) AS qt ON qt.term_id = p.term_id "
            "GROUP BY p.doc_id, p.row_id"
        ).format(
            postings=snapshot_table("postings", sid), qt=bm25_module._query_terms(spec, snapshot_table("terms", sid))
        )
        return _shard_top(scored, spec, where)

    return build


def admitted_pushdown(sid: int) -> Shape:
    """The admitted plan as one subquery Citus pushes down: the admitted chunks holding a query term, scored exactly.

    The same forward-table score as the plan (weights times ``qtf``, summed in
    term order), with the query's term ids and frequencies bound as arrays
    (``qids``, ``qtfs``, as the probe that counts the postings would read them)
    instead of a CTE: a correlated subquery over ``unnest`` of bound arrays is
    pushed down when the FROM clause holds only co-located tables joined on
    ``doc_id``.
    """

    def build(spec: SearchSpec, where: sql.Composable) -> sql.Composable:
        scored = sql.SQL(
            "SELECT f.doc_id, f.row_id, "
            "       (SELECT coalesce(sum(x.qtf * f.ws[array_position(f.tids, x.tid)] ORDER BY x.tid), 0) "
            "        FROM unnest(%(qids)s::int[], %(qtfs)s::int[]) AS x(tid, qtf)) AS score "
            "FROM {forward} AS f WHERE f.tids && %(qids)s::int[]"
        ).format(forward=snapshot_table("forward", sid))
        return _shard_top(scored, spec, where)

    return build


def query_terms(conn: psycopg.Connection[Any], sid: int, spec: SearchSpec, lex: LexicalBranch) -> dict[str, list[int]]:
    """The query's term ids and frequencies in term order (what the probe would bind for the admitted shape)."""
    row = conn.execute(
        sql.SQL(
            "SELECT coalesce(array_agg(term_id ORDER BY term_id), '{{}}'), coalesce(array_agg(qtf ORDER BY term_id), '{{}}') "
            "FROM ({}) AS qt"
        ).format(bm25_module._query_terms(spec, snapshot_table("terms", sid))),
        {"cfg": lex.language, "accent": lex.accent, "syntax": lex.syntax, "q": lex.query},
    ).fetchone()
    conn.commit()
    return {"qids": list(row[0]), "qtfs": [int(x) for x in row[1]]} if row else {"qids": [], "qtfs": []}


SHARD_FUNCTION = """
CREATE OR REPLACE FUNCTION public.ranklock_shard_rows(stmt text, params jsonb, chunk_shard text, tables text[])
RETURNS text LANGUAGE plpgsql AS $fn$
-- Runs ``stmt`` on one shard group: each of ``tables`` (qualified names) is replaced by its shard of
-- the same hash range as ``chunk_shard`` (a reference table: its one shard); $1 is ``params``.
DECLARE
    s text := stmt;
    rel text;
    shard text;
    out text;
BEGIN
    FOREACH rel IN ARRAY tables LOOP
        SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname || '_' || s2.shardid) INTO shard
        FROM pg_dist_shard AS s1
        JOIN pg_dist_shard AS s2 ON s2.logicalrelid = rel::regclass
             AND (s2.shardminvalue IS NULL OR s2.shardminvalue = s1.shardminvalue)
        JOIN pg_class AS c ON c.oid = s2.logicalrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE s1.shardid = substring(chunk_shard FROM '_([0-9]+)$')::bigint;
        s := replace(s, rel, shard);
    END LOOP;
    EXECUTE format('SELECT coalesce(json_agg(r), ''[]'')::text FROM (%s) AS r', s) INTO out USING params;
    RETURN out;
END
$fn$;
"""


def _jsonb_param(name: str, value: Any) -> str:
    """How the per-shard statement reads bound value ``name`` from its jsonb argument, typed like the value."""
    ref = f"($1 -> '{name}')"
    if isinstance(value, bool):
        return f"({ref})::boolean"
    if isinstance(value, int):
        return f"({ref})::bigint"
    if isinstance(value, float):
        return f"({ref})::float8"
    if isinstance(value, (list, tuple)):
        elem = "bigint" if value and all(isinstance(v, int) for v in value) else "text"
        return f"ARRAY(SELECT x::{elem} FROM jsonb_array_elements_text({ref}) AS x)"
    if isinstance(value, datetime):
        return f"({ref} #>> '{{}}')::timestamptz"
    return f"({ref} #>> '{{}}')"


def lexical_per_shard(spec: SearchSpec, sid: int, conn: psycopg.Connection[Any], params: dict[str, Any]) -> SearchSpec:
    """``spec`` with its lexical branch's own statement (impact, dense, admitted: theta and all) run in every shard.

    ``run_command_on_shards`` runs one command per shard of the chunk table,
    in parallel, through Citus's executor; the command calls a function on
    the worker that points the statement at that shard group, and the rows
    come back as JSON, merged by the branch's own lex CTEs on the coordinator.
    Values stay bound: the statement, its values (one jsonb, read back typed)
    and the table names are parameters of the search statement.
    """
    lex = spec.branch("lexical")
    assert isinstance(lex, LexicalBranch) and lex.bm25 is not None
    text = bm25_module.bm25_hits_sql(spec, lex.bm25, where_sql(spec)).as_string(conn)
    used = sorted(set(re.findall(r"%\((\w+)\)s", text)))
    for name in used:
        text = text.replace(f"%({name})s", _jsonb_param(name, params[name]))
    text = text.replace("%%", "%")
    if "%s" in text:
        raise ValueError("the statement holds %s, which run_command_on_shards would substitute")
    tables = [snapshot_table(k, sid).as_string(conn) for k in ("chunks", "forward", "postings", "terms", "dense")]
    values = {n: (params[n].isoformat() if isinstance(params[n], datetime) else params[n]) for n in used}
    extra = {"shard_stmt": text, "shard_params": Jsonb(values), "shard_tables": tables}
    return shaped(spec, lambda _spec, _where: sql.SQL(PER_SHARD), extra)


#: One command per shard of the chunk table, run in parallel by Citus: the plan's statement on that shard group.
ON_SHARDS = (
    "run_command_on_shards((%(shard_tables)s::text[])[1]::regclass, "
    "  format('SELECT public.ranklock_shard_rows(%%L, %%L::jsonb, %%L, %%L::text[])', "
    "         %(shard_stmt)s::text, %(shard_params)s::text, '%%s', %(shard_tables)s::text[])) AS r"
)
#: The lexical rows of every shard, merged here.
PER_SHARD = (
    f"SELECT x.doc_id, x.chunk, x.score FROM {ON_SHARDS} "
    "CROSS JOIN LATERAL json_to_recordset(CASE WHEN r.success THEN r.result::json "
    "  ELSE public.ranklock_shard_failed(r.shardid, r.result) END) AS x(doc_id text, chunk int, score float8)"
)
#: Bytes and rows the per-shard commands send the coordinator.
PER_SHARD_BYTES = (
    "SELECT sum(octet_length(r.result))::bigint, sum(json_array_length(r.result::json))::bigint, count(*) "
    f"FROM {ON_SHARDS}"
)


SHARD_FAILED = """
CREATE OR REPLACE FUNCTION public.ranklock_shard_failed(shard bigint, msg text) RETURNS json
LANGUAGE plpgsql AS $fn$ BEGIN RAISE EXCEPTION 'shard % failed: %', shard, msg; END $fn$;
"""

# -- running and reading EXPLAIN ------------------------------------------------------------------------


def _kb(text: str) -> float:
    num, unit = text.split()
    return float(num) * {"bytes": 1 / 1024, "kB": 1.0, "MB": 1024.0}[unit]


def explain(conn: psycopg.Connection[Any], text: str, params: dict[str, Any]) -> dict[str, Any]:
    lines = [
        r[0]
        for r in conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) " + text, params
        ).fetchall()
    ]
    received = [_kb(m.group(1)) for ln in lines if (m := re.search(r"Tuple data received from nodes: (.+)$", ln))]
    return {
        "subplans": sum("Distributed Subplan" in ln for ln in lines),
        "tasks": sum(int(m.group(1)) for ln in lines if (m := re.search(r"Task Count: (\d+)", ln))),
        "kb_to_coordinator": round(sum(received), 1),
        "per_shard_limit": any("Limit" in ln for ln in _task_lines(lines)),
        "lines": lines,
    }


def _task_lines(lines: list[str]) -> list[str]:
    """The lines of the plans of the tasks (what each shard ran)."""
    out, depth = [], None
    for ln in lines:
        indent = len(ln) - len(ln.lstrip())
        if ln.strip().startswith("->  Task"):
            depth = indent
            continue
        if depth is not None and indent > depth:
            out.append(ln)
        elif depth is not None and indent <= depth:
            depth = None
    return out


def run_case(
    conn: psycopg.Connection[Any], text: str, params: dict[str, Any], want: list[tuple[Any, ...]]
) -> dict[str, Any]:
    try:
        t0 = time.perf_counter()
        rows = conn.execute(text, params).fetchall()
        ms = (time.perf_counter() - t0) * 1000
        # EXPLAIN ANALYZE in its own transaction: after the statement in the same one, Citus refuses it
        # ("a local execution has accessed a placement": the reference table was read locally).
        conn.commit()
        info = explain(conn, text, params)
    except psycopg.Error as exc:
        conn.rollback()
        diag = exc.diag
        return {"error": f"{type(exc).__name__}: {diag.message_primary or exc}", "detail": diag.message_detail}
    conn.commit()
    got = [tuple(r[:8]) for r in rows]
    return {**info, "ms": round(ms, 1), "identical": got == want, "rows": len(got)}


def engine_search(eng: Engine, query: str, mode: str, filt: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    """``Engine.search`` end to end on the sharded collection, its hits compared with the one-node collection's."""
    try:
        got = eng.search("sharded", query, k=20, mode=mode, filter=filt, **extra)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    want = eng.search("one", query, k=20, mode=mode, filter=filt, **extra)
    same = [h.model_dump() for h in got.hits] == [h.model_dump() for h in want.hits]
    return {"identical": same and got.matching_count == want.matching_count, "rows": len(got.hits)}


def hnsw_index_on_shards(conn: psycopg.Connection[Any], eng: Engine, qs: list[str]) -> dict[str, Any]:
    """The HNSW branch with the index forced on every shard (small shards otherwise get an exact scan).

    ``enable_seqscan`` off and ``hnsw.ef_search`` 200 on both collections, reaching
    the workers through ``citus.propagate_set_commands``; the answers are
    compared with the one-node HNSW answers, and EXPLAIN says whether each
    task scanned its shard's HNSW index.
    """
    same, index_used = 0, True
    for q in qs:
        ref = planned(eng, "one", q, "semantic", None, {"exact_threshold": 0})
        spec = planned(eng, "sharded", q, "semantic", None, {"exact_threshold": 0})
        out = []
        for p in (ref, spec):
            text, params = build_search_sql(p)
            with conn.transaction():
                conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
                conn.execute("SET LOCAL enable_seqscan = off")
                conn.execute("SET LOCAL hnsw.ef_search = 200")
                out.append([tuple(r[:8]) for r in conn.execute(text.as_string(conn), params).fetchall()])
            if p is spec:
                # EXPLAIN ANALYZE: a plain EXPLAIN of a statement with bound values fails on the workers
                # ("could not determine data type of parameter $1"), and the transaction with it.
                with conn.transaction():
                    conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
                    conn.execute("SET LOCAL enable_seqscan = off")
                    conn.execute("SET LOCAL hnsw.ef_search = 200")
                    lines = explain(conn, text.as_string(conn), params)["lines"]
                index_used = index_used and any("Index Scan using" in ln and "hnsw" in ln for ln in _task_lines(lines))
        same += out[0] == out[1]
    return {"queries": len(qs), "identical": same, "every task scanned its HNSW index": index_used}


def settings_reach_workers(conn: psycopg.Connection[Any], sid: int) -> dict[str, str]:
    """hnsw.ef_search as the workers see it after each way of setting it for one transaction."""
    probe = sql.SQL(
        "SELECT string_agg(DISTINCT current_setting('hnsw.ef_search'), ',') FROM "
        "(SELECT doc_id FROM {} GROUP BY doc_id) AS d"
    ).format(snapshot_table("chunks", sid))
    out = {}
    for name, setup in (
        ("default", []),
        ("set_config(..., true), as the engine does", ["SELECT set_config('hnsw.ef_search', '200', true)"]),
        ("SET LOCAL", ["SET LOCAL hnsw.ef_search = 200"]),
        (
            "SET LOCAL with citus.propagate_set_commands = 'local'",
            ["SET LOCAL citus.propagate_set_commands = 'local'", "SET LOCAL hnsw.ef_search = 200"],
        ),
    ):
        with conn.transaction():
            for s in setup:
                conn.execute(s)
            row = conn.execute(probe).fetchone()
            out[name] = str(row[0]) if row else "?"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--home", default="/tmp/citus-bench")
    ap.add_argument("--shards", type=int, default=SHARDS)
    ap.add_argument("--explain", action="store_true", help="also print one EXPLAIN per case and shape")
    args = ap.parse_args()
    load = os.getloadavg()
    cluster = LocalCluster(Path(args.home))
    if not cluster.nodes():
        cluster.create(2)
    cluster.start()
    eng = Engine(dsn=cluster.dsn, embedder=None, log_queries=False, home=Path(args.home))
    emb = GeneratedEmbedder()
    eng._embedders[emb.id] = emb
    docs = generate(args.docs)
    build: dict[str, Any] = {}
    for name in ("one", "sharded"):
        t0 = time.perf_counter()
        eng.ingest(name, docs, replace=True, create={"fields": FIELDS, "index": "hnsw", "embedder": emb.id})
        build[name] = round(time.perf_counter() - t0, 2)
    sid = eng.collection("sharded").active_snapshot_id
    assert sid is not None
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        build["distribute"] = distribute(conn, sid, args.shards)
        conn.execute(SHARD_FUNCTION)
        conn.execute(SHARD_FAILED)
    qs = queries(args.queries, seed=5)
    results: dict[str, dict[str, list[Any]]] = {}
    with psycopg.connect(cluster.dsn) as conn:
        register_vector(conn)
        conn.execute("SET jit = off")
        conn.commit()
        gucs = settings_reach_workers(conn, sid)
        hnsw_forced = hnsw_index_on_shards(conn, eng, qs)
        for case, mode, bm25_plan, filt, extra in CASES:
            for q in qs:
                with forced(bm25_plan):
                    try:
                        ref_spec = planned(eng, "one", q, mode, filt, extra)
                        spec = planned(eng, "sharded", q, mode, filt, extra)
                    except Exception as exc:  # a query of stop words only, say: not this bench's subject
                        results.setdefault(f"{case} [skipped]", {}).setdefault("skipped", []).append(str(exc)[:200])
                        continue
                ref_text, ref_params = build_search_sql(ref_spec)
                want = [tuple(r[:8]) for r in conn.execute(ref_text.as_string(conn), ref_params).fetchall()]
                conn.commit()
                lex, sem = spec.branch("lexical"), spec.branch("semantic")
                assert lex is None or isinstance(lex, LexicalBranch)
                strategy = lex.bm25.strategy if lex is not None and lex.bm25 is not None else None
                vector = getattr(sem, "strategy", None)
                # Results are kept per plan taken: a forced case can still take another (admitted needs few chunks).
                label = f"{case} [{strategy or '-'}/{vector or '-'}]"
                per_shape = results.setdefault(label, {})
                text, params = build_search_sql(spec)
                as_is = text.as_string(conn)
                shapes = {"as-is": (as_is, params)}
                if "GROUP BY p.row_id" in as_is:
                    shapes["as-is, grouped by doc_id"] = (group_by_doc(as_is), params)
                if lex is not None:
                    t2, p2 = build_search_sql(shaped(spec, lexical_pushdown(sid)))
                    shapes["pushdown"] = (exact_without_fence(t2.as_string(conn)), p2)
                    if strategy == "admitted":
                        t4, p4 = build_search_sql(
                            shaped(spec, admitted_pushdown(sid), query_terms(conn, sid, spec, lex))
                        )
                        shapes["pushdown, admitted"] = (exact_without_fence(t4.as_string(conn)), p4)
                    if strategy in ("impact", "dense", "admitted"):
                        t3, p3 = build_search_sql(lexical_per_shard(spec, sid, conn, params))
                        shapes["per-shard"] = (exact_without_fence(t3.as_string(conn)), p3)
                        row = conn.execute(PER_SHARD_BYTES, p3).fetchone()
                        conn.commit()
                        per_shape.setdefault("per-shard sent", []).append(
                            {"bytes": row[0], "rows": row[1], "commands": row[2]} if row else {}
                        )
                elif vector == "exact":
                    shapes["pushdown"] = (exact_without_fence(as_is), params)
                for shape, (stmt, values) in shapes.items():
                    per_shape.setdefault(shape, []).append(run_case(conn, stmt, values, want))
                with forced(bm25_plan):
                    per_shape.setdefault("engine.search", []).append(engine_search(eng, q, mode, filt, extra))
    report = {
        "docs": args.docs,
        "queries": args.queries,
        "shards": args.shards,
        "workers": len(cluster.nodes()) - 1,
        "load_average_start": [round(x, 2) for x in load],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "build_seconds": build,
        "hnsw.ef_search seen by the workers": gucs,
        "hnsw index forced on every shard": hnsw_forced,
        "cases": {},
    }
    print(f"{args.docs} documents, {args.queries} queries, {args.shards} shards on 2 workers; load {load[0]:.1f}")
    print(
        f"{'case [lexical plan/vector strategy]':44} {'shape':24} {'ran':>5} {'same':>5} {'subplans':>8} {'kB to coord':>11} {'ms p50':>7}"
    )
    for case, shapes_run in results.items():
        summary = {}
        for shape, runs in shapes_run.items():
            if shape in ("per-shard sent", "skipped"):
                summary[shape] = runs
                continue
            if shape == "engine.search":
                errors = sorted({x["error"] for x in runs if "error" in x})
                ok = [x for x in runs if "error" not in x]
                summary[shape] = {
                    "ran": len(ok),
                    "of": len(runs),
                    "identical": sum(x["identical"] for x in ok),
                    "errors": errors,
                }
                s = summary[shape]
                print(
                    f"{case:44} {shape:24} {s['ran']:>2}/{s['of']:<2} {s['identical']:>5}"
                    + (f"  {errors[0][:110]}" if errors else "")
                )
                continue
            ok = [x for x in runs if "error" not in x]
            errors = sorted({f"{x['error']} {x.get('detail') or ''}".strip() for x in runs if "error" in x})
            ms = sorted(x["ms"] for x in ok)
            summary[shape] = {
                "ran": len(ok),
                "of": len(runs),
                "identical": sum(bool(x["identical"]) for x in ok),
                "subplans": sorted({x["subplans"] for x in ok}),
                "kb_to_coordinator_max": max((x["kb_to_coordinator"] for x in ok), default=None),
                "per_shard_limit": sorted({x["per_shard_limit"] for x in ok}),
                "ms_p50": ms[len(ms) // 2] if ms else None,
                "errors": errors,
                "explain_first": ok[0]["lines"] if ok else None,
            }
            s = summary[shape]
            print(
                f"{case:44} {shape:24} {s['ran']:>2}/{s['of']:<2} {s['identical']:>5} "
                f"{','.join(map(str, s['subplans'])) or '-':>8} {s['kb_to_coordinator_max'] or '-':>11} "
                f"{s['ms_p50'] or '-':>7}" + (f"  {errors[0][:110]}" if errors else "")
            )
            if args.explain and s["explain_first"]:
                print("\n".join(s["explain_first"]))
        report["cases"][case] = summary
    print("hnsw.ef_search on the workers:", json.dumps(gucs))
    print("HNSW index forced on every shard:", json.dumps(hnsw_forced))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"wrote {OUT}")
    eng.close()


if __name__ == "__main__":
    main()
