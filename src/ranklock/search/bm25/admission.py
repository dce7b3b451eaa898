"""How a plan checks the hard constraints (a filter, ``as_of``) and the dead rows on the rows it reads.

Checked once per row that can reach the top, where the plan first meets it
(a seed, a candidate, a summed chunk), so nothing after that checks again.
Every check reads the segments' narrow filter tables
(ranklock.snapshot.filter_table) where they have them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from ...snapshot.segments import live_sql
from ..spec import where_sql
from .parts import rows_of

if TYPE_CHECKING:
    from ..spec import SearchSpec
    from .plan import Admission

__all__ = ["adm_cte", "admits", "checked_rows", "constrained", "keys_fit", "member", "row_key", "unfiltered"]


def constrained(spec: SearchSpec) -> bool:
    """A filter or ``as_of`` constrains the search (dead rows are masked, but admit nearly everything)."""
    return spec.as_of is not None or spec.filter_sql != sql.SQL("TRUE")


def unfiltered(spec: SearchSpec) -> bool:
    """Nothing to check on a chunk row: no filter, no ``as_of``, no dead row to mask."""
    return not constrained(spec) and spec.layout.dead_rows == 0


def admits(
    spec: SearchSpec, admit: Admission | None, alias: str, *, ordered: bool = False, checked: str | None = None
) -> sql.Composable:
    """Whether the row ``alias`` (its ``seg`` and ``row_id``) is live and passes the hard constraints.

    A lookup in the admitted set listed once (CTE ``adm``) where the
    constraint admits few enough chunks that listing them pays (``admit`` of
    way ``set``, see ranklock.search.bm25.pruned.choose_way), else membership in
    ``checked``: a CTE of the rows that passed, checked in one ordered pass of
    the filter rows (:func:`checked_rows`).

    ``ordered``: the rows are read in an order that must stop at a LIMIT (a
    term's postings in impact order, for the seeds).  The check is wrapped in
    IS TRUE, which keeps PostgreSQL from turning it into a join: as a
    semi-join the planner read every posting of the term first (540,000 of a
    frequent word at 1M chunks, 270 ms) and sorted them.  A membership in
    ``checked`` is wrapped too: a semi-join the planner thought one row long
    rescanned the ordered pass once per row.
    """
    if unfiltered(spec):
        return sql.SQL("TRUE")
    if not constrained(spec):
        live = live_sql(spec.layout, alias)
        return sql.SQL("({}) IS TRUE").format(live) if ordered else live
    if admit is not None and admit.way == "set":
        check = sql.SQL("{key} IN (SELECT adm.k FROM adm)").format(key=row_key(spec, alias))
        return sql.SQL("({}) IS TRUE").format(check) if ordered else check
    if checked is None:
        raise ValueError("a check outside the admitted set needs the CTE of the rows that passed")
    return member(alias, checked)


def member(alias: str, checked: str) -> sql.Composable:
    """Row ``alias`` is one of CTE ``checked``'s (seg, row_id): a hash of them, built once (IS TRUE, see :func:`admits`)."""
    return sql.SQL("(({a}.seg, {a}.row_id) IN (SELECT o.seg, o.row_id FROM {c} AS o)) IS TRUE").format(
        a=sql.Identifier(alias), c=sql.Identifier(checked)
    )


#: A row's key in the admitted set: its segment id in the high 31 bits, its row id in the low 32 (one bigint
#: hashes in about half the time of a (seg, row_id) pair: 14 against 25 ms for 100,000 admitted rows).
KEY_BITS = 32


def row_key(spec: SearchSpec, alias: str) -> sql.Composable:
    """The admitted-set key of row ``alias``: one bigint where ids fit (checked), else the (seg, row_id) pair."""
    a = sql.Identifier(alias)
    if keys_fit(spec):
        return sql.SQL("({a}.seg << {bits} | {a}.row_id)").format(a=a, bits=sql.Literal(KEY_BITS))
    return sql.SQL("({a}.seg, {a}.row_id)").format(a=a)


def keys_fit(spec: SearchSpec) -> bool:
    """Every segment id fits 31 bits and every row id 32.

    A segment numbers its rows from 0 as it writes them; its filter table
    records how many it wrote (a purge deletes rows, never renumbers).
    """
    return all(
        g.id < 2**31 and int((g.filter or {}).get("rows", 2**KEY_BITS)) < 2**KEY_BITS for g in spec.layout.segments
    )


def checked_rows(spec: SearchSpec, cte: str) -> sql.Composable:
    """(seg, row_id) of the rows of CTE ``cte`` that pass the constraints, checked in one ordered pass of the filter rows."""
    return sql.SQL("SELECT c.seg, c.row_id FROM {rows} AS c WHERE {of} AND {where}").format(
        rows=spec.filter_rows, of=rows_of(cte, "c"), where=where_sql(spec)
    )


def adm_cte(spec: SearchSpec, admit: Admission | None) -> sql.Composable:
    """CTE ``adm`` (with its leading comma) when the plan looks rows up in the admitted set, else nothing."""
    if admit is None or admit.way != "set" or not constrained(spec):
        return sql.SQL("")
    key = row_key(spec, "c")
    if not keys_fit(spec):
        key = sql.SQL("ROW(c.seg, c.row_id)")
    return sql.SQL(",\nadm AS MATERIALIZED (SELECT {key} AS k FROM {rows} AS c WHERE {where})").format(
        key=key, rows=spec.filter_rows, where=where_sql(spec)
    )
