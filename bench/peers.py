"""ranklock against its peers, side by side in one run on the same vectors (issue 22).

On SciFact and NFCorpus (BEIR test qrels; NFCorpus's are graded), every test query through:

* **ranklock**: lexical, semantic and hybrid through ``Engine.search`` on an
  ingested collection (all-MiniLM-L6-v2, the embedding cache; hybrid depth 40);
* **the reference pipeline**: ``bm25s`` (Lucene idf, PyStemmer English
  stemmer, its English stop words, title + text) at k1 1.2 and at its default
  1.5, with a repeated query term counted once per occurrence (bm25s's
  default) and counted once; exact cosine over the same MiniLM vectors; RRF
  k = 60 over the top 40 of each branch, ties broken by document id;
* **LanceDB**: native full-text search (its default analyser), exact
  (flat) cosine vector search, and its hybrid search with
  ``RRFReranker(K=60)``, 40 rows per branch.

*Same vectors.* No peer embeds anything itself: the document vectors are
ranklock's stored chunk vectors, or vectors read through ranklock's embedding
cache (the one path ranklock embeds by), and every query vector is the one
ranklock's search used.  ranklock cuts a document longer than the model's
window into chunks and ranks a document by its best chunk; the peers are run
on two representations of a document:

``chunks``  ranklock's own chunks, their text and stored vectors; a document
            scores as its best chunk (max over chunks), as in ranklock.
            LanceDB gets one row per chunk and its results are collapsed to
            each document's first (best) row, after its own fusion.
``doc``     one row per document: its whole text (title, blank line, body, as
            ranklock builds it) and the vector of that whole text.
            all-MiniLM-L6-v2 reads a text's first 254 tokens, so where the
            first chunk begins with the document's first 254 tokens the model
            was given that very input: the vector is the chunk's stored one.
            The other documents (first chunk shorter than that) are embedded
            whole through ranklock's embedding cache; the JSON counts both.

Scores: nDCG@10 per query (pytrec_eval, trec_eval's own definition), every
system fed a strictly decreasing score per rank so trec_eval cannot reorder
ties; a query a system returns nothing for counts 0.  Each peer is compared
with ranklock in the same mode by the paired randomization test of
bench/paired.py (difference = peer - ranklock).

*Where the lexical gap comes from* (issue 22, point 3).  The queries are
split, seeded, into a tuning half and a held-out half.  ranklock's k1 is a
search parameter, so "k1 1.5" is ranklock itself (``Engine.search(k1=1.5)``).
Its text analysis is the collection's PostgreSQL text-search configuration,
fixed at creation, and no configuration gives bm25s's splitting; so the other
pieces are bm25s variants fed each analysis: ranklock's own (the lexemes and
term counts of its tsvectors, the exact analyser), bm25s's splitting with
PostgreSQL's ``english`` stop list, and bm25s's own.  The ladder starts at a
bm25s run that reproduces ranklock (its chunks, its lexemes, each query term
once, k1 1.2; the JSON counts the queries where it gives ranklock's nDCG@10)
and changes one piece at a time to end at the bm25s reference.

    python bench/peers.py --home /work/bench-home
    python bench/peers.py --home /work/bench-home --datasets scifact --skip-lancedb
    python bench/peers.py --home /work/bench-home --baseline bench/out/peers-before.json

``--baseline`` pairs this run's ranklock, mode by mode, with a JSON this
script wrote before (e.g. before a change of the search core).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from lexical import load_beir, ranked_run, ranklock_run  # noqa: E402
from paired import paired  # noqa: E402

OUT = ROOT / "bench" / "out"
MODES = ("lexical", "semantic", "hybrid")
#: Candidates per branch that fusion sees, in every hybrid system here (ranklock's default depth).
HYBRID_DEPTH = 40
#: Documents every single-branch system returns (only the top 10 are scored).
SINGLE_DEPTH = 100
RRF_K = 60
#: The analysis between ranklock's and bm25s's: bm25s's splitting, PostgreSQL's stop list.
MIXED = "bm25s split, postgres stop list"
#: The seed of the tuning / held-out split of each query set.
SPLIT_SEED = 22


# -- pure helpers (tests/test_bench_peers.py) ---------------------------------------------


def top_documents(doc_ids: Sequence[str], scores: np.ndarray, depth: int, *, positive: bool = False) -> list[str]:
    """The ``depth`` best of ``doc_ids`` by ``scores``, higher first, equal scores in doc id order.

    ``doc_ids`` must be sorted (then index order is id order and a stable
    sort breaks ties by id); ``positive`` keeps only scores above 0 (a BM25
    score of 0 means no query term matched).
    """
    if len(doc_ids) != len(scores):
        raise ValueError(f"{len(doc_ids)} documents but {len(scores)} scores")
    if any(a >= b for a, b in itertools.pairwise(doc_ids)):
        raise ValueError("doc_ids must be sorted and distinct: ties are broken by their order")
    order = np.argsort(-scores, kind="stable")[:depth]
    return [doc_ids[i] for i in order if not positive or scores[i] > 0]


def best_per_document(starts: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each document's best unit score: ``scores`` holds units grouped by document, ``starts`` each group's first.

    >>> best_per_document(np.array([0, 2]), np.array([0.5, 0.9, 0.1]))
    array([0.9, 0.1])
    """
    return np.maximum.reduceat(scores, starts)


