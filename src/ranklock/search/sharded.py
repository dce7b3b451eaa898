"""A search on a Citus cluster: each shard runs the one-node statement once, the coordinator merges and fetches.

Query then fetch, as Elasticsearch answers the same shape.  The search is one
statement on the coordinator (ranklock.search.fusion.build_search_sql):

1. **Query phase**: one Citus task per shard (``ranklock.shard_query``, a
   function of migration 0018: the fan-out is Citus's only statement, so
   nothing of the merge becomes a distributed subplan).  Each task runs
   :func:`shard_statement` on its shard's own tables: every branch's
   one-node plan (ranklock.search.bm25's plans, the vector scan) over the
   shard's chunks, with the snapshot's global statistics bound, cut to the
   shard's top ``depth`` documents per branch (an index scan: its top
   ``sem_fetch`` chunks), each hit with its segment, row id and raw score.
   A shard masks its own dead rows (``dead_<snapshot>``, placed beside the
   chunks they mask).  A search routed to one partition value runs on the
   shard holding it alone.
2. **Merge and fuse**, on the coordinator: the shards' hits are the rows each
   branch's one-node CTEs rank (the same SQL: ranks, ties, RRF), so the fused
   list is the one node's, bit for bit.  Why it is exact: a branch ranks
   chunks by a score that (with global statistics) does not depend on the
   shard, in the total order ``(score, doc_id, chunk)``; a document of the
   global top ``depth`` is in its shard's top ``depth`` (fewer than ``depth``
   documents can precede it there), and a document's chunks share a shard.
3. **Fetch**: the text of the ``k`` hits kept, by (segment, row id), from the
   shards holding them (``ranklock.shard_fetch``): no liveness check, every
   hit was found live on its shard.

The shard statement travels as text (a task runs one function on each shard,
and a function cannot be handed a statement of its own): composed here with
psycopg.sql, its values turned into positional parameters whose types and
values are bound beside it (:class:`ShardStatement`), never written into it.
The worker replaces each table name by its shard's and prepares the statement
with those types.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Json, Jsonb

from ..errors import SnapshotError
from ..snapshot.segments import Layout
from ..store.tables import SHARD_KEY, SegmentKind, anchor_table, dead_table, segment_table

if TYPE_CHECKING:
    from .spec import SearchSpec

__all__ = [
    "HIT_COLUMNS",
    "ShardStatement",
    "compose",
    "fan_out_sql",
    "fetch_sql",
    "on_one_shard",
    "query_sql",
    "shard_statement",
]

#: The kinds of a segment's tables a shard's statement may read (chunks, forward and postings are
#: distributed; terms and dense are reference tables, one shard on every node).
_READ_KINDS: tuple[SegmentKind, ...] = ("chunks", "forward", "postings", "terms", "dense")
#: What every shard returns for each hit, and the coordinator reads (``doc_id`` in byte order, as on one node).
HIT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("branch", "text"),
    ("seg", "bigint"),
    ("row_id", "bigint"),
    ("doc_id", 'text COLLATE "C"'),
    ("chunk", "integer"),
    ("score", "float8"),
)
#: psycopg's named placeholder, its escaped percent sign, and anything else a percent sign starts.
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|(%%)|(%)")


@dataclass(frozen=True)
class ShardStatement:
    """The statement each shard runs, with its values: what ``ranklock.shard_search`` is handed.

    ``text`` holds positional parameters ``$1 .. $n`` (psycopg's named ones,
    numbered in order of first use), ``types`` their PostgreSQL types and
    ``values`` their text, each read by its type's input function on the
    worker; ``tables`` every table the text may name, as it names them.
    """

    text: str
    types: tuple[str, ...]
    values: tuple[str | None, ...]
    tables: tuple[str, ...]


def shard_statement(spec: SearchSpec) -> ShardStatement:
    """Every branch's top list on one shard (rows ``HIT_COLUMNS``), composed once for all the shards."""
    local = on_one_shard(spec)
    arms = [
        sql.SQL("SELECT * FROM ({}) AS {}").format(b.shard_hits(local), sql.Identifier(f"{b.cte}_shard"))
        for b in spec.branches
    ]
    params: dict[str, Any] = {"depth": spec.depth, "rrf_k": spec.rrf_k, "k": spec.k, **spec.filter_params}
    if spec.as_of is not None:
        params["as_of"] = spec.as_of
    for b in spec.branches:
        params.update(b.params(local))
    return compose(spec, sql.SQL("\nUNION ALL\n").join(arms), params)


