"""Check the code that is written twice: AsyncEngine against Engine, and every signature of a request's keywords.

python scripts/check_twins.py    # exit 1, one line per drift (`make lint` runs it; so does tests/test_twins.py)

psycopg writes its async code once and generates the sync twin, with a CI check that the
output is current (tools/async_to_sync.py).  ranklock goes the other way round and derives
at run time what it can: most AsyncEngine methods *are* their Engine method run in a worker
thread (``ranklock.async_engine.in_thread``: the same signature, docstring and types).  This
script checks what stays written by hand:

* **the engines**: every public Engine member has an AsyncEngine twin of the same name that
  takes the same parameters (names, kinds, defaults, annotations) and returns the same type
  (a property's twin is a property, settable when it is),
  a derived twin derives from that very method, or the member is in :data:`SYNC_ONLY` with
  its reason, said in its docstring and in the API page (docs/integrations.md); an AsyncEngine
  member without an Engine twin is in :data:`ASYNC_ONLY`;
* **the request**: a search's keywords are declared once, by the fields of
  :class:`ranklock.search.request.SearchRequest` (defaults from ``ranklock.settings.REQUEST``).
  Every signature in :data:`SEARCHERS` takes exactly those, in that order, then
  ``**params: Unpack[SearchOptions]`` (stages around the search, such as ``rerank``, aside); every
  signature or schema in :data:`SHARERS` that takes some of them (or Ask's ``chunks``) gives each
  the declared default, and, unless it is a wire schema (text arrives, types differ), the declared
  annotation.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: The page that lists the Python API's async twins and the sync-only members.
API_DOC = ROOT / "docs" / "integrations.md"

#: Engine members with no async twin, each with the reason (its docstring says "Sync-only").
SYNC_ONLY = {
    "rdb": "a sync Database handle (this thread's replica route); AsyncEngine reads on its own pool, `adb`",
}

#: AsyncEngine members of its own: opening and closing its pool, and the reads only the HTTP server needs.
ASYNC_ONLY = frozenset({"over", "open", "release", "engine", "adb", "ping", "verify_token"})


class Searcher(NamedTuple):
    """A signature that takes a search's keywords: ``module:qualname``, and the keywords it takes around them."""

    where: str
    around: frozenset[str] = frozenset()


#: Every signature that takes the whole request (after the collection and the query).
SEARCHERS = (
    Searcher("ranklock.engine:Engine.search", frozenset({"rerank", "offset"})),
    Searcher("ranklock.engine:Engine.search_sql"),
    Searcher("ranklock.async_engine:AsyncEngine.search", frozenset({"rerank", "offset"})),
    Searcher("ranklock.async_engine:AsyncEngine.search_sql"),
    Searcher("ranklock.search.protocol:Searcher.__call__"),
)


class Sharer(NamedTuple):
    """A signature or a pydantic schema that takes some of a request's keywords; ``wire``: types come as text."""

    where: str
    wire: bool = False


#: Every other place a request's keywords appear, with their defaults.
SHARERS = (
    Sharer("ranklock.engine:Engine.ask"),
    Sharer("ranklock.engine:Engine.search_request"),
    Sharer("ranklock.ask.run:ask"),
    Sharer("ranklock.ask.retrieve:retrieve"),
    Sharer("ranklock.eval.target:AskTarget.ask"),
    Sharer("ranklock.eval.answers:evaluate_answers"),
    Sharer("ranklock.eval.stability:measure_stability"),
    Sharer("ranklock.eval.stability:compare_configurations"),
    Sharer("ranklock.eval.canary:run_canary"),
    Sharer("ranklock.plan.run:search_request"),
    Sharer("ranklock.integrations.llamaindex:RanklockRetriever.__init__"),
    Sharer("ranklock.integrations.langchain:RanklockRetriever"),
    Sharer("ranklock.api:SearchArguments", wire=True),
    Sharer("ranklock.api:SearchQuery", wire=True),
    Sharer("ranklock.api:AskArguments", wire=True),
    Sharer("ranklock.cli.search:search", wire=True),
    Sharer("ranklock.cli.ask:ask", wire=True),
)


