"""The answer log (``ranklock.answer_log``) and replay of a logged answer, layer by layer.

Every ask writes one row: the retrieval record (the search's query-log id and
the numbered chunks with a sha256 of each text), the prompt version and hash,
the generator record, and the canonical answer JSON, or, for a rejected
answer, why it was rejected.

:func:`replay_answer` re-runs a logged answer on its snapshot and reports per
layer whether it is identical::

    retrieval   the numbered chunks: ids, ranks, scores and texts
    rerank      the reranker record and its order (null on both sides for an ask without --rerank)
    prompt      the prompt's sha256 (template version and rendered messages)
    generator   the generator record: name, model, checksum, params
    answer      the answer JSON, byte for byte

A deterministic generator (``extractive``; ``local`` on the same machine)
must match byte for byte; ``identical`` is true only when every layer is.

With ``RANKLOCK_LOG_TEXT=hash`` a row keeps the sha256 of the question and of
the answer JSON instead of the texts (and no raw reply); a replay then needs
the question again (checked against its hash) and compares the answer by hash.
The answer log is under the query log's retention policy
(ranklock.store.log_retention).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from ..errors import GenerationError, NotFound, QueryError
from ..settings import REQUEST
from .generators import logged_generator
from .model import Answer, AskChunk, GenerationRequest, GeneratorInfo, Prompt
from .prompt import render_prompt
from .retrieve import SearchFn, embed_fn, passages, retrieve
from .validate import cited_answer

log = logging.getLogger("ranklock.answerlog")

if TYPE_CHECKING:
    from ..collection import CollectionInfo
    from ..embed.base import Embedder
    from ..search.results import SearchResult
    from ..store.database import Database

__all__ = ["LAYERS", "AnswerReplay", "LogPolicy", "chunk_records", "log_answer", "log_rejected", "replay_answer"]

LAYERS = ("retrieval", "rerank", "prompt", "generator", "answer")
_ANSWER_ID = re.compile(r"[0-9a-f]{16}")


def chunk_records(chunks: Sequence[AskChunk]) -> list[list[Any]]:
    """The retrieval layer as logged: ``[n, doc_id, chunk, rank, score, sha256(text)]`` per passage."""
    return [
        [c.n, c.doc_id, c.chunk, c.rank, c.score, hashlib.sha256(c.text.encode("utf-8")).hexdigest()] for c in chunks
    ]


def text_sha256(text: str) -> str:
    """The sha256 a hash-only row keeps of a text (RANKLOCK_LOG_TEXT=hash): of its exact UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LogPolicy:
    """How answers are logged: hashes only (``hashed``), and ``logged``, told each new row's size.

    ``logged`` is the answer log's retention schedule (ranklock.store.log_retention, which
    ranklock.ask does not import: the Engine hands it in).
    """

    hashed: bool = False
    logged: Callable[[int], None] | None = None


def _insert(db: Database, values: dict[str, Any], policy: LogPolicy) -> int | None:
    if policy.hashed:
        request = dict(values["request"].obj)
        request["question_sha256"] = text_sha256(str(request.pop("question")))
        answer = values["answer"]
        values = {
            **values,
            "request": Jsonb(request),
            "answer": None,
            "answer_sha256": None if answer is None else text_sha256(answer),
            "raw": None,
        }
    else:
        values = {**values, "answer_sha256": None}
    # Only while the snapshot is as the retrieval read it: a purge that committed meanwhile changed its
    # manifest (ranklock.snapshot.purge), and this row could quote a document it erased.
    row = db.fetchone(
        "INSERT INTO ranklock.answer_log (answer_id, status, collection, snapshot_id, manifest_hash, query_id, "
        "request, chunks, prompt_version, prompt_sha256, generator, answer, answer_sha256, error, raw, rerank) "
        "SELECT %(answer_id)s, %(status)s, %(collection)s, %(snapshot_id)s, %(manifest_hash)s, %(query_id)s, "
        "%(request)s, %(chunks)s, %(prompt_version)s, %(prompt_sha256)s, %(generator)s, %(answer)s, "
        "%(answer_sha256)s, %(error)s, %(raw)s, %(rerank)s WHERE EXISTS (SELECT 1 FROM ranklock.snapshots AS s "
        "WHERE s.id = %(snapshot_id)s AND s.manifest_hash IS NOT DISTINCT FROM %(manifest_hash)s) RETURNING id, bytes",
        values,
    )
    if row is None:
        log.warning(
            "answer log: answer %s was not logged: a purge changed snapshot %s while it was made",
            values["answer_id"],
            values["snapshot_id"],
        )
        return None
    if policy.logged is not None:
        policy.logged(int(row["bytes"] or 0))
    return int(row["id"])