def on_one_shard(spec: SearchSpec) -> SearchSpec:
    """``spec`` over one shard's tables: what a statement each shard runs is composed from."""
    return dataclasses.replace(spec, layout=spec.layout.on_one_shard())


def compose(spec: SearchSpec, query: sql.Composable, params: Mapping[str, Any]) -> ShardStatement:
    """``query`` (composed over :func:`on_one_shard`'s spec, psycopg's named placeholders) as every shard runs it."""
    text, names = _positional(query.as_string(None))
    missing = sorted(n for n in names if n not in params)
    if missing:
        raise ValueError(f"the shard statement reads values it was not given: {', '.join(missing)}")
    typed = [_typed(name, params[name]) for name in names]
    return ShardStatement(
        text=text,
        types=tuple(t for t, _ in typed),
        values=tuple(v for _, v in typed),
        tables=_tables(spec.layout),
    )


def _positional(text: str) -> tuple[str, list[str]]:
    """``text`` with psycopg's ``%(name)s`` placeholders as ``$1 .. $n``, and the names in that order.

    psycopg's own grammar for a named placeholder: every value of the search is
    bound through one, so none is in the text, and a literal percent sign is
    written ``%%``.
    """
    names: list[str] = []

    def positional(m: re.Match[str]) -> str:
        if m.group(2):
            return "%"
        if m.group(3):
            raise ValueError(f"a percent sign that is not a placeholder at {m.start()} of a shard statement")
        name = m.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PLACEHOLDER.sub(positional, text), names


def _typed(name: str, value: Any) -> tuple[str, str | None]:
    """(PostgreSQL type, text) of a value, as psycopg would bind it; the text is what its input function reads."""
    if value is None:
        return "unknown", None
    if isinstance(value, np.ndarray):
        # A query vector (float32): each element's shortest double text, which pgvector reads back
        # (strtof) to the same float32, as it reads psycopg's own.
        return "vector", "[" + ",".join(_float_text(float(x)) for x in value.ravel()) + "]"
    if isinstance(value, list | tuple):
        # An array has a type: of strings, text (the statement casts it where it needs another).
        kinds = {_scalar_type(v).replace("unknown", "text") for v in value if v is not None} or {"text"}
        if len(kinds) != 1:
            raise TypeError(f"search value {name!r} mixes types in one array: {sorted(kinds)}")
        return kinds.pop() + "[]", "{" + ",".join(_array_element(v) for v in value) + "}"
    if isinstance(value, Json | Jsonb):
        return "jsonb", json.dumps(value.obj)
    return _scalar_type(value), _scalar_text(value)


