"""Residue: whether the files of rewritten relations still hold the bytes of erased rows.

``VACUUM FULL`` writes a table's live rows into new files, and also the rows that some snapshot
can still see (ranklock.store.horizon): a purge that rewrote a table has erased nothing until that
is checked.  :func:`find_residue` reads the files of each table given (its heap, its TOAST table
and its indexes, every 1 GB segment of each) through the server (``pg_read_binary_file``, so
the same check runs on a remote server and on each Citus worker) and looks for needles: the purged
ids and the words only the purged documents held, compared the way ``grep -i`` does (ASCII letters
case-folded).

A needle found in a table's files is *residue* unless a live row of that table holds it too (the
same id in another collection, a word inside a longer one): such a needle cannot be told apart
there, and :class:`Residue` says so instead of guessing.  Needles shorter than
:data:`MIN_NEEDLE` characters are not looked for (they match unrelated bytes); text that
PostgreSQL compressed (a TOAST value over about 2 kB) is not found by a byte scan, here or by
``grep``.

The files are read after a ``CHECKPOINT``, so what shared buffers held is on disk.  Reading them
needs a superuser or a member of ``pg_read_server_files``.

>>> find_residue(conn, ["ranklock.documents"], ["victim-zq81", "zqxvormelant"])   # doctest: +SKIP
Residue(found={}, unsure={})
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["MIN_NEEDLE", "Residue", "find_residue", "may_read_files", "needles", "shard_tables"]

#: The shortest id or word looked for: 5 letters of another text, or of binary data, match by chance.
MIN_NEEDLE = 5
#: At most this many words are looked for, the longest first (the most telling); every id is.
MAX_WORDS = 64
#: Bytes read per call: a multiple of the 8 kB page, and no row crosses a page, so no needle crosses a read.
_READ = 8 * 1024 * 1024

# Each page range of each file of each table's relations, read once, folded, and matched against
# every needle.  A file is 1 GB segments ("path", "path.1", ...), segment_size on this server.
_SCAN = """
WITH tbl AS (
    SELECT t.oid, t.reltoastrelid FROM pg_class AS t
    WHERE t.oid IN (SELECT to_regclass(x) FROM unnest(%(tables)s::text[]) AS x)
), rels AS (
    SELECT tbl.oid AS tbl, tbl.oid AS rel FROM tbl
    UNION ALL SELECT tbl.oid, i.indexrelid FROM tbl JOIN pg_index AS i ON i.indrelid = tbl.oid
    UNION ALL SELECT tbl.oid, tbl.reltoastrelid FROM tbl WHERE tbl.reltoastrelid <> 0
    UNION ALL SELECT tbl.oid, i.indexrelid FROM tbl JOIN pg_index AS i ON i.indrelid = tbl.reltoastrelid
        WHERE tbl.reltoastrelid <> 0
), seg AS (
    SELECT pg_size_bytes(current_setting('segment_size')) AS bytes
), parts AS (
    SELECT rels.tbl, pg_relation_filepath(rels.rel) AS path, off, seg.bytes AS seg
    FROM rels, seg, generate_series(0::bigint, pg_relation_size(rels.rel) - 1, %(read)s) AS off
), folded AS (
    SELECT n AS needle, lower(encode(convert_to(n, 'UTF8'), 'escape')) AS bytes FROM unnest(%(needles)s::text[]) AS n
)
SELECT DISTINCT n.nspname, c.relname, f.needle
FROM parts AS p
JOIN pg_class AS c ON c.oid = p.tbl
JOIN pg_namespace AS n ON n.oid = c.relnamespace
CROSS JOIN LATERAL (
    SELECT lower(encode(pg_read_binary_file(
        p.path || CASE WHEN p.off >= p.seg THEN '.' || (p.off / p.seg)::text ELSE '' END,
        p.off %% p.seg, %(read)s, true), 'escape')) AS page
) AS b
JOIN folded AS f ON strpos(b.page, f.bytes) > 0
"""


@dataclass(frozen=True)
class Residue:
    """What :func:`find_residue` found.

    ``found``: by table, the needles its files hold that no live row of it holds: bytes of erased rows.
    ``unsure``: by table, how many needles its live rows hold too, so its files could not tell them apart.
    """

    found: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unsure: dict[str, int] = field(default_factory=dict)


def needles(ids: Iterable[str], words: Iterable[str]) -> tuple[list[str], int]:
    """What to look for: the ids and up to :data:`MAX_WORDS` words (longest first), folded to lower case, each at
    least :data:`MIN_NEEDLE` characters; and how many ids were too short to look for."""
    folded_ids = sorted({i.lower() for i in ids})
    short = sum(1 for i in folded_ids if len(i) < MIN_NEEDLE)
    long_words = sorted({w.lower() for w in words if len(w) >= MIN_NEEDLE}, key=lambda w: (-len(w), w))
    out = [i for i in folded_ids if len(i) >= MIN_NEEDLE] + long_words[:MAX_WORDS]
    return sorted(set(out)), short


def may_read_files(conn: psycopg.Connection[Any]) -> bool:
    """Whether this role may read the server's files (a superuser, or a member of ``pg_read_server_files``)."""
    row = conn.execute(
        "SELECT r.rolsuper OR pg_has_role(current_user, 'pg_read_server_files', 'MEMBER') "
        "FROM pg_roles AS r WHERE r.rolname = current_user"
    ).fetchone()
    return bool(row and row[0])


