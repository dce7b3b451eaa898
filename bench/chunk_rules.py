"""Chunk cut rules compared on the lexical side, without embedding anything.

Ingests a BEIR collection with all-MiniLM-L6-v2's tokenizer but hash vectors
(tests/fakes.py), so only the chunks differ between runs, and scores BM25 at
depth 100 with trec_eval (pytrec_eval).  Lexical figures do not depend on the
vectors: the mid-word and shipped rules reproduce bench/quality.py's lexical
nDCG@10 exactly.  ``--stats`` only counts chunks that start or end mid-word,
chunks longer than the model reads, and seams sharing fewer than ``overlap``
tokens.  Each rule gets its own home (a new embedded server; stop it after).

    python bench/chunk_rules.py --rule word256 --dataset scifact --home /tmp/rules-word256-scifact
    python bench/chunk_rules.py --rule midword --dataset nfcorpus --stats
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import pytrec_eval  # noqa: E402

import ranklock.ingest.chunker as ch  # noqa: E402
import ranklock.snapshot.build as build  # noqa: E402
from fakes import HashEmbedder  # noqa: E402
from quality import DATA, load_qrels, load_queries  # noqa: E402
from ranklock import Engine  # noqa: E402
from ranklock.embed.base import Tokenizer  # noqa: E402
from ranklock.embed.sentence import default_embedder  # noqa: E402

Rule = Callable[[str, Tokenizer, int, int], list[ch.Chunk]]


def midword(text: str, tok: Tokenizer, window: int, overlap: int) -> list[ch.Chunk]:
    """The chunker before issue 11: every ``window - overlap`` tokens, wherever that falls."""
    spans = tok.offsets(text)
    if not spans:
        return [ch.Chunk(0, 0, len(text), text)] if text.strip() else []
    out: list[ch.Chunk] = []
    start = 0
    while True:
        end = min(start + window, len(spans))
        a, b = spans[start][0], spans[end - 1][1]
        out.append(ch.Chunk(len(out), a, b, text[a:b]))
        if end >= len(spans):
            return out
        start = end - overlap


def whole_words(cap: int | None) -> Rule:
    """``ranklock-boundaries/2`` with the window capped at ``cap`` instead of the tokenizer's own limit."""

    def rule(text: str, tok: Tokenizer, window: int, overlap: int) -> list[ch.Chunk]:
        class Capped:
            id = tok.id
            max_tokens = cap
            offsets = staticmethod(tok.offsets)

        return ch.chunk_text(text, Capped(), window, overlap)

    return rule


RULES: dict[str, Rule] = {"midword": midword, "word256": whole_words(None), "v2": ch.chunk_text}


def stats(rule: Rule, tok: Tokenizer, texts: list[str], window: int, overlap: int, model: int) -> dict[str, int]:
    out = dict.fromkeys(("chunks", "start_mid_word", "end_mid_word", f"over_{model}", "seams", "seams_short"), 0)
    for text in texts:
        spans = tok.offsets(text)
        strength = ch.boundaries(text, spans)
        starts = {a: i for i, (a, _) in enumerate(spans)}
        ends = {b: i for i, (_, b) in enumerate(spans)}
        prev_last = None
        for c in rule(text, tok, window, overlap):
            first, last = starts[c.start], ends[c.end]
            out["chunks"] += 1
            out[f"over_{model}"] += last - first + 1 > model
            out["start_mid_word"] += strength[first] == 0
            out["end_mid_word"] += last + 1 < len(spans) and strength[last + 1] == 0
            if prev_last is not None:
                out["seams"] += 1
                out["seams_short"] += prev_last - first + 1 < overlap
            prev_last = last
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="lexical nDCG@10 / recall@100 of a chunk cut rule")
    ap.add_argument("--rule", choices=sorted(RULES), required=True)
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--home", help="a fresh ranklock home for this rule and dataset")
    ap.add_argument("--stats", action="store_true", help="count chunks only (no database)")
    args = ap.parse_args()
    rule, ds = RULES[args.rule], DATA / args.dataset
    tok = default_embedder().tokenizer
    if args.stats:
        with open(ds / "corpus.jsonl", encoding="utf-8") as fh:
            docs = [json.loads(line) for line in fh]
        texts = [ch.document_text(d.get("title", ""), d.get("text", "")) for d in docs]
        print(json.dumps(stats(rule, tok, texts, 256, 32, tok.max_tokens or 256)))
        return
    if not args.home:
        ap.error("--home is required unless --stats")
    build.chunk_text = rule  # the builder's only call of the chunker

    class MiniLMTokHash(HashEmbedder):
        tokenizer = tok

    eng = Engine(home=args.home, log_queries=False)
    emb = MiniLMTokHash("test:hash-minilm-tok")
    eng._embedders[emb.id] = emb
    eng.ingest("c", ds, create={"embedder": emb.id, "index": "exact"})
    queries, qrels = load_queries(ds), load_qrels(ds)
    run = {}
    for qid in sorted(q for q in qrels if q in queries):
        res = eng.search("c", queries[qid], k=100, mode="lexical", depth=100)
        run[qid] = {h.doc_id: float(1000 - h.rank) for h in res.hits}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    n = len(ev)
    ndcg = sum(v["ndcg_cut_10"] for v in ev.values()) / n
    recall = sum(v["recall_100"] for v in ev.values()) / n
    row = eng.db.fetchone(
        "SELECT chunk_count FROM ranklock.snapshots WHERE id = %s", [eng.collection("c").active_snapshot_id]
    )
    chunks = row["chunk_count"] if row else None
    print(f"{args.rule} {args.dataset}: {chunks} chunks, nDCG@10 {ndcg:.4f} recall@100 {recall:.4f}")
    eng.close()


if __name__ == "__main__":
    main()
