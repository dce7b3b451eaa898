"""A LlamaIndex retriever over a ranklock collection (``pip install 'ranklock[llamaindex]'``).

>>> from ranklock.integrations.llamaindex import RanklockRetriever
>>> retriever = RanklockRetriever(Engine(), "scifact", k=5)          # doctest: +SKIP
>>> nodes = retriever.retrieve("vitamin D and bone density")         # doctest: +SKIP
>>> nodes[0].score, nodes[0].node.metadata["manifest_hash"]          # doctest: +SKIP
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .._extras import require
from ..engine import Engine
from ..settings import REQUEST
from .common import engine_from, hit_metadata, run_search

require("llamaindex", "llama_index.core", "ranklock.integrations.llamaindex (the LlamaIndex retriever)")

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

__all__ = ["RanklockRetriever"]


class RanklockRetriever(BaseRetriever):
    """Search a ranklock collection; each ``NodeWithScore`` has the fused score and the hit's ranks and snapshot.

    ``engine`` is an :class:`~ranklock.Engine` or a PostgreSQL DSN.  The node
    score is ranklock's fused RRF score; the node metadata holds both branch
    ranks and scores, ``snapshot_id`` and ``manifest_hash``.  Nodes come back in
    ranklock's order, ties broken by document id then chunk.
    """

    def __init__(
        self,
        engine: Engine | str,
        collection: str,
        *,
        k: int = REQUEST.k,
        mode: str = REQUEST.mode,
        filter: Any = None,
        as_of: datetime | str | None = None,
        snapshot: int | None = None,
        params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.engine = engine_from(engine)
        self.collection = collection
        self.k = k
        self.mode = mode
        self.filter = filter
        self.as_of = as_of
        self.snapshot = snapshot
        self.params = dict(params or {})
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = run_search(
            self.engine,
            self.collection,
            query_bundle.query_str,
            k=self.k,
            mode=self.mode,
            filter=self.filter,
            as_of=self.as_of,
            snapshot=self.snapshot,
            params=self.params,
        )
        # Metadata is for the caller, not for an LLM prompt or an embedding: keep it out of both.
        return [
            NodeWithScore(
                node=TextNode(
                    id_=f"{h.doc_id}#{h.chunk}",
                    text=h.text,
                    metadata=(meta := hit_metadata(result, h)),
                    excluded_embed_metadata_keys=list(meta),
                    excluded_llm_metadata_keys=list(meta),
                    start_char_idx=h.char_start,
                    end_char_idx=h.char_end,
                ),
                score=h.score,
            )
            for h in result.hits
        ]
