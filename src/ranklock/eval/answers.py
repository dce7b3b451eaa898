"""Answer evaluation: retrieval recall, citations, correctness and abstention, per class.

For every retrieval mode and every generator, each labelled question is
searched once (``k = 10``, the question's filter, one pinned snapshot) for
recall@8 and recall@10 of its gold notes, then asked once through
``Engine.ask`` with the same filter and mode; the answer is scored by the pure
functions of :mod:`.answer_correctness`, :mod:`.citations`, :mod:`.abstention`
and :mod:`.metrics`, and the layer to blame by :mod:`.reranker_trigger`.

Unanswerable questions (no gold note) count only towards abstention; every
other metric is a mean over the answerable questions of the class.

    >>> rep = evaluate_answers(eng, "journal", load_questions(path))  # doctest: +SKIP
    >>> rep["runs"][0]["overall"]["correctness"]                        # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError, QueryError
from ..settings import ASK_DEPTH, ASK_RRF_K, REQUEST
from .abstention import abstention_accuracy, false_abstention_rate
from .answer_correctness import answer_correct
from .citations import citation_precision, citation_recall, mean_defined
from .metrics import mean, recall_at_k
from .reranker_trigger import class_verdict, diagnose_question, explain_verdict, trigger_fires
from .run import parse_modes, snapshot_info
from .target import AskTarget

__all__ = ["ANSWERS_SCHEMA", "RECALL_KS", "evaluate_answers", "markdown_answers"]

ANSWERS_SCHEMA = "ranklock.eval.answers/1"
RECALL_KS = (8, 10)

Progress = Callable[[str, int, int], None]


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _ranking(hits: Sequence[Any]) -> list[str]:
    """Note ids in rank order, each once (a note's later chunks add nothing to note-level recall)."""
    return list(dict.fromkeys(str(_field(h, "doc_id")) for h in hits))


def _questions_digest(questions: Sequence[Any]) -> str:
    h = hashlib.sha256()
    for q in questions:
        h.update(json.dumps(q.record(), sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
    return h.hexdigest()


def evaluate_answers(
    target: AskTarget,
    collection: str,
    questions: Sequence[Any],
    *,
    generators: Sequence[str] = ("extractive",),
    modes: Sequence[str] = ("hybrid",),
    chunks: int = REQUEST.chunks,
    snapshot: int | None = None,
    source: str = "",
    progress: Progress | None = None,
    half: str = "all",
    rerank: int | None = None,
) -> dict[str, Any]:
    """Score every (mode, generator) pair on ``questions`` (see the module docstring); return the report.

    With no generator, only retrieval (recall@8, recall@10 per class) is measured.  ``half`` names
    the part of the question set given (ranklock.eval.split), for the report; ``rerank`` asks
    with the reranker over the top N fused chunks (``Engine.ask(rerank=N)``).
    """
    modes = parse_modes(modes)
    if generators and not hasattr(target, "ask"):
        raise ConfigError(
            "this ranklock has no Engine.ask, so answers cannot be scored; evaluate retrieval only "
            "(no generator) or install a ranklock with the ask command."
        )
    snap = snapshot_info(target, collection, snapshot)
    report: dict[str, Any] = {
        "schema": ANSWERS_SCHEMA,
        "collection": collection,
        "snapshot": {"id": snap["id"], "manifest_hash": snap["manifest_hash"]},
        "questions": {
            "path": source,
            "count": len(questions),
            "digest": _questions_digest(questions),
            "half": half,
        },
        "chunks": chunks,
        "rerank": rerank,
        "retrieval": {},
        "runs": [],
    }
    for mode in modes:
        retrieved: dict[str, dict[str, Any]] = {}
        for i, q in enumerate(questions):
            try:
                # Ask's own depth and RRF constant, so recall@8 describes the chunks Ask hands over.
                res = target.search(
                    collection,
                    q.question,
                    k=max(RECALL_KS),
                    mode=mode,
                    filter=q.filter,
                    snapshot=snap["id"],
                    depth=ASK_DEPTH,
                    rrf_k=ASK_RRF_K,
                )
                ranking = _ranking(res.hits)
            except QueryError:
                # A lexical search of a stop-word-only question is refused; for
                # evaluation that is an empty ranking.
                ranking = []
            judg = dict.fromkeys(q.gold, 1)
            retrieved[q.id] = {
                "ranks": {d: r for r, d in enumerate(ranking, 1) if d in judg},
                **({f"recall@{k}": recall_at_k(ranking, judg, k) for k in RECALL_KS} if q.gold else {}),
            }
            if progress is not None:
                progress(f"{mode} search", i + 1, len(questions))
        report["retrieval"][mode] = {
            "overall": _retrieval_means(questions, retrieved),
            "by_class": {c: _retrieval_means(qs, retrieved) for c, qs in _by_class(questions).items()},
            "per_question": retrieved,
        }
        for gen in generators:
            report["runs"].append(
                _run(
                    target,
                    collection,
                    questions,
                    retrieved,
                    mode=mode,
                    generator=gen,
                    chunks=chunks,
                    snap=snap,
                    progress=progress,
                    rerank=rerank,
                )
            )
    return report


def _ask(
    target: AskTarget,
    collection: str,
    q: Any,
    *,
    mode: str,
    generator: str,
    chunks: int,
    snapshot: int,
    rerank: int | None = None,
) -> Any:
    """``ask`` with retrieval in ``mode`` (Ask's own retrieval is hybrid; its ``mode`` keyword is for this)."""
    kwargs: dict[str, Any] = {"filter": q.filter, "snapshot": snapshot, "chunks": chunks, "generator": generator}
    if rerank is not None:
        kwargs["rerank"] = rerank
    if mode == "hybrid":
        return target.ask(collection, q.question, **kwargs)
    return target.ask(collection, q.question, mode=mode, **kwargs)


def _by_class(questions: Sequence[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for q in questions:
        out.setdefault(q.cls, []).append(q)
    return out


def _retrieval_means(questions: Sequence[Any], retrieved: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    answerable = [q for q in questions if q.gold]
    out: dict[str, Any] = {
        f"recall@{k}": mean(retrieved[q.id][f"recall@{k}"] for q in answerable) if answerable else None
        for k in RECALL_KS
    }
    out["answerable"] = len(answerable)
    return out


def _run(
    target: AskTarget,
    collection: str,
    questions: Sequence[Any],
    retrieved: Mapping[str, Mapping[str, Any]],
    *,
    mode: str,
    generator: str,
    chunks: int,
    snap: Mapping[str, Any],
    progress: Progress | None,
    rerank: int | None = None,
) -> dict[str, Any]:
    per_question: dict[str, dict[str, Any]] = {}
    for i, q in enumerate(questions):
        try:
            ans = _ask(
                target, collection, q, mode=mode, generator=generator, chunks=chunks, snapshot=snap["id"], rerank=rerank
            )
            text = str(_field(ans, "answer", ""))
            abstained = bool(_field(ans, "abstained", False))
            cited = [str(_field(c, "doc_id")) for c in _field(ans, "citations", []) or []]
            given = [str(_field(c, "doc_id")) for c in _field(ans, "chunks", []) or []]
            error = None
        except QueryError as exc:
            # Nothing searchable in the question (or nothing left by the filter):
            # no answer was given, which is an abstention.
            text, abstained, cited, given, error = "", True, [], [], str(exc)
        ranks = retrieved[q.id]["ranks"]
        row: dict[str, Any] = {
            "class": q.cls,
            "answer": text,
            "abstained": abstained,
            "cited": list(dict.fromkeys(cited)),
            "chunks": given,
        }
        if error is not None:
            row["error"] = error
        if q.gold:
            correct = (not abstained) and answer_correct(text, q.answer)
            row.update(
                correct=correct,
                citation_precision=citation_precision(cited, q.gold),
                citation_recall=citation_recall(cited, q.gold),
                diagnosis=diagnose_question(correct, ranks, q.gold, chunks=chunks),
            )
        per_question[q.id] = row
        if progress is not None:
            progress(f"{mode} ask {generator}", i + 1, len(questions))
    by_class = {c: _answer_means(qs, retrieved, per_question) for c, qs in _by_class(questions).items()}
    return {
        "mode": mode,
        "generator": generator,
        "overall": _answer_means(questions, retrieved, per_question),
        "by_class": by_class,
        "trigger": {c: m["trigger"] for c, m in by_class.items() if "trigger" in m},
        "per_question": per_question,
    }


def _answer_means(
    questions: Sequence[Any], retrieved: Mapping[str, Mapping[str, Any]], per_question: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    answerable = [q for q in questions if q.gold]
    rows = [per_question[q.id] for q in answerable]
    out: dict[str, Any] = {"questions": len(questions), "answerable": len(answerable)}
    for k in RECALL_KS:
        out[f"recall@{k}"] = mean(retrieved[q.id][f"recall@{k}"] for q in answerable) if answerable else None
    out["correctness"] = mean(1.0 if r["correct"] else 0.0 for r in rows) if rows else None
    out["citation_precision"], out["cited_answers"] = mean_defined(r["citation_precision"] for r in rows)
    out["citation_recall"], _n = mean_defined(r["citation_recall"] for r in rows)
    flags = [bool(per_question[q.id]["abstained"]) for q in questions]
    can = [bool(q.gold) for q in questions]
    out["abstention_accuracy"] = abstention_accuracy(flags, can)
    out["false_abstention_rate"] = false_abstention_rate(flags, can)
    if answerable:
        buried = [q.id for q in answerable if per_question[q.id]["diagnosis"] == "buried"]
        missed = [q.id for q in answerable if per_question[q.id]["diagnosis"] == "generator"]
        lost = [q.id for q in answerable if per_question[q.id]["diagnosis"] == "not_retrieved"]
        verdict = class_verdict(out["recall@10"], out["correctness"], len(buried), len(missed))
        out["trigger"] = {
            "fires": trigger_fires(out["recall@10"], out["correctness"]),
            "verdict": verdict,
            "message": explain_verdict(verdict, out["recall@10"], out["correctness"], buried, missed),
            "buried": buried,
            "generator_missed": missed,
            "not_retrieved": lost,
        }
    return out


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def markdown_answers(report: Mapping[str, Any]) -> str:
    """The answer report as Markdown tables: per run, one row per class, then the triggers."""
    lines = [
        f"# Answer evaluation of `{report['collection']}`",
        "",
        f"- snapshot {report['snapshot']['id']}, manifest `{report['snapshot']['manifest_hash']}`",
        f"- {report['questions']['count']} questions (`{report['questions']['path']}`), "
        f"{report['chunks']} chunks to the generator",
        "",
    ]
    cols = ("recall@8", "recall@10", "correctness", "citation_precision", "citation_recall", "abstention_accuracy")
    for run in report["runs"]:
        lines += [
            f"## {run['generator']} over {run['mode']} retrieval",
            "",
            "| class | n | " + " | ".join(cols) + " |",
            "|---|---:|" + "---:|" * len(cols),
        ]
        for cls, m in [*run["by_class"].items(), ("all", run["overall"])]:
            lines.append(f"| {cls} | {m['questions']} | " + " | ".join(_fmt(m[c]) for c in cols) + " |")
        lines.append("")
        for cls, t in run["trigger"].items():
            lines.append(f"- {cls}: **{t['verdict']}**: {t['message']}")
        lines.append("")
    if not report["runs"]:
        for mode, r in report["retrieval"].items():
            lines += [f"## {mode} retrieval", "", "| class | recall@8 | recall@10 |", "|---|---:|---:|"]
            for cls, m in [*r["by_class"].items(), ("all", r["overall"])]:
                lines.append(f"| {cls} | {_fmt(m['recall@8'])} | {_fmt(m['recall@10'])} |")
            lines.append("")
    return "\n".join(lines)
