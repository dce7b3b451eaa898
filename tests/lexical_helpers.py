"""Shared by the lexical tests: a fast embedder and an exhaustive BM25 reference in Python."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from psycopg import sql

from fakes import use_hash_embedder as _use_hash_embedder
from ranklock import Document, Engine
from ranklock.settings import ChunkerParams
from ranklock.snapshot.build import chunk_table


def use_hash_embedder(engine: Engine) -> str:
    return _use_hash_embedder(engine, "test:lexical-hash-8")


def reference_bm25(
    engine: Engine,
    collection: str,
    query: str,
    *,
    k1: float = 1.2,
    b: float = 0.75,
    depth: int = 40,
    syntax: str = "natural",
    as_of: datetime | None = None,
    query_tf: bool = True,
) -> list[tuple[str, int, float]]:
    """Exhaustive BM25 of every chunk, from the chunk table alone: (doc_id, chunk, score) of the top ``depth`` documents.

    A query term counts once per occurrence in the query (rule bm25/2); ``query_tf=False``: once (bm25/1).

    Statistics are recounted here from the tsvectors (not read from the
    snapshot's terms table), documents keep their best chunk, ties break by
    doc_id bytes then chunk: the fast path must return exactly this.
    """
    coll = engine.collection(collection)
    sid = coll.active_snapshot_id
    assert sid is not None
    rows = engine.db.fetchall(
        sql.SQL(
            "SELECT c.row_id, c.doc_id, c.chunk, c.doc_len, c.effective_from, c.effective_to, "
            "array_agg(u.lexeme) AS lex, array_agg(coalesce(array_length(u.positions, 1), 1)) AS tf "
            "FROM {} AS c CROSS JOIN LATERAL unnest(c.tsv) AS u GROUP BY c.row_id"
        ).format(chunk_table(sid))
    )
    n = len(rows)
    avgdl = sum(r["doc_len"] for r in rows) / n
    df: dict[str, int] = {}
    for r in rows:
        for lx in r["lex"]:
            df[lx] = df.get(lx, 0) + 1
    # The query analysed as a document is: a term's query frequency is its number of positions.
    got = engine.db.fetchall(
        "SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS n FROM unnest(ranklock.doc_tsvector("
        "%s::regconfig, %s, CASE WHEN %s = 'websearch' THEN ranklock.websearch_positive_text(%s) ELSE %s END)) AS u",
        [coll.language, coll.accent, syntax, query, query],
    )
    qtf = {r["lexeme"]: (r["n"] if query_tf else 1) for r in got}
    terms = set(qtf)
    matches: set[int] | None = None
    if syntax == "websearch":
        m = engine.db.fetchall(
            sql.SQL(
                "SELECT row_id FROM {} WHERE tsv @@ ranklock.query_tsquery(%s::regconfig, %s, 'websearch', %s)"
            ).format(chunk_table(sid)),
            [coll.language, coll.accent, query],
        )
        matches = {r["row_id"] for r in m}
    best: dict[str, tuple[float, int]] = {}
    for r in rows:
        if as_of is not None:
            if r["effective_from"] is not None and r["effective_from"] > as_of:
                continue
            if r["effective_to"] is not None and r["effective_to"] <= as_of:
                continue
        tfs = dict(zip(r["lex"], r["tf"], strict=True))
        hit = [t for t in terms if t in tfs]
        if matches is not None:
            if r["row_id"] not in matches:
                continue
        elif not hit:
            continue
        score = 0.0
        for t in hit:
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            tf = tfs[t]
            score += qtf[t] * (idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * r["doc_len"] / avgdl)))
        cur = best.get(r["doc_id"])
        if cur is None or score > cur[0] + 1e-12 or (abs(score - cur[0]) <= 1e-12 and r["chunk"] < cur[1]):
            best[r["doc_id"]] = (score, r["chunk"])
    ranked = sorted(best.items(), key=lambda kv: (-round(kv[1][0], 9), kv[0].encode(), kv[1][1]))
    return [(d, c, s) for d, (s, c) in ranked[:depth]]


def lexical(engine: Engine, collection: str, query: str, **kw: Any) -> list[tuple[str, int, float]]:
    depth = kw.pop("depth", 40)
    res = engine.search(collection, query, k=depth, mode="lexical", depth=depth, **kw)
    return [(h.doc_id, h.chunk, float(h.lexical_score or 0.0)) for h in res.hits]


def ingest_bucketed(engine: Engine, name: str, docs: list[Document]) -> int:
    """``docs`` as a fresh collection of small chunks (24-token windows, so most documents have several)
    with a typed ``bucket`` field, hash vectors and an exact index; returns the active snapshot id."""
    engine.ingest(
        name,
        docs,
        replace=True,
        create={
            "embedder": use_hash_embedder(engine),
            "index": "exact",
            "chunker": ChunkerParams(window=24, overlap=4),
            "fields": ["bucket:int"],
        },
    )
    sid = engine.collection(name).active_snapshot_id
    assert sid is not None
    return sid
