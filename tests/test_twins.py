"""Code written twice on purpose, checked so that the twins cannot drift apart (scripts/check_twins.py).

Most AsyncEngine methods are derived from Engine's (``ranklock.async_engine.in_thread``);
the hand-written rest, and every signature that spells out a search's keywords, are
checked by ``scripts/check_twins.py``, which ``make lint`` runs.  These tests run the
check on this checkout, and build drifts on purpose to see it name each one.
"""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ranklock import AsyncEngine, Engine
from ranklock.async_engine import in_thread
from ranklock.search.request import SearchRequest
from ranklock.settings import REQUEST

if TYPE_CHECKING:
    from ranklock.snapshot.document import StoredDocument

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_twins.py"


def _check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_twins", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _check()


def test_this_checkout_has_no_drift() -> None:
    assert check.drift() == []


def test_make_lint_runs_the_check_and_it_passes() -> None:
    lint = (ROOT / "Makefile").read_text(encoding="utf-8").split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(PY) scripts/check_twins.py" in lint
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert (out.returncode, out.stderr) == (0, "")


def test_engine_search_is_the_reference() -> None:
    names = [p.name for p in check.parameters(Engine.search)]
    # rerank (a stage after the search, ranklock.search.rerank) and offset (a page of a deeper search,
    # SearchResult.page) sit around the request's own keywords, which SearchRequest declares.
    assert names == ["name", "query", "k", "mode", "filter", "snapshot", "as_of", "rerank", "offset", "params"]
    assert [k.name for k in check.declared_keywords()] == ["k", "mode", "filter", "snapshot", "as_of"]


