"""The snapshot manifest: everything that shapes retrieval, and its own hash.

The manifest is a versioned JSON document (``schema`` names its version).
Its hash is the sha256 of its canonical JSON without the ``manifest_hash``
field, so two snapshots with equal manifests retrieve identically, and a
diff of two manifests names exactly what changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..collection import CollectionInfo
from ..embed.base import Embedder
from ..errors import ConfigError
from ..ingest.chunker import BOUNDARY_RULES, effective_window, last_window
from ..ingest.normalize import NORMALIZATION, canonical_json
from ..segmenting import Segmenting
from ..settings import SearchParams
from .composition import Totals, set_digest
from .rules import CURRENT_RULES
from .shards import placement

__all__ = [
    "MANIFEST_SCHEMA",
    "TOKENIZER_VERSION",
    "UNCHANGED_SNAPSHOT",
    "build_manifest",
    "corpus_digest",
    "diff_manifests",
    "manifest_hash",
    "manifest_json",
    "write_manifest",
]

#: 2 (segments): the corpus and vectors digests are order-free sums, and the segmentation is recorded.
MANIFEST_SCHEMA = "ranklock.manifest/2"
#: Version of the SQL text analysis (ranklock.doc_tsvector / query_tsquery).
TOKENIZER_VERSION = "pg-ts/2"  # 2: exact identifier lexemes (migration 0003)
#: A query that finds a row while snapshot ``%s`` still has the manifest hash ``%s`` that a reader saw:
#: the condition of every log or cache write made from what it read, since a purge that committed
#: meanwhile changed the hash (ranklock.snapshot.purge) and such a write could quote what it erased.
UNCHANGED_SNAPSHOT = "SELECT 1 FROM ranklock.snapshots AS s WHERE s.id = %s AND s.manifest_hash IS NOT DISTINCT FROM %s"


def corpus_digest(doc_hashes: Iterable[tuple[str, str]]) -> str:
    """The digest of a set of documents: the sum modulo 2**256 of sha256(doc_id NUL content_hash).

    Order-free, so the same live documents have the same digest however a
    snapshot's segments hold them (ranklock.snapshot.composition).
    """
    return set_digest(doc_hashes)


def manifest_hash(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_hash"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def build_manifest(
    coll: CollectionInfo,
    embedder: Embedder,
    *,
    totals: Totals,
    index_build: dict[str, Any] | None = None,
) -> dict[str, Any]:
    search = SearchParams(**coll.search_defaults).model_dump()
    window, overlap = effective_window(coll.chunker.window, coll.chunker.overlap, embedder.tokenizer)
    manifest: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "collection": coll.name,
        "corpus": {"digest": totals.corpus_digest, "documents": totals.documents, "chunks": totals.chunks},
        "normalization": NORMALIZATION,
        "text_search": {
            "language": coll.language,
            "accent": coll.accent,
            "analyzer": TOKENIZER_VERSION,
            "lexical_stats": {"chunks": totals.chunks, "total_len": totals.total_len},
        },
        # The cut rules are the code's, not the collection's: a new rule set shows up as a manifest difference.
        # The windows actually cut are also recorded: the model's own limit can lower the configured one.
        "chunker": {
            "tokenizer": embedder.tokenizer.id,
            **coll.chunker.model_dump(),
            "boundaries": BOUNDARY_RULES,
            # last_window: a document's last chunk stops where the model stops reading (see the chunker).
            "effective": {
                "window": window,
                "overlap": overlap,
                "last_window": last_window(window, embedder.tokenizer),
            },
        },
        "embedder": {
            "id": coll.embedder_id,
            "weights_sha256": coll.embedder_sha256,
            "dimension": coll.dim,
            "normalization": "l2, float32, at write time",
            "vectors_digest": totals.vectors_digest,
        },
        # ``build``: when and how the vector index was built.  An HNSW graph is
        # drawn at random, so a rebuild of the same corpus is a different index:
        # the build record makes that a visible manifest difference.
        "index": {"type": coll.index_kind, "params": coll.index_params, "build": index_build or {}},
        # How the live documents are cut (ranklock.snapshot.segments): scores never depend on it, an
        # HNSW graph per segment does (approximate answers are flagged so).
        "segmentation": {"segments": list(totals.segments), "dead_rows": totals.dead_rows},
        "search": search,
        # How scores are computed (ranklock.snapshot.rules): a search runs its snapshot's rules.
        "ranking": CURRENT_RULES.as_manifest(),
        "time_policy": "as_of is an explicit query parameter; documents carry effective_from/effective_to; "
        "ranking never calls now()",
    }
    # Only collections whose fields were inferred carry the key: every other manifest (and its hash) is unchanged.
    if coll.field_inference is not None:
        manifest["field_inference"] = coll.field_inference
    # Likewise only sharded collections (ranklock.snapshot.shards) carry their placement.
    if coll.shards:
        manifest["placement"] = placement(
            coll.shards, by_key=Segmenting.of(coll.segmenting).partition_field is not None
        )
    manifest["manifest_hash"] = manifest_hash(manifest)
    return manifest


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def diff_manifests(a: dict[str, Any], b: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Fields (dotted paths) whose values differ, with both values."""
    fa, fb = _flatten(a), _flatten(b)
    return {
        k: {"old": fa.get(k), "new": fb.get(k)}
        for k in sorted(set(fa) | set(fb))
        if fa.get(k) != fb.get(k) and k != "manifest_hash"
    }


def manifest_json(m: dict[str, Any]) -> str:
    """The manifest as stable text for version control: sorted keys, two-space indent, final newline."""
    return json.dumps(m, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_manifest(m: dict[str, Any], path: str | Path) -> Path:
    """Write :func:`manifest_json` of ``m`` to ``path``; ConfigError when the file cannot be written."""
    p = Path(path)
    try:
        p.write_text(manifest_json(m), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the manifest to {p}: {exc.strerror}; check the path and permissions.") from exc
    return p