def _common(
    collection: str,
    res: SearchResult,
    request: dict[str, Any],
    chunks: Sequence[AskChunk],
    prompt: Prompt,
    info: GeneratorInfo,
) -> dict[str, Any]:
    return {
        "collection": collection,
        "snapshot_id": res.snapshot.id,
        "manifest_hash": res.snapshot.manifest_hash,
        "query_id": res.query_id,
        "request": Jsonb(request),
        "chunks": Jsonb(chunk_records(chunks)),
        "prompt_version": prompt.version,
        "prompt_sha256": prompt.sha256,
        "generator": Jsonb(info.to_dict()),
        "rerank": None if res.params.get("rerank") is None else Jsonb(res.params["rerank"]),
    }


def log_answer(
    db: Database,
    answer: Answer,
    res: SearchResult,
    request: dict[str, Any],
    prompt: Prompt,
    *,
    raw: str | None,
    policy: LogPolicy = LogPolicy(),
) -> int | None:
    """Log a validated answer; returns the log row id (None: a purge changed its snapshot meanwhile)."""
    return _insert(
        db,
        {
            **_common(answer.collection, res, request, answer.chunks, prompt, answer.generator),
            "answer_id": answer.answer_id,
            "status": "answered",
            "answer": answer.to_json(),
            "error": None,
            "raw": raw,
        },
        policy,
    )


def log_rejected(
    db: Database,
    collection: str,
    res: SearchResult,
    request: dict[str, Any],
    chunks: Sequence[AskChunk],
    prompt: Prompt,
    info: GeneratorInfo,
    *,
    error: str,
    raw: str | None,
    policy: LogPolicy = LogPolicy(),
) -> int | None:
    """Log an answer that was rejected (bad citations, garbage reply, endpoint down); returns the row id."""
    return _insert(
        db,
        {
            **_common(collection, res, request, chunks, prompt, info),
            "answer_id": None,
            "status": "rejected",
            "answer": None,
            "error": error,
            "raw": raw,
        },
        policy,
    )


@dataclass
class AnswerReplay:
    """Per-layer comparison of a logged answer with a fresh run on the same snapshot."""

    answer_id: str
    log_id: int
    collection: str
    snapshot_id: int
    query_id: int | None  # the replayed search's query-log id
    layers: dict[str, dict[str, Any]]

    @property
    def identical(self) -> bool:
        return all(layer["identical"] for layer in self.layers.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer_id": self.answer_id,
            "log_id": self.log_id,
            "collection": self.collection,
            "snapshot_id": self.snapshot_id,
            "query_id": self.query_id,
            "identical": self.identical,
            "layers": self.layers,
        }


def _layer(logged: Any, replayed: Any) -> dict[str, Any]:
    return {"identical": logged == replayed, "logged": logged, "replayed": replayed}


def _logged_question(answer_id: str, req: dict[str, Any], given: str | None) -> str:
    """The question to replay: the logged one, or (hash-only row) ``given`` once its sha256 matches.

    The query log's twin is ranklock.search.replay.replay_text, which ranklock.ask may not import
    (tests/test_ask_rules.py: ask reaches only the foundations).
    """
    if "question" in req:
        if given is not None and given != req["question"]:
            raise QueryError(f"answer {answer_id} was logged with its question; replay it without --question.")
        return str(req["question"])
    digest = str(req.get("question_sha256"))
    if given is None:
        raise QueryError(
            f"answer {answer_id} was logged with hashes only (RANKLOCK_LOG_TEXT=hash): its question is not stored, "
            f"only its sha256 {digest[:12]}…. The answer is not stored either, only its sha256; the snapshot, the "
            "numbered chunks (ids, ranks, scores, text hashes), the prompt hash and the generator are, and every "
            "layer (the answer by its sha256) replays once the question is given again (--question TEXT); its "
            "sha256 must match."
        )
    if text_sha256(given) != digest:
        raise QueryError(
            f"the question given for answer {answer_id} is not the one logged: its sha256 is "
            f"{text_sha256(given)[:12]}…, the log's {digest[:12]}…. Give the exact question (same spaces and case)."
        )
    return given