def shard_tables(conn: psycopg.Connection[Any], tables: Sequence[str]) -> list[str]:
    """On a Citus worker: the shards there of the distributed ``tables`` (``schema.name`` -> ``schema.name_<shard>``)."""
    if not tables:
        return []
    rows = conn.execute(
        "SELECT c.oid::regclass::text FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "JOIN unnest(%s::text[]) AS t(name) ON n.nspname = split_part(t.name, '.', 1) "
        "AND c.relname ~ ('^' || split_part(t.name, '.', 2) || '_[0-9]+$') WHERE c.relkind = 'r' ORDER BY 1",
        [list(tables)],
    ).fetchall()
    return [str(r[0]) for r in rows]


def find_residue(conn: psycopg.Connection[Any], tables: Sequence[str], needles: Sequence[str]) -> Residue:
    """Look for ``needles`` (folded, see :func:`needles`) in the files of ``tables`` (qualified names); see the module.

    The caller has checkpointed since the rewrite, and may read the server's files (:func:`may_read_files`).
    """
    if not needles or not tables:
        return Residue()
    hits: dict[tuple[str, str], set[str]] = {}
    for schema, name, needle in conn.execute(
        _SCAN, {"tables": list(tables), "needles": list(needles), "read": _READ}
    ).fetchall():
        hits.setdefault((str(schema), str(name)), set()).add(str(needle))
    found: dict[str, tuple[str, ...]] = {}
    unsure: dict[str, int] = {}
    for (schema, name), got in sorted(hits.items()):
        live = _held_by_live_rows(conn, sql.Identifier(schema, name), sorted(got))
        if got - live:
            found[f"{schema}.{name}"] = tuple(sorted(got - live))
        if live:
            unsure[f"{schema}.{name}"] = len(live)
    return Residue(found, unsure)


def _held_by_live_rows(conn: psycopg.Connection[Any], ident: sql.Identifier, needles: list[str]) -> set[str]:
    """The needles that some live row of table ``ident`` holds (its text form, folded as the needles are).

    A live row of ``pg_statistic`` explains a needle only when the table it describes holds the needle too:
    statistics that quote words their table no longer has are stale, and residue like any other.
    """
    if ident == sql.Identifier("pg_catalog", "pg_statistic"):
        described = conn.execute(
            # An expression index's statistics describe its table's rows.
            "SELECT DISTINCT n.nspname, c.relname, x.needle FROM pg_catalog.pg_statistic AS s "
            "JOIN pg_class AS c ON c.oid = coalesce((SELECT i.indrelid FROM pg_index AS i "
            "WHERE i.indexrelid = s.starelid), s.starelid) JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "JOIN unnest(%s::text[]) AS x(needle) ON strpos(lower(s::text), x.needle) > 0 "
            "WHERE c.relkind IN ('r', 'p', 'm') ORDER BY 1, 2, 3",
            [needles],
        ).fetchall()
        by_table: dict[tuple[str, str], list[str]] = {}
        for schema, name, needle in described:
            by_table.setdefault((str(schema), str(name)), []).append(str(needle))
        explained: set[str] = set()
        for (schema, name), held in by_table.items():
            explained |= _held_by_live_rows(conn, sql.Identifier(schema, name), held)
        return explained
    # One scan, one aggregate a needle: plain enough for a Citus table too (no correlated subquery).
    tests = sql.SQL(", ").join(sql.SQL("coalesce(bool_or(strpos(lower(t::text), %s) > 0), false)") for _ in needles)
    try:
        row = conn.execute(sql.SQL("SELECT {} FROM {} AS t").format(tests, ident), needles).fetchone()
    except psycopg.Error:
        # A table that cannot be read now (a Citus table whose worker is down) explains nothing.
        return set()
    return {n for n, held in zip(needles, row or (), strict=False) if held}