class Keyword(NamedTuple):
    name: str
    kind: Any
    default: Any
    annotation: Any


def resolve(where: str) -> Any:
    """The object ``module:qualname`` names."""
    module, _, qualname = where.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def parameters(fn: Callable[..., Any]) -> list[Keyword]:
    """``fn``'s parameters after ``self``, as ``inspect.signature`` sees them (through ``functools.wraps``)."""
    sig = inspect.signature(fn)
    return [Keyword(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values() if p.name != "self"]


def public(cls: type) -> dict[str, Any]:
    """A class's own public members (and its constructor), by name."""
    return {n: v for n, v in vars(cls).items() if not n.startswith("_") or n == "__init__"}


# -- the engines ----------------------------------------------------------------------------


def engine_drift(
    sync: type,
    async_: type,
    *,
    sync_only: Mapping[str, str] = SYNC_ONLY,
    async_only: Iterable[str] = ASYNC_ONLY,
    api_doc: str | None = None,
) -> list[str]:
    """Every way ``async_`` is not ``sync``'s twin, one sentence each (empty: they agree)."""
    out: list[str] = []
    doc = API_DOC.read_text(encoding="utf-8") if api_doc is None else api_doc
    mine, theirs = public(sync), public(async_)
    for name, member in mine.items():
        where = f"{sync.__name__}.{name}"
        if name in sync_only:
            if name in theirs:
                out.append(f"{where} is listed sync-only, but {async_.__name__} has it: take it off SYNC_ONLY.")
            if "Sync-only" not in (inspect.getdoc(member) or ""):
                out.append(f"{where} is sync-only; its docstring must say so and why ('Sync-only: ...').")
            if f"`{name}`" not in doc:
                out.append(f"{where} is sync-only; {API_DOC.name} must name it (`{name}`) with the reason.")
            continue
        if name not in theirs:
            out.append(
                f"{async_.__name__} has no {name}: add its twin (`{name} = in_thread({where})`) "
                "or list it in SYNC_ONLY with the reason."
            )
            continue
        twin = theirs[name]
        if isinstance(member, property):
            # A value, not an operation: its twin is a property of the same name, read and set alike.
            if not isinstance(twin, property) or (member.fset is None) != (twin.fset is None):
                out.append(f"{async_.__name__}.{name} must be a property like {where}, settable if it is.")
            continue
        if name != "__init__" and not inspect.iscoroutinefunction(twin):
            out.append(f"{async_.__name__}.{name} is not a coroutine function: the twin of {where} is awaited.")
            continue
        wrapped = getattr(twin, "__wrapped__", None)
        if wrapped is not None and wrapped is not member and name != "__init__":
            out.append(f"{async_.__name__}.{name} is derived from {wrapped.__qualname__}, not from {where}.")
            continue
        out.extend(_signature_drift(member, twin, where, f"{async_.__name__}.{name}"))
    out.extend(
        f"{async_.__name__}.{name} has no twin on {sync.__name__}: add one, or list it in ASYNC_ONLY."
        for name in theirs
        if name not in mine and name not in set(async_only)
    )
    return out


def _signature_drift(a: Callable[..., Any], b: Callable[..., Any], left: str, right: str) -> list[str]:
    pa, pb = parameters(a), parameters(b)
    out: list[str] = []
    if pa != pb:
        names_a, names_b = [p.name for p in pa], [p.name for p in pb]
        missing = [n for n in names_a if n not in names_b]
        extra = [n for n in names_b if n not in names_a]
        differ = [p.name for p, q in zip(pa, pb, strict=False) if p.name == q.name and p != q]
        facts = []
        if missing:
            facts.append(f"{right} lacks {', '.join(missing)}")
        if extra:
            facts.append(f"{right} has {', '.join(extra)} that {left} has not")
        if differ:
            facts.append(f"{', '.join(differ)} differ in kind, default or annotation")
        if not facts:
            facts.append("the parameters are in another order")
        out.append(f"{right} does not take what {left} takes: {'; '.join(facts)}.")
    ra, rb = inspect.signature(a).return_annotation, inspect.signature(b).return_annotation
    if ra != rb and left.rpartition(".")[2] != "__init__":
        out.append(f"{right} returns {rb!r}, {left} returns {ra!r}.")
    return out


# -- the request ----------------------------------------------------------------------------


def declared_keywords() -> list[Keyword]:
    """A search's keywords as SearchRequest declares them: its fields between the query and ``params``."""
    from ranklock.search.request import SearchRequest

    fields = dataclasses.fields(SearchRequest)[2:-1]
    return [Keyword(f.name, inspect.Parameter.KEYWORD_ONLY, f.default, f.type) for f in fields]


def declared_defaults() -> dict[str, Keyword]:
    """The request keywords by name, and Ask's ``chunks`` (ranklock.settings.REQUEST declares its default)."""
    from ranklock.settings import REQUEST

    chunks = Keyword("chunks", inspect.Parameter.KEYWORD_ONLY, REQUEST.chunks, "int")
    return {k.name: k for k in [*declared_keywords(), chunks]}


def searcher_drift(where: str, fn: Callable[..., Any], around: Iterable[str] = ()) -> list[str]:
    """How ``fn``'s keywords after (collection, query) differ from the declared request; empty when they do not."""
    params = [p for p in parameters(fn)[2:] if p.name not in set(around)]
    expected = declared_keywords()
    got = params[: len(expected)]
    out = []
    if got != expected:
        out.append(
            f"{where} takes ({', '.join(_show(p) for p in got)}) where SearchRequest declares "
            f"({', '.join(_show(p) for p in expected)}): spell out the same keywords, in the same order."
        )
    rest = params[len(expected) :]
    if [(p.name, p.kind, p.annotation) for p in rest] != [
        ("params", inspect.Parameter.VAR_KEYWORD, "Unpack[SearchOptions]")
    ]:
        out.append(f"{where} must end with **params: Unpack[SearchOptions], not ({', '.join(map(_show, rest))}).")
    return out


def sharer_drift(where: str, obj: Any, *, wire: bool = False) -> list[str]:
    """How the request keywords ``obj`` (a function or a pydantic model) takes differ from their declaration."""
    declared = declared_defaults()
    if hasattr(obj, "model_fields"):
        got = {n: (f.default, None) for n, f in obj.model_fields.items() if n in declared}
    else:
        got = {p.name: (p.default, p.annotation) for p in parameters(obj) if p.name in declared}
    out = []
    for name, (default, annotation) in got.items():
        ref = declared[name]
        if default is not inspect.Parameter.empty and default != ref.default:  # a required one repeats no default
            out.append(
                f"{where}: {name} defaults to {default!r}, declared {ref.default!r} (ranklock.settings.REQUEST)."
            )
        if not wire and annotation is not None and annotation != ref.annotation:
            out.append(f"{where}: {name} is annotated {annotation!r}, declared {ref.annotation!r} (SearchRequest).")
    if not got:
        out.append(f"{where} takes none of the request keywords: take it off SHARERS.")
    return out


def _show(p: Keyword) -> str:
    star = "**" if p.kind is inspect.Parameter.VAR_KEYWORD else ""
    default = "" if p.default is inspect.Parameter.empty else f" = {p.default!r}"
    return f"{star}{p.name}: {p.annotation}{default}"


def drift() -> list[str]:
    """Every drift in this checkout."""
    from ranklock import AsyncEngine, Engine

    out = engine_drift(Engine, AsyncEngine)
    for s in SEARCHERS:
        out += searcher_drift(s.where, resolve(s.where), s.around)
    for h in SHARERS:
        out += sharer_drift(h.where, resolve(h.where), wire=h.wire)
    return out


def main() -> int:
    found = drift()
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
