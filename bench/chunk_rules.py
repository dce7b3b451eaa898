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
import itertools
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
    """Whole words at the configured window for every chunk, the model's limit taken as ``cap`` (None: ignored)."""

    def rule(text: str, tok: Tokenizer, window: int, overlap: int) -> list[ch.Chunk]:
        class Capped:
            id = tok.id
            max_tokens = cap
            offsets = staticmethod(tok.offsets)

        return ch.chunk_text(text, Capped(), window, overlap)

    return rule


def balanced(text: str, tok: Tokenizer, window: int, overlap: int) -> list[ch.Chunk]:
    """Tried, not kept: the shipped rule's chunk count, the chunks spread evenly over the document."""
    greedy = ch.chunk_text(text, tok, window, overlap)
    if len(greedy) < 2:
        return greedy
    window, overlap = ch.effective_window(window, overlap, tok)
    spans = tok.offsets(text)
    n, k = len(spans), len(greedy)
    strength = ch.boundaries(text, spans)
    starts = {a: i for i, (a, _) in enumerate(spans)}
    if any(strength[starts[c.start]] == 0 for c in greedy):
        return greedy
    stride = (n - window) / (k - 1)
    ranges = []
    prev = -1
    for i in range(k):
        if i == k - 1:
            s = ch._first(strength, max(n - window, prev + 1), n - 1, 1)
        else:
            s = ch._last(strength, prev + 1, max(prev + 1, round(i * stride)), 1)
        if s is None:
            return greedy
        e = n if s + window >= n else ch._last(strength, s + 1, s + window, 1)
        if e is None:
            return greedy
        ranges.append((s, e))
        prev = s
    for (_, e0), (s1, e1) in itertools.pairwise(ranges):
        if e0 - s1 < overlap or e1 <= e0:
            return greedy
    if ranges[-1][1] != n:
        return greedy
    return [
        ch.Chunk(i, spans[s][0], spans[e - 1][1], text[spans[s][0] : spans[e - 1][1]])
        for i, (s, e) in enumerate(ranges)
    ]


def titled(text: str, tok: Tokenizer, window: int, overlap: int) -> list[ch.Chunk]:
    """Tried, not kept: every chunk after the first carries the document's title line (window shortened to fit it)."""
    title, sep, _ = text.partition("\n\n")
    if not sep:
        return ch.chunk_text(text, tok, window, overlap)
    window, overlap = ch.effective_window(window, overlap, tok)
    head = len(tok.offsets(title + "\n\n"))
    if head > window // 4:
        return ch.chunk_text(text, tok, window, overlap)
    chunks = ch.chunk_text(text, tok, window - head, overlap)
    return [c if c.number == 0 else ch.Chunk(c.number, c.start, c.end, f"{title}\n\n{c.text}") for c in chunks]


def model_window(text: str, tok: Tokenizer, window: int, overlap: int) -> list[ch.Chunk]:
    """``ranklock-boundaries/2``: every window lowered to what the model reads (254 for MiniLM)."""
    cap = tok.max_tokens or window
    return ch.chunk_text(text, tok, min(window, cap), min(overlap, min(window, cap) - 1))


RULES: dict[str, Rule] = {
    "v3": ch.chunk_text,
    "titled": titled,
    "midword": midword,
    "word256": whole_words(None),
    "v2": model_window,
    "balanced": balanced,
}


def stats(rule: Rule, tok: Tokenizer, texts: list[str], window: int, overlap: int, model: int) -> dict[str, int]:
    keys = (
        "chunks",
        "start_mid_word",
        "end_mid_word",
        f"over_{model}",
        "tokens_no_vector_reads",
        "seams",
        "seams_short",
    )
    out = dict.fromkeys(keys, 0)
    for text in texts:
        spans = tok.offsets(text)
        strength = ch.boundaries(text, spans)
        starts = {a: i for i, (a, _) in enumerate(spans)}
        ends = {b: i for i, (_, b) in enumerate(spans)}
        prev_last = None
        read = [False] * len(spans)
        for c in rule(text, tok, window, overlap):
            first, last = starts[c.start], ends[c.end]
            read[first : min(last + 1, first + model)] = [True] * (min(last + 1, first + model) - first)
            out["chunks"] += 1
            out[f"over_{model}"] += last - first + 1 > model
            out["start_mid_word"] += strength[first] == 0
            out["end_mid_word"] += last + 1 < len(spans) and strength[last + 1] == 0
            if prev_last is not None:
                out["seams"] += 1
                out["seams_short"] += prev_last - first + 1 < overlap
            prev_last = last
        out["tokens_no_vector_reads"] += read.count(False)
    return out


def evaluate(eng: Engine, name: str, ds: Path, modes: tuple[str, ...]) -> dict[str, dict[str, dict[str, float]]]:
    """Per mode, each query's nDCG@10 and recall@100 (bench/quality.py's depths: 100, hybrid 40)."""
    queries, qrels = load_queries(ds), load_qrels(ds)
    out = {}
    for mode in modes:
        run = {}
        for qid in sorted(q for q in qrels if q in queries):
            res = eng.search(name, queries[qid], k=100, mode=mode, depth=40 if mode == "hybrid" else 100)
            run[qid] = {h.doc_id: float(1000 - h.rank) for h in res.hits}
        out[mode] = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="nDCG@10 / recall@100 of a chunk cut rule (lexical, or every mode)")
    ap.add_argument("--rule", choices=sorted(RULES), required=True)
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument(
        "--home",
        help="a ranklock home for this rule and dataset (fresh, or with --model one whose "
        "embedding cache already holds most texts)",
    )
    ap.add_argument("--stats", action="store_true", help="count chunks only (no database)")
    ap.add_argument(
        "--model",
        action="store_true",
        help="real all-MiniLM-L6-v2 vectors and all three modes (slow: embeds every uncached text)",
    )
    ap.add_argument("--collection", help="with --model: the collection to build (or reuse when it exists)")
    ap.add_argument(
        "--per-query",
        help="write each query's nDCG@10 to this JSON file (for bench/paired.py); "
        "with --model one file per mode: NAME-<mode>.json",
    )
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

    eng = Engine(home=args.home, log_queries=False)
    name = args.collection or "c"
    if args.model:
        modes: tuple[str, ...] = ("lexical", "semantic", "hybrid")
        if name not in {c.name for c in eng.collections()}:
            eng.ingest(name, ds)
    else:

        class MiniLMTokHash(HashEmbedder):
            tokenizer = tok

        modes = ("lexical",)
        emb = MiniLMTokHash("test:hash-minilm-tok")
        eng.embedders.register(emb)
        eng.ingest(name, ds, create={"embedder": emb.id, "index": "exact"})
    row = eng.db.fetchone(
        "SELECT chunk_count, manifest FROM ranklock.snapshots WHERE id = %s", [eng.collection(name).active_snapshot_id]
    )
    chunks = row["chunk_count"] if row else None
    for mode, ev in evaluate(eng, name, ds, modes).items():
        n = len(ev)
        ndcg = sum(v["ndcg_cut_10"] for v in ev.values()) / n
        recall = sum(v["recall_100"] for v in ev.values()) / n
        if args.per_query:
            path = Path(args.per_query)
            if args.model:
                path = path.with_name(f"{path.stem}-{mode}.json")
            path.write_text(json.dumps({q: v["ndcg_cut_10"] for q, v in sorted(ev.items())}))
        print(
            f"{args.rule} {args.dataset} {mode}: {chunks} chunks, nDCG@10 {ndcg:.4f} recall@100 {recall:.4f}",
            flush=True,
        )
    eng.close()


if __name__ == "__main__":
    main()
