"""LangChain and LlamaIndex retrievers, with the real framework packages, over a real collection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes import use_hash_embedder
from ranklock import Document, Engine
from ranklock.integrations.common import hit_metadata

DOCS = [
    Document("a", "Kilns", "An electric kiln fires stoneware glaze to cone 6."),
    Document("b", "Glazes", "Celadon glaze needs iron oxide and a reduction kiln firing."),
    Document("c", "Wheels", "Throwing on the wheel: center the clay before opening it."),
    Document("d", "Bread", "Sourdough bread rises overnight in a cool kitchen."),
]


@pytest.fixture
def coll(engine: Engine, cname: str) -> Iterator[str]:
    engine.create_collection(cname, embedder=use_hash_embedder(engine), index="exact")
    engine.ingest(cname, DOCS)
    yield cname


def test_langchain_documents_carry_ranks_scores_and_snapshot(engine: Engine, coll: str) -> None:
    from langchain_core.retrievers import BaseRetriever

    from ranklock.integrations.langchain import RanklockRetriever

    retriever = RanklockRetriever(engine=engine, collection=coll, k=3)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("kiln glaze firing")
    expected = engine.search(coll, "kiln glaze firing", k=3)
    assert [d.page_content for d in docs] == [h.text for h in expected.hits]
    assert [d.metadata for d in docs] == [hit_metadata(expected, h) for h in expected.hits]
    assert [d.id for d in docs] == [f"{h.doc_id}#{h.chunk}" for h in expected.hits]
    assert docs[0].metadata["snapshot_id"] == expected.snapshot.id
    assert docs[0].metadata["manifest_hash"] == expected.snapshot.manifest_hash


def test_langchain_pinned_snapshot_survives_a_new_ingest(engine: Engine, coll: str) -> None:
    from ranklock.integrations.langchain import RanklockRetriever

    snap = engine.collection(coll).active_snapshot_id
    pinned = RanklockRetriever(engine=engine, collection=coll, k=4, mode="lexical", snapshot=snap)
    before = pinned.invoke("kiln")
    engine.ingest(coll, [Document("e", "Kiln shelves", "Kiln shelves crack when a kiln cools too fast.")])
    assert pinned.invoke("kiln") == before
    latest = RanklockRetriever(engine=engine, collection=coll, k=4, mode="lexical").invoke("kiln")
    assert latest[0].metadata["doc_id"] == "e" and latest[0].metadata["snapshot_id"] != snap


def test_langchain_filter_and_dsn(engine: Engine, coll: str) -> None:
    from ranklock.integrations.langchain import RanklockRetriever

    # A DSN string builds its own Engine; lexical mode needs no embedder in that engine.
    retriever = RanklockRetriever(engine=engine.db.dsn, collection=coll, k=4, mode="lexical", filter=None)
    try:
        assert [d.metadata["doc_id"] for d in retriever.invoke("glaze")] == [
            h.doc_id for h in engine.search(coll, "glaze", k=4, mode="lexical").hits
        ]
    finally:
        retriever.engine.close()


def test_llamaindex_nodes_carry_fused_score_and_metadata(engine: Engine, coll: str) -> None:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import MetadataMode

    from ranklock.integrations.llamaindex import RanklockRetriever

    retriever = RanklockRetriever(engine, coll, k=3)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("kiln glaze firing")
    expected = engine.search(coll, "kiln glaze firing", k=3)
    assert [n.score for n in nodes] == [h.score for h in expected.hits]
    assert [n.node.metadata for n in nodes] == [hit_metadata(expected, h) for h in expected.hits]
    assert [n.node.node_id for n in nodes] == [f"{h.doc_id}#{h.chunk}" for h in expected.hits]
    # The hit text reaches the LLM alone: the ranks and hashes stay out of the prompt.
    assert nodes[0].node.get_content(metadata_mode=MetadataMode.LLM) == expected.hits[0].text


def test_llamaindex_snapshot_and_as_of_are_passed_through(engine: Engine, coll: str) -> None:
    from ranklock.integrations.llamaindex import RanklockRetriever

    snap = engine.collection(coll).active_snapshot_id
    engine.ingest(coll, [Document("e", "Kiln shelves", "Kiln shelves crack when a kiln cools too fast.")])
    old = RanklockRetriever(engine, coll, k=5, mode="lexical", snapshot=snap).retrieve("kiln")
    assert "e" not in [n.node.metadata["doc_id"] for n in old]
    assert {n.node.metadata["snapshot_id"] for n in old} == {snap}
