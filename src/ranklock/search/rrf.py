"""A branch row's Reciprocal Rank Fusion weight, under the snapshot's fusion rule.

Every branch ends its CTEs with ``... {rrf_weight_sql(spec)} AS rrf FROM
<top>{tie_window(spec)}``, ``<top>`` holding its competition ``rank`` and its
position ``pos`` in the branch's list; fusion (ranklock.search.fusion) sums
the weights over the branches.
"""

from __future__ import annotations

from psycopg import sql

from .spec import SearchSpec

__all__ = ["rrf_weight_sql", "tie_window"]


def rrf_weight_sql(spec: SearchSpec) -> sql.Composable:
    """A branch row's RRF weight, from its competition ``rank`` and its position ``pos`` in the branch.

    Rule rrf/2 (ranklock.snapshot.rules): the n documents tied at rank r share
    the positions r..r+n-1 they occupy in the branch's list, each weighing the
    mean of 1 / (rrf_k + p) over them, summed in position order (so the bits
    never depend on the order rows arrive in).  A block cut by the branch's
    depth shares the positions it holds.  A document alone at its rank (pos =
    rank) gets 1 / (rrf_k + rank), bit for bit rule rrf/1's weight.
    """
    if not spec.rules.shared_ties:
        return sql.SQL("1.0::float8 / (%(rrf_k)s::bigint + rank)")
    return sql.SQL("sum(1.0::float8 / (%(rrf_k)s::bigint + pos)) OVER tie / count(*) OVER tie")


def tie_window(spec: SearchSpec) -> sql.Composable:
    """The window :func:`rrf_weight_sql` sums over, appended to a branch's last CTE (nothing under rrf/1)."""
    if not spec.rules.shared_ties:
        return sql.SQL("")
    return sql.SQL(
        " WINDOW tie AS (PARTITION BY rank ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
    )