def _scalar_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double precision"
    if isinstance(value, Decimal):
        return "numeric"
    if isinstance(value, str):
        # As psycopg binds a str: of no type, so PostgreSQL reads it as what its place asks for (``::regconfig``:
        # a regconfig constant, not a text cast at run time).
        return "unknown"
    if isinstance(value, datetime):
        return "timestamp with time zone" if value.tzinfo is not None else "timestamp without time zone"
    if isinstance(value, date):
        return "date"
    raise TypeError(f"a search value of type {type(value).__name__} cannot be bound on a shard")


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def _float_text(value: float) -> str:
    """A double's shortest exact text (Python's repr), or PostgreSQL's words for the special values."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _array_element(value: Any) -> str:
    """One element of an array's text: NULL, or double-quoted with its backslashes and quotes escaped."""
    if value is None:
        return "NULL"
    text = _scalar_text(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tables(layout: Layout) -> tuple[str, ...]:
    """Every table a shard's statement may name, as psycopg writes it: the worker replaces each by its shard's."""
    names = [segment_table(kind, g.id) for g in layout.segments for kind in _READ_KINDS]
    if layout.dead_rows:
        names.append(dead_table(layout.snapshot_id))
    return tuple(n.as_string(None) for n in names)


def _check_placed(layout: Layout) -> int:
    """The shard count of a layout placed for per-shard search, or the error saying how to place it."""
    placed = layout.shard_search or {}
    shards = {g.shards for g in layout.segments}
    if not placed or len(shards) != 1:
        raise SnapshotError(
            f"snapshot {layout.snapshot_id} was placed on the cluster before searches ran on each shard "
            "(issue 46), so it has no search anchors or placed dead rows. Write it once more: `ranklock "
            "snapshot merge COLLECTION --all` (or an ingest that changes a document) makes a snapshot placed for them."
        )
    return int(shards.pop() or 0)


def fan_out_sql(spec: SearchSpec, statement: ShardStatement) -> tuple[sql.Composable, dict[str, Any]]:
    """The query phase of ``statement``: a set of jsonb, each shard's rows as an array.

    One Citus task per shard (``ranklock.shard_query`` over the search anchors), or
    the one shard of a search routed to one partition value; and its values.
    """
    layout = spec.layout
    shards = _check_placed(layout)
    route: str | None = None
    route_key: str | None = None
    expected = shards
    if layout.one_key:
        # One partition value: its segments are one shard, on one node; the query runs there alone, from a
        # row of that value (a segment with no chunk has no row to start from: then none needs searching).
        holding = [g for g in layout.segments if g.chunks > 0] or list(layout.segments[:1])
        route = segment_table("chunks", holding[0].id).as_string(None)
        route_key = layout.segments[0].partition_key or ""
        expected = 1 if any(g.chunks > 0 for g in layout.segments) else 0
    call = sql.SQL(
        "ranklock.shard_query(%(shard_anchors)s::regclass, %(shard_route)s::regclass, %(shard_route_key)s::text, "
        "%(shard_count)s::int, %(shard_tables)s::text[], %(shard_sql)s::text, %(shard_types)s::regtype[], "
        "%(shard_values)s::text[])"
    )
    params = {
        "shard_anchors": anchor_table(shards).as_string(None),
        "shard_route": route,
        "shard_route_key": route_key,
        "shard_count": expected,
        "shard_tables": list(statement.tables),
        "shard_sql": statement.text,
        "shard_types": list(statement.types),
        "shard_values": list(statement.values),
    }
    return call, params


def query_sql(spec: SearchSpec) -> tuple[sql.Composable, dict[str, Any]]:
    """CTE ``shard_rows`` of the coordinator's statement (every shard's hits, ``HIT_COLUMNS``), and its values."""
    call, params = fan_out_sql(spec, shard_statement(spec))
    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in HIT_COLUMNS)
    ctes = sql.SQL(
        """shard_rows AS MATERIALIZED (SELECT x.* FROM {call} AS r, jsonb_to_recordset(r) AS x({cols}))"""
    ).format(call=call, cols=cols)
    return ctes, params


def fetch_sql(layout: Layout) -> tuple[sql.Composable, dict[str, Any]]:
    """The fetch phase: CTE ``fetched`` (seg, row_id, char_start, char_end, text) of the hits in CTE ``top``."""
    by_key = [g.distribution == SHARD_KEY for g in layout.segments]
    ctes = sql.SQL(
        """fetched AS MATERIALIZED (
    SELECT * FROM ranklock.shard_fetch(%(fetch_tables)s::regclass[], %(fetch_columns)s::text[], %(fetch_keys)s::text[],
        %(fetch_segs)s::bigint[], ARRAY(SELECT t.seg FROM top AS t), ARRAY(SELECT t.doc_id FROM top AS t),
        ARRAY(SELECT t.row_id FROM top AS t))
)"""
    )
    params = {
        "fetch_tables": [segment_table("chunks", g.id).as_string(None) for g in layout.segments],
        "fetch_columns": [SHARD_KEY if keyed else "doc_id" for keyed in by_key],
        # A segment placed by its partition value is found by that value (one shard), the others by doc_id.
        "fetch_keys": [
            (g.partition_key or "") if keyed else None for g, keyed in zip(layout.segments, by_key, strict=True)
        ],
        "fetch_segs": [g.id for g in layout.segments],
    }
    return ctes, params