def replay_answer(
    db: Database,
    collection_of: Callable[[str], CollectionInfo],
    search: SearchFn,
    answer_id: str,
    embedder_of: Callable[[CollectionInfo], Embedder] | None = None,
    *,
    question: str | None = None,
) -> AnswerReplay:
    """Re-run logged answer ``answer_id`` on its snapshot; compare retrieval, prompt, generator and answer.

    ``question``: the question of a row logged with hashes only, checked against its sha256.
    """
    if not isinstance(answer_id, str) or not _ANSWER_ID.fullmatch(answer_id):
        raise QueryError(
            f"answer id {answer_id!r} is not 16 lowercase hex digits; copy answer_id from `ranklock ask --json`."
        )
    row = db.fetchone(
        "SELECT * FROM ranklock.answer_log WHERE answer_id = %s AND status = 'answered' ORDER BY id DESC LIMIT 1",
        [answer_id],
    )
    if row is None:
        purged = db.fetchone(
            "SELECT id, at FROM ranklock.purges WHERE %s = ANY (answer_keys) ORDER BY id LIMIT 1", [answer_id]
        )
        if purged is not None:
            raise NotFound(
                f"answer {answer_id} quoted a document that purge {purged['id']} erased at "
                f"{purged['at'].isoformat(timespec='seconds')}; its log entry was removed with the document, so it "
                "cannot be replayed (`ranklock purge` erases a document from every snapshot and log)."
            )
        raise NotFound(
            f"no logged answer with id {answer_id}; answers are logged unless log_queries is off "
            "(RANKLOCK_LOG_QUERIES=0), and rejected answers have no id."
        )
    sid = int(row["snapshot_id"])
    if db.fetchone("SELECT 1 FROM ranklock.snapshots WHERE id = %s", [sid]) is None:
        raise NotFound(
            f"answer {answer_id} was given from snapshot {sid} of {row['collection']!r}, which has been dropped; "
            "a replay needs the snapshot it ran against."
        )
    req: dict[str, Any] = row["request"]
    asked = _logged_question(answer_id, req, question)
    coll = collection_of(row["collection"])
    gen = logged_generator(row["generator"])
    res = retrieve(
        search,
        coll.name,
        asked,
        filter=req.get("filter"),
        as_of=req.get("as_of"),
        snapshot=sid,
        chunks=int(req["chunks"]),
        mode=str(req.get("mode", REQUEST.mode)),
        rerank=req.get("rerank"),
    )
    numbered = passages(db, coll, res)
    prompt = render_prompt(asked, numbered)
    info = gen.info()
    replayed: str | dict[str, str]
    embed = embed_fn(db, coll, None if embedder_of is None else (lambda: embedder_of(coll)))
    try:
        draft = gen.generate(GenerationRequest(asked, numbered, prompt, coll.language, embed, coll.name))
        replayed = cited_answer(
            draft,
            question=asked,
            collection=coll.name,
            chunks=numbered,
            generator=info,
            prompt=prompt,
            snapshot_id=res.snapshot.id,
            manifest_hash=res.snapshot.manifest_hash,
            rerank=res.params.get("rerank"),
        ).to_json()
    except GenerationError as exc:
        replayed = {"error": str(exc)}
    layers = {
        "retrieval": _layer(row["chunks"], chunk_records(numbered)),
        "rerank": _layer(row.get("rerank"), res.params.get("rerank")),
        "prompt": _layer(row["prompt_sha256"], prompt.sha256),
        "generator": _layer(row["generator"], info.to_dict()),
        "answer": _layer(row["answer"], replayed)
        if row["answer"] is not None
        else _layer(row["answer_sha256"], text_sha256(replayed) if isinstance(replayed, str) else replayed),
    }
    return AnswerReplay(
        answer_id=answer_id,
        log_id=int(row["id"]),
        collection=coll.name,
        snapshot_id=sid,
        query_id=res.query_id,
        layers=layers,
    )
