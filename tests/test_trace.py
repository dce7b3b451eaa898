"""One traced cursor: every statement, whichever module sends it, reaches the tracer and RANKLOCK_TRACE."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fakes import HashEmbedder
from ranklock import Document, Engine
from ranklock.store.trace import stderr_timer


def _docs(n: int) -> list[Document]:
    return [Document(f"t-{i:02d}", "", f"Tracing note {i} about tides and orbits.") for i in range(n)]


def test_every_kind_of_statement_reaches_the_tracer_once(engine: Engine, cname: str) -> None:
    seen: list[tuple[str, Any]] = []

    def tracer(query: str, params: Any) -> None:
        seen.append((query, params))

    with Engine(dsn=engine.db.dsn, embedder=HashEmbedder(), tracer=tracer, log_queries=False) as eng:
        report = eng.ingest(cname, _docs(3), create={"embedder": "test:hash-8"})
        eng.search(cname, "tides", k=3, mode="lexical")
    texts = [q for q, _ in seen]
    # conn.execute in the writer lock (ranklock.snapshot.writer), cursor.copy of the versions
    # (ranklock.store.documents), the activation's row lock (ranklock.snapshot.lifecycle):
    # none of them goes through Database.fetchall, and each is seen.
    assert any(q.startswith("SELECT pg_advisory_lock(") for q in texts)
    assert any(q.startswith("COPY doc_stage ") for q in texts)
    assert sum("FOR UPDATE OF c" in q and "s.id = %s" in q for q in texts) == 1
    # The finishing UPDATE is heard exactly once (no second, manual trace), with its parameters.
    finishing = [(q, p) for q, p in seen if "SET status = 'ready'" in q]
    assert len(finishing) == 1
    assert finishing[0][1][-1] == report.snapshot_id
    # Composed statements arrive as the text the server runs, identifiers quoted.
    assert any(re.search(r'"ranklock_data"\."chunks_\d+"', q) for q in texts)


def test_ranklock_trace_prints_each_statement_with_its_time(
    engine: Engine, cname: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    with Engine(dsn=engine.db.dsn, embedder=HashEmbedder(), log_queries=False) as quiet:
        quiet.ingest(cname, _docs(2), create={"embedder": "test:hash-8"})
        quiet.collections()
    assert capfd.readouterr().err == ""
    monkeypatch.setenv("RANKLOCK_TRACE", "1")
    with Engine(dsn=engine.db.dsn, embedder=HashEmbedder(), log_queries=False) as eng:
        assert eng.settings.trace is True
        capfd.readouterr()
        eng.collection(cname)
        err = capfd.readouterr().err
    block = (
        r"-- \d+\.\d\d ms, 1 row, params: \['" + cname + r"'\]\n"
        r"SELECT \* FROM ranklock\.collections WHERE name = %s;\n"
    )
    assert re.search(block, err), err
    # Every statement printed is one block: a timing line, then the statement and ';'.
    assert re.fullmatch(r"(-- \d+\.\d\d ms[^\n]*\n[^\n]+;\n)+", err), err


def test_stderr_timer_shortens_long_parameters_and_skips_the_pool_ping(capsys: pytest.CaptureFixture[str]) -> None:
    stderr_timer("  SELECT %s, %s  ", ["x" * 200, 7], 1.5, -1)
    stderr_timer("", None, 0.05, -1)  # the pool's empty liveness check on every checkout
    assert capsys.readouterr().err == f"-- 1.50 ms, params: ['{'x' * 78}…, 7]\nSELECT %s, %s;\n"