def test_every_public_engine_method_has_an_async_twin_or_a_reason() -> None:
    sync = {n for n in vars(Engine) if not n.startswith("_")}
    twins = {n for n in vars(AsyncEngine) if not n.startswith("_")}
    assert sync - twins == set(check.SYNC_ONLY) == {"rdb"}
    for name in sync & twins:
        if isinstance(vars(Engine)[name], property):  # a value (settings): its twin is a property too
            assert isinstance(vars(AsyncEngine)[name], property), name
            continue
        assert inspect.iscoroutinefunction(getattr(AsyncEngine, name)), name
    # The keywords the issue found missing (issue 37).
    assert "rerank" in inspect.signature(AsyncEngine.search).parameters
    assert {"mode", "rerank"} <= set(inspect.signature(AsyncEngine.ask).parameters)
    assert {"embed_service", "reranker"} <= set(inspect.signature(AsyncEngine.__init__).parameters)
    for name in ("ingest", "create_collection"):
        kinds = {p.kind for p in inspect.signature(getattr(AsyncEngine, name)).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, name


# -- drifts built on purpose ------------------------------------------------------------------------


def _drifted_engine(**members: Any) -> type:
    """A copy of Engine with ``members`` replaced or added (the real AsyncEngine is left as it is)."""
    return type("Engine", (), {**vars(Engine), **members})


def test_a_keyword_added_to_engine_search_alone_fails_the_check() -> None:
    def search(*args: Any, **kwargs: Any) -> Any:
        """Engine.search with a keyword AsyncEngine.search has not (its signature below)."""
        raise NotImplementedError(args, kwargs)

    signature = inspect.signature(Engine.search)
    *keywords, params = signature.parameters.values()
    boost = inspect.Parameter("boost", inspect.Parameter.KEYWORD_ONLY, default=1.0, annotation="float")
    vars(search)["__signature__"] = signature.replace(parameters=[*keywords, boost, params])  # inspect reads it
    assert check.engine_drift(_drifted_engine(search=search), AsyncEngine) == [
        "AsyncEngine.search does not take what Engine.search takes: AsyncEngine.search lacks boost."
    ]


def test_a_default_changed_on_one_side_fails_the_check() -> None:
    async def document(
        self: Any, name: str, doc_id: str, *, snapshot: int | None = 0, show_purge: bool = False
    ) -> StoredDocument: ...

    drifted = type("AsyncEngine", (), {**vars(AsyncEngine), "document": document})
    assert check.engine_drift(Engine, drifted) == [
        "AsyncEngine.document does not take what Engine.document takes: snapshot differ in kind, default or annotation."
    ]


def test_a_method_without_a_twin_or_a_twin_of_the_wrong_method_fails_the_check() -> None:
    def reindex(self: Any, name: str) -> None:
        """Rebuild every index of ``name``."""

    assert check.engine_drift(_drifted_engine(reindex=reindex), AsyncEngine) == [
        "AsyncEngine has no reindex: add its twin (`reindex = in_thread(Engine.reindex)`) "
        "or list it in SYNC_ONLY with the reason."
    ]
    crossed = type("AsyncEngine", (), {**vars(AsyncEngine), "delete": in_thread(Engine.purge)})
    assert check.engine_drift(Engine, crossed) == [
        "AsyncEngine.delete is derived from Engine.purge, not from Engine.delete."
    ]
    blocking = type("AsyncEngine", (), {**vars(AsyncEngine), "rollback": lambda *_: None})
    assert check.engine_drift(Engine, blocking) == [
        "AsyncEngine.rollback is not a coroutine function: the twin of Engine.rollback is awaited."
    ]


def test_a_sync_only_member_must_say_why_in_its_docstring_and_the_api_page() -> None:
    def rdb(self: Any) -> Any:
        """Where this thread's reads go."""

    drift = check.engine_drift(_drifted_engine(rdb=property(rdb)), AsyncEngine, api_doc="no word of it")
    assert drift == [
        "Engine.rdb is sync-only; its docstring must say so and why ('Sync-only: ...').",
        "Engine.rdb is sync-only; integrations.md must name it (`rdb`) with the reason.",
    ]


def test_a_derived_twin_takes_a_keyword_added_to_its_engine_method() -> None:
    """The twins made by in_thread cannot drift: a keyword added to the Engine method is in the twin."""

    class Sync:
        def rename(self, name: str, *, to: str, force: bool = False) -> str:
            """Rename ``name``."""
            return f"{name} -> {to}" + (" (forced)" if force else "")

    class Async:
        rename = in_thread(Sync.rename)

    assert check.engine_drift(Sync, Async, sync_only={}, async_only=(), api_doc="") == []
    assert list(inspect.signature(Async.rename).parameters) == ["self", "name", "to", "force"]
    assert Async.rename.__doc__ == ":meth:`Engine.rename` in a worker thread.\n\nRename ``name``."


def test_a_search_signature_that_leaves_a_keyword_out_fails_the_check() -> None:
    def search(self: Any, name: str, query: str, *, k: int = REQUEST.k, mode: str = REQUEST.mode, **params: Any) -> Any:
        """A searcher without filter, snapshot and as_of."""

    assert check.searcher_drift("Drifted.search", search) == [
        "Drifted.search takes (k: int = 10, mode: str = 'hybrid', **params: Any) where SearchRequest declares "
        "(k: int = 10, mode: str = 'hybrid', filter: Any = None, snapshot: int | None = None, "
        "as_of: datetime | str | None = None): spell out the same keywords, in the same order.",
        "Drifted.search must end with **params: Unpack[SearchOptions], not ().",
    ]


def test_a_request_default_repeated_as_a_literal_that_drifted_fails_the_check() -> None:
    def retriever(collection: str, *, k: int = 5, mode: str = REQUEST.mode, as_of: datetime | None = None) -> None:
        """Defaults k to 5 where REQUEST says 10."""

    assert check.sharer_drift("drifted.retriever", retriever) == [
        "drifted.retriever: k defaults to 5, declared 10 (ranklock.settings.REQUEST).",
        "drifted.retriever: as_of is annotated 'datetime | None', declared 'datetime | str | None' (SearchRequest).",
    ]
    # A wire schema's types are text; its defaults still are the declared ones.
    assert check.sharer_drift("drifted.retriever", retriever, wire=True) == [
        "drifted.retriever: k defaults to 5, declared 10 (ranklock.settings.REQUEST)."
    ]


def test_search_request_of_takes_its_own_fields_and_the_rest_as_params() -> None:
    req = SearchRequest.of("docs", "pump seals", k=5, as_of="2026-01-01T00:00:00Z", ef_search=200)
    assert (req.k, req.mode, req.filter, req.snapshot, req.as_of) == (5, REQUEST.mode, None, None, req.as_of)
    assert req.params == {"ef_search": 200}
    assert SearchRequest.of("docs", "q") == SearchRequest("docs", "q")


def test_a_property_without_a_property_twin_fails_the_check() -> None:
    """Engine.settings is a value, not an operation: its twin is a property (settable as it is), never awaited."""

    async def settings(_self: Any) -> Any:  # an awaitable where a value belongs
        return None

    drifted = type("AsyncEngine", (), {**vars(AsyncEngine), "settings": settings})
    assert check.engine_drift(Engine, drifted) == [
        "AsyncEngine.settings must be a property like Engine.settings, settable if it is."
    ]
