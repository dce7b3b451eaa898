"""Settings a statement needs are SET LOCAL: a pooled connection goes back with the server's defaults."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from fakes import HashEmbedder
from ranklock import Document, Engine
from ranklock.store.database import Database

SETTINGS = ("maintenance_work_mem", "max_parallel_maintenance_workers", "lock_timeout", "statement_timeout", "work_mem")


@pytest.fixture
def small_pool_engine(engine: Engine) -> Iterator[Engine]:
    """An engine whose pool holds at most four connections, so a test can look at every one of them."""
    eng = Engine(dsn=engine.db.dsn, embedder=HashEmbedder(), log_queries=False)
    eng.db.close()
    eng.db = Database(engine.db.dsn, min_size=4, max_size=4)
    try:
        yield eng
    finally:
        eng.close()


def _every_connection(db: Database) -> list[dict[str, str]]:
    with ExitStack() as stack:
        conns = [stack.enter_context(db.connection()) for _ in range(db.max_size)]
        return [
            {name: str(conn.execute("SELECT current_setting(%s)", [name]).fetchone()[0]) for name in SETTINGS}  # type: ignore[index]
            for conn in conns
        ]


def test_ingest_and_lexical_stats_leave_no_setting_on_pooled_connections(small_pool_engine: Engine, cname: str) -> None:
    eng = small_pool_engine
    before = _every_connection(eng.db)
    # An hnsw build (maintenance_work_mem, parallel workers), the writer lock (lock_timeout,
    # statement_timeout) and the BM25 statistics (work_mem) all run on these four connections.
    docs = [Document(f"s-{i}", "", f"Pooled connection note {i} about tides.") for i in range(5)]
    eng.ingest(cname, docs, create={"embedder": "test:hash-8", "index": "hnsw"})
    eng.lexical_stats(cname, force=True)
    after = _every_connection(eng.db)
    assert after == before
    assert all(c["maintenance_work_mem"] != "3GB" for c in after)
