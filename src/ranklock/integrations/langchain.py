"""A LangChain retriever over a ranklock collection (``pip install 'ranklock[langchain]'``).

>>> from ranklock.integrations.langchain import RanklockRetriever
>>> retriever = RanklockRetriever(engine=Engine(), collection="scifact", k=5)   # doctest: +SKIP
>>> docs = retriever.invoke("vitamin D and bone density")                       # doctest: +SKIP
>>> docs[0].metadata["rank"], docs[0].metadata["snapshot_id"]                    # doctest: +SKIP
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from .._extras import require
from ..engine import Engine
from ..settings import REQUEST
from .common import engine_from, hit_metadata, run_search

require("langchain", "langchain_core", "ranklock.integrations.langchain (the LangChain retriever)")

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402

__all__ = ["RanklockRetriever"]


class RanklockRetriever(BaseRetriever):
    """Search a ranklock collection; each LangChain ``Document`` carries the hit's ranks, scores and snapshot.

    ``engine`` is an :class:`~ranklock.Engine` or a PostgreSQL DSN.  Pin ``snapshot``
    (and ``as_of``) for results that never change; ``params`` passes search
    parameters such as ``depth`` or ``ranker``.  Documents come back in ranklock's
    order, ties broken by document id then chunk.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Engine
    collection: str
    k: int = REQUEST.k
    mode: str = REQUEST.mode
    filter: Any = None
    as_of: datetime | str | None = None
    snapshot: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, value: Engine | str) -> Engine:
        return engine_from(value)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,  # noqa: ARG002 (BaseRetriever passes it by name)
    ) -> list[Document]:
        result = run_search(
            self.engine,
            self.collection,
            query,
            k=self.k,
            mode=self.mode,
            filter=self.filter,
            as_of=self.as_of,
            snapshot=self.snapshot,
            params=self.params,
        )
        return [
            Document(page_content=h.text, metadata=hit_metadata(result, h), id=f"{h.doc_id}#{h.chunk}")
            for h in result.hits
        ]