def rrf(rankings: Sequence[Sequence[str]], *, k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal Rank Fusion (Cormack, Clarke & Buettcher 2009): sum of 1/(k + rank) over the rankings.

    Ranks are positions (1, 2, 3, ...), as ranx and LanceDB count them; the
    fused list is sorted by score, equal scores by document id.  Each
    document's terms are added in the order of ``rankings``.

    >>> rrf([["a", "b"], ["b"]], k=60)[0]
    ('b', 0.03252247488101534)
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        if len(set(ranking)) != len(ranking):
            raise ValueError("a ranking lists a document twice; collapse it to documents first")
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def split_queries(qids: Sequence[str], seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """(tuning half, held-out half) of ``qids``: a seeded shuffle of the sorted ids, cut in two (tuning the smaller)."""
    ids = sorted(set(qids))
    random.Random(seed).shuffle(ids)
    cut = len(ids) // 2
    return sorted(ids[:cut]), sorted(ids[cut:])


def first_per_document(doc_ids: Sequence[str]) -> list[str]:
    """A ranked list of units collapsed to documents: each document where its first (best) unit was."""
    return list(dict.fromkeys(doc_ids))


def each_once(tokens: Sequence[str]) -> list[str]:
    """Query terms with repeats removed, first occurrence kept: BM25 without query-term frequency."""
    return list(dict.fromkeys(tokens))


# -- scoring ----------------------------------------------------------------------------


def ndcg_per_query(qrels: dict[str, dict[str, int]], run: dict[str, list[str]]) -> dict[str, float]:
    """nDCG@10 of every judged query (trec_eval's definition, through pytrec_eval); no result scores 0."""
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    full = {q: (ranked_run(run[q]) if run.get(q) else {"__none__": 0.0}) for q in qrels}
    return {q: float(v["ndcg_cut_10"]) for q, v in ev.evaluate(full).items()}


def mean(values: dict[str, float], qids: Sequence[str] | None = None) -> float:
    keys = list(values) if qids is None else list(qids)
    return float(np.mean([values[q] for q in keys]))


def restrict(values: dict[str, float], qids: Sequence[str]) -> dict[str, float]:
    return {q: values[q] for q in qids}


# -- what ranklock stored -----------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    """A collection's documents as ranklock stored them, and the same vectors for every peer."""

    doc_ids: list[str]  # sorted
    doc_text: list[str]  # ranklock's document text: title, blank line, body (normalised)
    doc_vec: np.ndarray  # (documents, dim): the whole document text's vector, through the embedding cache
    chunk_doc: list[str]  # the document of each chunk, chunks in (doc_id, chunk) order
    chunk_text: list[str]
    chunk_vec: np.ndarray  # (chunks, dim): ranklock's stored chunk vectors
    chunk_starts: np.ndarray  # index of each document's first chunk
    chunk_lexemes: list[list[str]]  # each chunk's tsvector: its lexemes, each repeated tf times (ranklock's tf)
    doc_lexemes: list[list[str]]  # the same analysis (ranklock.doc_tsvector) of the whole document text
    vectors: dict[str, Any]  # how doc_vec relates to the chunk vectors


@dataclass(frozen=True)
class Queries:
    qids: list[str]  # sorted
    text: list[str]  # as BEIR gives them: what a user of a peer would pass
    vec: np.ndarray  # the vector ranklock's search used (embedding cache)
    lexemes: list[list[str]]  # ranklock's analysis of the query, each lexeme repeated as often as it occurs


def _tokens(rows: list[dict[str, Any]], n: int) -> list[list[str]]:
    out: list[list[str]] = [[] for _ in range(n)]
    for r in rows:
        out[int(r["i"]) - 1].extend([r["lexeme"]] * int(r["tf"]))
    return out


def _analyse(eng: Any, coll: Any, texts: list[str]) -> list[list[str]]:
    """ranklock's text analysis of ``texts``: the lexemes of ranklock.doc_tsvector, each repeated tf times.

    tf counts a lexeme's positions, as ranklock's BM25 and its doc_len do.
    """
    rows = eng.db.fetchall(
        "SELECT d.i, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS d(txt, i) "
        "CROSS JOIN LATERAL unnest(ranklock.doc_tsvector(%s::regconfig, %s, d.txt)) AS u",
        [texts, coll.language, coll.accent],
    )
    return _tokens(rows, len(texts))


def load_corpus_vectors(eng: Any, coll_name: str, dataset: str) -> Corpus:
    from psycopg import sql

    from ranklock.embed.base import token_capacity
    from ranklock.ingest.chunker import document_text
    from ranklock.ingest.loaders import load_corpus
    from ranklock.ingest.normalize import text_sha256
    from ranklock.snapshot.build import _embed_missing
    from ranklock.snapshot.segments import chunks_sql, live_sql, read_layout

    coll = eng.collection(coll_name)
    layout = read_layout(eng.db, int(coll.active_snapshot_id))
    # The snapshot's live chunks, over its segments (ranklock.snapshot.segments).
    table = sql.SQL("(SELECT c.* FROM {} AS c WHERE {})").format(chunks_sql(layout), live_sql(layout))
    rows = eng.db.fetchall(
        sql.SQL("SELECT doc_id, chunk, text, embedding FROM {} AS l ORDER BY doc_id, chunk").format(table)
    )
    chunk_doc = [r["doc_id"] for r in rows]
    chunk_text = [r["text"] for r in rows]
    chunk_vec = np.stack([np.asarray(r["embedding"].to_numpy(), dtype=np.float32) for r in rows])
    where = {(r["doc_id"], r["chunk"]): i for i, r in enumerate(rows)}
    lex = eng.db.fetchall(
        sql.SQL(
            "SELECT c.doc_id, c.chunk, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf "
            "FROM {} AS c CROSS JOIN LATERAL unnest(c.tsv) AS u"
        ).format(table)
    )
    chunk_lexemes: list[list[str]] = [[] for _ in rows]
    for r in lex:
        chunk_lexemes[where[(r["doc_id"], r["chunk"])]].extend([r["lexeme"]] * int(r["tf"]))

    docs = {d.doc_id: document_text(d.title, d.body) for d in load_corpus(ROOT.parent / "shared" / "data" / dataset)}
    doc_ids = first_per_document(chunk_doc)
    if doc_ids != sorted(doc_ids) or set(doc_ids) != {d for d, t in docs.items() if t}:
        raise SystemExit(f"collection {coll_name!r} does not hold the documents of {dataset}; ingest it anew")
    doc_text = [docs[d] for d in doc_ids]
    boundary = [i == 0 or chunk_doc[i] != chunk_doc[i - 1] for i in range(len(chunk_doc))]
    starts = np.flatnonzero(boundary)
    sizes = np.diff(np.append(starts, len(chunk_doc)))

    # The whole document's vector.  all-MiniLM-L6-v2 reads a text's first 254 tokens, so a
    # document whose first chunk starts with the same 254 tokens (the chunk is a prefix of the
    # document's text) gives the model the same input: its vector is that chunk's stored one.
    # A one-chunk document's chunk is the document.  The others (a first chunk shorter than
    # what the model reads) are embedded whole, once, through ranklock's embedding cache
    # (keyed by the model's weights and the text); later runs read them back.
    emb = eng.embedder_for(coll.embedder_id)
    if emb.sha256 != coll.embedder_sha256:
        raise SystemExit(f"the loaded {coll.embedder_id} is not the model {coll_name!r} was embedded with")
    cap = token_capacity(emb.tokenizer)
    doc_vec = chunk_vec[starts].copy()
    same_input = sizes == 1
    for i in np.flatnonzero(sizes > 1):
        first, whole = emb.tokenizer.offsets(chunk_text[starts[i]]), emb.tokenizer.offsets(doc_text[i])
        same_input[i] = cap is not None and len(first) >= cap and first[:cap] == whole[:cap]
    embed = {text_sha256(doc_text[i]): doc_text[i] for i in np.flatnonzero(~same_input)}
    vecs, embedded = _embed_missing(eng.db, emb, embed, lambda *_: None, {})
    for i in np.flatnonzero(~same_input):
        doc_vec[i] = vecs[text_sha256(doc_text[i])]
    vectors = {
        "documents": len(doc_ids),
        "chunks": len(chunk_doc),
        "multi_chunk_documents": int((sizes > 1).sum()),
        "model_reads_tokens": cap,
        "whole_document_vector_is_its_first_chunks": int(same_input.sum()),
        "whole_document_vector_embedded_whole": len(embed),
        "embedded_by_this_run": embedded,
    }
    return Corpus(
        doc_ids,
        doc_text,
        doc_vec,
        chunk_doc,
        chunk_text,
        chunk_vec,
        starts,
        chunk_lexemes,
        _analyse(eng, coll, doc_text),
        vectors,
    )


def load_queries(eng: Any, coll_name: str, queries: dict[str, str]) -> Queries:
    from ranklock.ingest.normalize import normalize
    from ranklock.search.embedding import query_vector

    coll = eng.collection(coll_name)
    emb = eng.embedder_for(coll.embedder_id)
    qids = sorted(queries)
    text = [queries[q] for q in qids]
    # ranklock embeds and analyses the normalised query (ranklock.search.pipeline); so does this.
    norm = [normalize(t) for t in text]
    vec = np.stack([query_vector(eng.db, coll, emb, t) for t in norm]).astype(np.float32)
    return Queries(qids, text, vec, _analyse(eng, coll, norm))


# -- ranklock -----------------------------------------------------------------------------


def ranklock_runs(
    eng: Any, coll: str, queries: dict[str, str], modes: Sequence[str] = MODES, **params: Any
) -> dict[str, dict[str, list[str]]]:
    """Ranked document ids per query in each mode, through Engine.search (bench/lexical.py's runner)."""
    out: dict[str, dict[str, list[str]]] = {}
    for mode in modes:
        depth = HYBRID_DEPTH if mode == "hybrid" else SINGLE_DEPTH
        run, _ = ranklock_run(eng, coll, queries, mode=mode, ranker="bm25", k=SINGLE_DEPTH, depth=depth, **params)
        # ranked_run's scores decrease with the rank: sorting them gives the order back.
        out[mode] = {q: sorted(r, key=lambda d, r=r: -r[d]) for q, r in run.items()}
    return out


# -- bm25s --------------------------------------------------------------------------------


class Bm25:
    """A bm25s index (Lucene idf and term weights) over token lists; scores every unit for a query."""

    def __init__(self, units: list[list[str]], *, k1: float, dtype: str = "float32") -> None:
        import bm25s

        self.index = bm25s.BM25(k1=k1, b=0.75, method="lucene", dtype=dtype)
        self.index.index(units, show_progress=False)
        self.n = len(units)

    def scores(self, tokens: list[str]) -> np.ndarray:
        ids = self.index.get_tokens_ids(tokens)
        if not ids:
            return np.zeros(self.n)
        return np.asarray(self.index.get_scores_from_ids(ids), dtype=np.float64)


def bm25s_tokenize(texts: list[str], stopwords: str | list[str] = "en") -> list[list[str]]:
    """bm25s's own analysis: its default token pattern (2+ word characters), lower case, stop words, PyStemmer."""
    import bm25s
    import Stemmer

    out = bm25s.tokenize(
        texts, stopwords=stopwords, stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False
    )
    return [list(t) for t in out]


def postgres_stop_words(eng: Any, words: set[str]) -> list[str]:
    """Which of ``words`` PostgreSQL's ``english`` configuration drops: its dictionary maps them to nothing."""
    rows = eng.db.fetchall(
        "SELECT w FROM unnest(%s::text[]) AS w WHERE ts_lexize('english_stem'::regdictionary, w) = '{}'",
        [sorted(words)],
    )
    return sorted(r["w"] for r in rows)


def lexical_run(
    index: Bm25, units_per_doc: np.ndarray | None, doc_ids: list[str], qids: list[str], qtokens: list[list[str]]
) -> dict[str, list[str]]:
    run = {}
    for q, toks in zip(qids, qtokens, strict=True):
        s = index.scores(toks)
        if units_per_doc is not None:
            s = best_per_document(units_per_doc, s)
        run[q] = top_documents(doc_ids, s, SINGLE_DEPTH, positive=True)
    return run


def semantic_run(
    vecs: np.ndarray, units_per_doc: np.ndarray | None, doc_ids: list[str], qs: Queries
) -> dict[str, list[str]]:
    """Exact cosine, float64: every unit scored, a document by its best unit."""
    v = vecs.astype(np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    run = {}
    for q, qv in zip(qs.qids, qs.vec.astype(np.float64), strict=True):
        s = v @ (qv / np.linalg.norm(qv))
        if units_per_doc is not None:
            s = best_per_document(units_per_doc, s)
        run[q] = top_documents(doc_ids, s, SINGLE_DEPTH)
    return run


def hybrid_run(lex: dict[str, list[str]], sem: dict[str, list[str]]) -> dict[str, list[str]]:
    return {q: [d for d, _ in rrf([lex[q][:HYBRID_DEPTH], sem[q][:HYBRID_DEPTH]])] for q in lex}


# -- LanceDB ------------------------------------------------------------------------------


def lancedb_runs(
    workdir: Path, name: str, doc_of_row: list[str], texts: list[str], vecs: np.ndarray, qs: Queries
) -> tuple[dict[str, dict[str, list[str]]], dict[str, Any]]:
    """LanceDB's FTS, vector and hybrid (RRF K=60) search over one row per text; results collapsed to documents."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS
    from lancedb.rerankers import RRFReranker

    db = lancedb.connect(str(workdir))
    dim = vecs.shape[1]
    data = pa.table(
        {
            "doc_id": pa.array(doc_of_row, pa.string()),
            "text": pa.array(texts, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.astype(np.float32).ravel()), dim),
        }
    )
    tbl = db.create_table(name, data=data, mode="overwrite")
    tbl.create_index("text", config=FTS())  # its defaults: the analyser a new user gets
    info = {"rows": tbl.count_rows(), "fts_index": [i.index_details for i in tbl.list_indices()]}
    reranker = RRFReranker(K=RRF_K)
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in MODES}
    failed: dict[str, list[str]] = {m: [] for m in MODES}
    for q, text, qv in zip(qs.qids, qs.text, qs.vec, strict=True):
        for mode in MODES:
            try:
                rows = _lance_query(tbl, mode, text, qv, reranker).to_arrow().select(["doc_id"]).to_pylist()
            except Exception as exc:  # a peer's failure is its result: no documents, counted 0, reported
                failed[mode].append(f"{q}: {type(exc).__name__}: {str(exc)[:200]}")
                rows = []
            runs[mode][q] = first_per_document([r["doc_id"] for r in rows])
    info["failed_queries"] = {m: v for m, v in failed.items() if v}
    return runs, info


def _lance_query(tbl: Any, mode: str, text: str, qv: np.ndarray, reranker: Any) -> Any:
    """LanceDB's query builder for one mode, as its documentation writes them."""
    if mode == "lexical":
        return tbl.search(text, query_type="fts", fts_columns="text").limit(SINGLE_DEPTH)
    if mode == "semantic":
        return tbl.search(qv, query_type="vector").distance_type("cosine").limit(SINGLE_DEPTH)
    return (
        tbl.search(query_type="hybrid", fts_columns="text")
        .vector(qv)
        .text(text)
        .distance_type("cosine")
        .rerank(reranker)
        .limit(HYBRID_DEPTH)
    )


# -- one data set -------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    key: str
    mode: str
    label: str
    run: dict[str, list[str]]


def evaluate_dataset(eng: Any, dataset: str, coll: str, *, lance: bool, rounds: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    _, queries, qrels = load_beir(dataset)
    ranklock = ranklock_runs(eng, coll, queries)
    ranklock_k15 = ranklock_runs(eng, coll, queries, ("lexical",), k1=1.5)["lexical"]
    corpus = load_corpus_vectors(eng, coll, dataset)
    qs = load_queries(eng, coll, queries)
    doc_ids, starts = corpus.doc_ids, corpus.chunk_starts

    systems: list[System] = [System(f"ranklock/{m}", m, f"ranklock {m}", ranklock[m]) for m in MODES]
    # The reference: bm25s over the whole document text, its own analysis.
    doc_tok = bm25s_tokenize(corpus.doc_text)
    q_tok = bm25s_tokenize(qs.text)
    lex: dict[str, dict[str, list[str]]] = {}
    for k1 in (1.2, 1.5):
        index = Bm25(doc_tok, k1=k1)
        for qtf, toks in (("counted", q_tok), ("once", [each_once(t) for t in q_tok])):
            key = f"bm25s/k1={k1}/qtf={qtf}"
            lex[key] = lexical_run(index, None, doc_ids, qs.qids, toks)
            label = f"bm25s k1 {k1}, repeated query terms {'counted' if qtf == 'counted' else 'once'}"
            systems.append(System(key, "lexical", label, lex[key]))
    sem = {
        "exact/chunks": semantic_run(corpus.chunk_vec, starts, doc_ids, qs),
        "exact/doc": semantic_run(corpus.doc_vec, None, doc_ids, qs),
    }
    systems.append(
        System("exact/chunks", "semantic", "exact cosine, best chunk (ranklock's vectors)", sem["exact/chunks"])
    )
    systems.append(System("exact/doc", "semantic", "exact cosine, whole-document vector", sem["exact/doc"]))
    for lkey, lrun in lex.items():
        for skey, srun in sem.items():
            label = f"RRF({lkey.replace('/', ' ')}, {skey.replace('/', ' ')})"
            systems.append(System(f"rrf/{lkey}+{skey}", "hybrid", label, hybrid_run(lrun, srun)))

    lance_info: dict[str, Any] = {}
    if lance:
        try:
            import lancedb

            lance_info["version"] = lancedb.__version__
        except ImportError as exc:
            lance_info["error"] = f"lancedb is not installed ({exc}); pip install -e '.[dev]'"
        else:
            with tempfile.TemporaryDirectory(prefix="peers-lancedb-") as tmp:
                for rep, rows_doc, texts, vecs in (
                    ("doc", doc_ids, corpus.doc_text, corpus.doc_vec),
                    ("chunks", corpus.chunk_doc, corpus.chunk_text, corpus.chunk_vec),
                ):
                    runs, info = lancedb_runs(Path(tmp), f"{dataset}_{rep}", rows_doc, texts, vecs, qs)
                    lance_info[rep] = info
                    for mode, what in (("lexical", "native FTS"), ("semantic", "flat cosine"), ("hybrid", "RRF K=60")):
                        label = f"LanceDB {what}, one row per {'document' if rep == 'doc' else 'chunk'}"
                        systems.append(System(f"lancedb/{rep}/{mode}", mode, label, runs[mode]))

    per_query = {s.key: ndcg_per_query(qrels, s.run) for s in systems}
    table = []
    for s in systems:
        row: dict[str, Any] = {"key": s.key, "mode": s.mode, "label": s.label, "ndcg@10": mean(per_query[s.key])}
        if not s.key.startswith("ranklock/"):
            row["vs_ranklock"] = paired(per_query[f"ranklock/{s.mode}"], per_query[s.key], rounds=rounds)
        table.append(row)

    gap = lexical_gap(eng, corpus, qs, qrels, per_query, ndcg_per_query(qrels, ranklock_k15), rounds)
    return {
        "queries": len(qs.qids),
        "graded_qrels": any(v > 1 for rel in qrels.values() for v in rel.values()),
        "vectors": corpus.vectors,
        "tokenisation": {
            "ranklock": f"PostgreSQL text search configuration {eng.collection(coll).language!r} "
            "(default parser, english_stem Snowball dictionary and its stop list) plus whole identifiers "
            "(ranklock.doc_tsvector)",
            "bm25s": "bm25s.tokenize defaults: token pattern (?u)\\b\\w\\w+\\b, lower case, its English stop list "
            f"({len(_bm25s_stop_words())} words), PyStemmer 'english' (Snowball)",
            "lancedb": lance_info.get("doc", {}).get("fts_index"),
        },
        "lancedb": lance_info,
        "systems": table,
        "lexical_gap": gap,
        "per_query": per_query,
        "seconds": time.perf_counter() - t0,
    }


def _bm25s_stop_words() -> tuple[str, ...]:
    from bm25s.stopwords import STOPWORDS_EN

    return tuple(STOPWORDS_EN)


# -- issue 22, point 3: where the lexical gap comes from ----------------------------------------


def lexical_gap(
    eng: Any,
    corpus: Corpus,
    qs: Queries,
    qrels: dict[str, dict[str, int]],
    per_query: dict[str, dict[str, float]],
    ranklock_k15: dict[str, float],
    rounds: int,
) -> dict[str, Any]:
    """The ladder from a bm25s run that reproduces ranklock's lexical branch to the bm25s reference.

    Every rung is bm25s in float64 (ranklock sums float8) with one choice
    changed; "one at a time" changes each choice alone from the first rung.
    """
    tuning, held_out = split_queries(qs.qids)
    vocab = {t for toks in bm25s_tokenize(corpus.doc_text + qs.text, stopwords=[]) for t in toks}
    pg_stop = postgres_stop_words(eng, vocab)
    analyses = {
        "postgres": (corpus.chunk_lexemes, corpus.doc_lexemes, qs.lexemes),
        MIXED: (
            bm25s_tokenize(corpus.chunk_text, pg_stop),
            bm25s_tokenize(corpus.doc_text, pg_stop),
            bm25s_tokenize(qs.text, pg_stop),
        ),
        "bm25s": (bm25s_tokenize(corpus.chunk_text), bm25s_tokenize(corpus.doc_text), bm25s_tokenize(qs.text)),
    }
    indexes: dict[tuple[str, str, float], Bm25] = {}

    def run(analysis: str, unit: str, qtf: str, k1: float) -> dict[str, float]:
        chunk_tok, doc_tok, q_tok = analyses[analysis]
        key = (analysis, unit, k1)
        if key not in indexes:
            indexes[key] = Bm25(chunk_tok if unit == "chunks" else doc_tok, k1=k1, dtype="float64")
        toks = q_tok if qtf == "counted" else [each_once(t) for t in q_tok]
        starts = corpus.chunk_starts if unit == "chunks" else None
        return ndcg_per_query(qrels, lexical_run(indexes[key], starts, corpus.doc_ids, qs.qids, toks))

    base = ("postgres", "chunks", "once", 1.2)
    rungs: dict[str, tuple[str, str, str, float]] = {
        "bm25s mimicking ranklock: its lexemes, its chunks (best chunk), each query term once, k1 1.2": base,
        "+ whole documents instead of chunks": ("postgres", "doc", "once", 1.2),
        "+ repeated query terms counted": ("postgres", "doc", "counted", 1.2),
        "+ bm25s splitting (2+ word characters), postgres stop list": (MIXED, "doc", "counted", 1.2),
        "+ bm25s stop list (33 words)": ("bm25s", "doc", "counted", 1.2),
        "+ k1 1.5 (= bm25s at its defaults)": ("bm25s", "doc", "counted", 1.5),
    }
    alone: dict[str, tuple[str, str, str, float]] = {
        "chunks -> whole documents": ("postgres", "doc", "once", 1.2),
        "query terms once -> counted": ("postgres", "chunks", "counted", 1.2),
        "postgres analysis -> bm25s splitting, postgres stop list": (MIXED, "chunks", "once", 1.2),
        "postgres analysis -> bm25s analysis (splitting and stop list)": ("bm25s", "chunks", "once", 1.2),
        "k1 1.2 -> 1.5": ("postgres", "chunks", "once", 1.5),
    }
    scores = {spec: run(*spec) for spec in {*rungs.values(), *alone.values()}}
    rl = per_query["ranklock/lexical"]
    mimic = scores[base]
    agree = sum(abs(mimic[q] - rl[q]) < 1e-9 for q in qs.qids)

    def step(a: dict[str, float], b: dict[str, float]) -> dict[str, Any]:
        return {
            "tuning_diff": mean(b, tuning) - mean(a, tuning),
            "held_out": paired(restrict(a, held_out), restrict(b, held_out), rounds=rounds),
        }

    ladder = []
    prev = rl
    for label, spec in rungs.items():
        ladder.append({"step": label, "ndcg@10_held_out": mean(scores[spec], held_out), **step(prev, scores[spec])})
        prev = scores[spec]
    return {
        "split": {"seed": SPLIT_SEED, "tuning": len(tuning), "held_out": len(held_out)},
        "postgres_stop_words_in_vocabulary": len(pg_stop),
        "mimic_equals_ranklock_queries": f"{agree} of {len(qs.qids)}",
        "ranklock_lexical_held_out": mean(rl, held_out),
        "gap_held_out": {
            ref: paired(restrict(rl, held_out), restrict(per_query[ref], held_out), rounds=rounds)
            for ref in ("bm25s/k1=1.2/qtf=counted", "bm25s/k1=1.5/qtf=counted")
        },
        "ranklock_k1_1.5": {"ndcg@10_held_out": mean(ranklock_k15, held_out), **step(rl, ranklock_k15)},
        "ladder": ladder,
        "one_at_a_time": [{"change": label, **step(mimic, scores[spec])} for label, spec in alone.items()],
    }


# -- output -------------------------------------------------------------------------------


def print_dataset(name: str, r: dict[str, Any], baseline: dict[str, Any] | None) -> None:
    print(
        f"\n### {name}: {r['queries']} test queries, {r['vectors']['documents']:,} documents, "
        f"{r['vectors']['chunks']:,} chunks ({r['vectors']['multi_chunk_documents']:,} documents in several)\n"
    )
    print("| mode | system | nDCG@10 | peer - ranklock | p | up / down |")
    print("|---|---|---:|---:|---:|---:|")
    for mode in MODES:
        for row in (x for x in r["systems"] if x["mode"] == mode):
            if "vs_ranklock" not in row:
                print(f"| {mode} | **{row['label']}** | **{row['ndcg@10']:.4f}** | | | |")
                continue
            t = row["vs_ranklock"]
            print(
                f"| {mode} | {row['label']} | {row['ndcg@10']:.4f} | {t['diff']:+.4f} | "
                f"{t['p_randomization']:.3f} | {t['up']} / {t['down']} |"
            )
    g = r["lexical_gap"]
    print(
        f"\nlexical gap, held-out half ({g['split']['held_out']} queries, seed {g['split']['seed']}); "
        f"ranklock lexical {g['ranklock_lexical_held_out']:.4f}; the mimic gives ranklock's nDCG@10 on "
        f"{g['mimic_equals_ranklock_queries']} queries\n"
    )
    print("| step | nDCG@10 held-out | diff tuning | diff held-out | p | up / down |")
    print("|---|---:|---:|---:|---:|---:|")
    k = g["ranklock_k1_1.5"]
    print(
        f"| ranklock itself, k1 1.5 (`Engine.search(k1=1.5)`) | {k['ndcg@10_held_out']:.4f} | "
        f"{k['tuning_diff']:+.4f} | {k['held_out']['diff']:+.4f} | {k['held_out']['p_randomization']:.3f} | "
        f"{k['held_out']['up']} / {k['held_out']['down']} |"
    )
    for s in g["ladder"]:
        h = s["held_out"]
        print(
            f"| {s['step']} | {s['ndcg@10_held_out']:.4f} | {s['tuning_diff']:+.4f} | {h['diff']:+.4f} | "
            f"{h['p_randomization']:.3f} | {h['up']} / {h['down']} |"
        )
    print("\none piece at a time, from the mimic:\n")
    print("| change | diff tuning | diff held-out | p | up / down |")
    print("|---|---:|---:|---:|---:|")
    for s in g["one_at_a_time"]:
        h = s["held_out"]
        print(
            f"| {s['change']} | {s['tuning_diff']:+.4f} | {h['diff']:+.4f} | {h['p_randomization']:.3f} | "
            f"{h['up']} / {h['down']} |"
        )
    for ref, t in g["gap_held_out"].items():
        print(f"gap to {ref}, held-out: {t['diff']:+.4f} (p {t['p_randomization']:.3f})")
    if baseline is not None:
        print("\nranklock now against --baseline:\n")
        print("| mode | baseline | now | diff | p | up / down |")
        print("|---|---:|---:|---:|---:|---:|")
        for mode, t in r["vs_baseline"].items():
            print(
                f"| {mode} | {t['mean_a']:.4f} | {t['mean_b']:.4f} | {t['diff']:+.4f} | "
                f"{t['p_randomization']:.3f} | {t['up']} / {t['down']} |"
            )
    lance = r["lancedb"]
    for rep in ("doc", "chunks"):
        if lance.get(rep, {}).get("failed_queries"):
            print(f"LanceDB ({rep}) failed queries: {lance[rep]['failed_queries']}")
    if "error" in lance:
        print(f"LanceDB not run: {lance['error']}")


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", default="/work/bench-home", help="embedded PostgreSQL data directory")
    ap.add_argument("--datasets", default="scifact,nfcorpus", help="comma-separated, folders of ../shared/data")
    ap.add_argument("--prefix", default="peers_", help="collection name = prefix + data set (ingested if missing)")
    ap.add_argument("--out", default=str(OUT / "peers.json"))
    ap.add_argument("--baseline", default=None, help="an earlier peers.json: pair this run's ranklock with its")
    ap.add_argument("--skip-lancedb", action="store_true")
    ap.add_argument("--rounds", type=int, default=100_000, help="sign flips of each paired test")
    args = ap.parse_args()

    from quality import DATA, ensure_ingested
    from ranklock import Engine

    baseline = json.loads(Path(args.baseline).read_text()) if args.baseline else None
    eng = Engine(home=args.home, log_queries=False)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "ranklock": git_state(),
        "versions": _versions(),
        "loadavg_start": list(os.getloadavg()),
        "hybrid_depth": HYBRID_DEPTH,
        "rrf_k": RRF_K,
        "datasets": {},
    }
    for name in args.datasets.split(","):
        coll = f"{args.prefix}{name}"
        collection = ensure_ingested(eng, coll, DATA / name)
        r = evaluate_dataset(eng, name, coll, lance=not args.skip_lancedb, rounds=args.rounds)
        r["collection"] = {"name": coll, **collection}
        if baseline is not None:
            old = baseline["datasets"][name]["per_query"]
            r["vs_baseline"] = {
                m: paired(old[f"ranklock/{m}"], r["per_query"][f"ranklock/{m}"], rounds=args.rounds) for m in MODES
            }
        report["datasets"][name] = r
        print_dataset(name, r, baseline)
    # Quality does not depend on load; recorded all the same, as for every benchmark here.
    report["loadavg_end"] = list(os.getloadavg())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print(f"\nload average at start {report['loadavg_start']}, at end {report['loadavg_end']}")
    print(f"wrote {args.out}")
    eng.close()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("ranklock", "bm25s", "PyStemmer", "lancedb", "pylance", "pyarrow", "pytrec_eval-terrier", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


if __name__ == "__main__":
    main()
