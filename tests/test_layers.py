"""One-way layers: no import cycle, no upward import, in ``src/ranklock``.

The test reads every ``.py`` file under ``src/ranklock`` with :mod:`ast` (nothing is
imported, so it costs milliseconds and needs no database) and collects every import:
module level, inside functions, inside ``if TYPE_CHECKING:`` blocks, absolute
(``import ranklock.x``) and relative (``from . import x``, ``from ..y import z``), and
``importlib.import_module("ranklock.x")`` with a literal name.
Relative imports are resolved against the importing file; ``from pkg import name`` is an
edge to ``pkg.name`` when that is a module and to ``pkg`` (its ``__init__``) otherwise.

Two graphs are built from the same edges:

* the **file graph** (one node per ``.py`` file; a package's ``__init__.py`` is its own
  node, and importing ``pkg.sub`` does *not* add an edge to ``pkg/__init__.py``: that
  implicit edge is how Python executes packages, not a dependency anyone wrote);
* the **package graph** (one node per top-level name under ``ranklock``: ``search``,
  ``engine``, ``cli_eval``...; the root ``__init__.py`` is the node ``ranklock``).

It fails on

(a) any cycle in either graph (each strongly connected component is printed as one
    concrete cycle with ``file:line`` of every edge), and
(b) any import that points *up* or *sideways* in :data:`LAYERS`.

``TYPE_CHECKING`` imports **count**, in both checks. They do not create a runtime cycle,
but a type import is still a dependency: ``snapshot/ops.py`` importing ``Engine`` "only
for typing" is exactly how a feature ended up calling back into the facade. The fix is
never to hide the import: it is to depend on something lower (``Database``,
``CollectionInfo``) or on a ``Protocol`` declared in the lower layer. Function-level
imports count for the same reason: today they are how ``cli.py`` and ``engine.py`` hide
their cycles. Set :data:`COUNT_TYPE_CHECKING` to ``False`` to see the runtime-only view.

Edit :data:`LAYERS` when a package is added: a module that matches no entry fails
``test_every_module_has_a_layer`` with the line to add.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import itertools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


# --------------------------------------------------------------------------------------
# The layer table: edit here.
#
# Top to bottom. A module may import from its own top-level package (any file in it:
# cycles inside a package are caught by the file graph) and from any group *below* its
# own. Importing from a group above is an "upward" violation; importing from another
# package of the same group is "sideways" (siblings must stay independent: if one needs
# the other, give them different rows). Names are top-level names under ``ranklock``
# (a package, or a module without ``.py``); fnmatch patterns are allowed. ``__init__`` is
# the root ``ranklock/__init__.py``.
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layer:
    name: str
    members: tuple[str, ...]
    #: True: the members are independent siblings and may not import each other.
    #: False: the members are one unit (e.g. cli.py and today's cli_*.py) and may.
    independent: bool = False


LAYERS: list[Layer] = [
    # Interfaces: the cli/ package (one module per command group) and `python -m ranklock`.
    # `serve` needs create_app, so cli sits above http.
    Layer("interfaces: cli", ("cli", "__main__", "mcp*")),
    # Framework adapters (LangChain, LlamaIndex) wrap an Engine, like the CLI and HTTP shells.
    Layer("interfaces: integrations", ("integrations",)),
    # `api` is the one request schema of the HTTP routes and the MCP tools (issue 27).
    Layer("interfaces: http", ("http", "api")),
    # The facade and the public surface that re-exports it (AsyncEngine runs the Engine's writes).
    Layer("facade", ("__init__", "engine", "async_engine")),
    # Domain packs build a plan.DomainPack (and use plan.vocab): above the planner, which
    # receives a pack and never imports one. `resumes` is today's name of domains/resumes.
    Layer("domain packs", ("domains", "resumes"), independent=True),
    # Features that run a search (ask, plan) or score searches (eval): above search.
    Layer("features", ("ask", "eval", "plan"), independent=True),
    # Search reads what snapshot builds (BM25 stats layout version): above snapshot.
    Layer("search", ("search",)),
    Layer("snapshot", ("snapshot",)),
    # Ingest: loaders, normalization, chunking (chunker takes embed's Tokenizer), field
    # coercion (`fields` is today's ranklock/fields.py, bound for ingest/fields.py).
    Layer("ingest", ("ingest", "fields")),
    # The collection record sits above store: its reserved column names are derived from
    # store.tables.CHUNK_COLUMNS (the one list of the chunk table's columns). `validation`
    # (w11-input: pydantic errors -> one message; reads settings.SearchParams) sits with it.
    # `segmenting` (how a collection cuts its segments: window, partition key) is read with the record.
    Layer("shared records", ("collection", "validation", "segmenting")),
    # The rerankers (a cross-encoder, an HTTP endpoint): models, like the embedders, that the search
    # pipeline's rerank stage (search/rerank.py) calls; a cross-encoder checks its weights as embed does.
    Layer("rerank", ("rerank",)),
    Layer("foundations", ("embed", "store"), independent=True),
    # Shared leaves: the settings declarations, the version string, the error tree.
    # `_version` and `_extras` (the "install ranklock[models]" helper) are new with issue 15.
    Layer("settings", ("settings", "_version", "_extras"), independent=True),
    # Input limits (constants only): below settings, whose SearchParams bounds `depth` by MAX_K.
    Layer("limits", ("limits",)),
    # `phrasing` (counts and lists in messages: "1 entry", "3 entries") is what messages are made of.
    Layer("errors", ("errors", "phrasing")),
    # The wire format of the local services and their lock probe (standard library only): the
    # embedding service and the command client both use them, and the client imports nothing else.
    # `home` (which data directory a command works in) is read by the client and the settings alike.
    # `local_socket` (a Unix socket only its owner reaches) is how both services listen and are reached.
    Layer("local services", ("framing", "service_lock", "home", "local_socket"), independent=True),
]

#: Count imports under ``if TYPE_CHECKING:`` (see the module docstring for why).
COUNT_TYPE_CHECKING = True

#: Violation keys (as printed by ``violations()``) tolerated while the refactor is under
#: way. The test also fails on an entry that no longer occurs, so the list only shrinks.
#: (cli_replica joins the existing cli cycle the way every cli_*.py module does: issue 15 breaks it.)
#: Empty: the refactor's target.
ALLOWED: frozenset[str] = frozenset()

PACKAGE = "ranklock"


def source_root() -> Path:
    """``src/ranklock`` of the checkout this file sits in (or ``$RANKLOCK_SRC``)."""
    env = os.environ.get("RANKLOCK_SRC")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += [here.parents[1] / "src" / PACKAGE, Path.cwd() / "src" / PACKAGE]
    for cand in candidates:
        if (cand / "__init__.py").is_file():
            return cand
    spec = importlib.util.find_spec(PACKAGE)  # does not execute the package
    if spec is None or spec.origin is None:
        raise RuntimeError("cannot find src/ranklock; set RANKLOCK_SRC")
    return Path(spec.origin).parent


# --------------------------------------------------------------------------------------
# Reading the imports
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Edge:
    src: str  # dotted module, e.g. ranklock.search.hybrid
    dst: str
    line: int
    kind: str  # "module" | "function" | "type" | "dynamic" (importlib.import_module)

    def where(self, files: dict[str, str]) -> str:
        return f"{files[self.src]}:{self.line}"


def module_files(root: Path) -> dict[str, str]:
    """Dotted module name -> path relative to ``src/`` for every file in the package."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = str(rel.relative_to(PACKAGE))
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Yield (import node, kind), tracking whether we are in a def or a TYPE_CHECKING if."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, kind
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk_stmt(stmt, "type")
            for stmt in child.orelse:
                yield from _walk_stmt(stmt, kind)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, "type" if kind == "type" else "function")
        else:
            yield from _walk(child, kind)


def _walk_stmt(stmt: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        yield stmt, kind
    else:
        yield from _walk(stmt, kind)


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _nearest_module(name: str, known: dict[str, str]) -> str | None:
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in known:
            return cand
        parts.pop()
    return None


def collect_edges(root: Path) -> tuple[dict[str, str], list[Edge]]:
    files = module_files(root)
    edges: list[Edge] = []
    for module, rel in files.items():
        path = root.parent / PACKAGE / rel
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_pkg = path.name == "__init__.py"
        for node, kind in _walk(tree, "module"):
            if kind == "type" and not COUNT_TYPE_CHECKING:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_pkg, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in files else base)
            for target in targets:
                if not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                    continue
                dst = _nearest_module(target, files)
                if dst is not None and dst != module:
                    edges.append(Edge(module, dst, node.lineno, kind))
        # importlib.import_module("ranklock.x"): an import all the same, only hidden from
        # the import statements (snapshot/ops.py reaches eval.gate this way today).
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant)):
                continue
            fn = call.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            literal = call.args[0].value
            if name == "import_module" and isinstance(literal, str) and literal.startswith(PACKAGE + "."):
                dst = _nearest_module(literal, files)
                if dst is not None and dst != module:
                    edges.append(Edge(module, dst, call.lineno, "dynamic"))
    return files, sorted(set(edges), key=lambda e: (e.src, e.dst, e.line, e.kind))


# --------------------------------------------------------------------------------------
# Graphs, cycles, layers
# --------------------------------------------------------------------------------------
def top_name(module: str) -> str:
    """``ranklock.search.bm25`` -> ``search``; the root package -> ``ranklock``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _sccs(nodes: Iterable[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), only those with a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def _one_cycle(comp: list[str], succ: dict[str, set[str]], start: str) -> list[str]:
    """A shortest cycle through ``start`` inside the component (BFS), as a node list."""
    members = set(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for v in frontier:
            for w in sorted(succ.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp  # unreachable for a real SCC


@dataclass(frozen=True)
class Violation:
    key: str  # stable (no line numbers): used by ALLOWED and for progress tracking
    detail: str  # human: the edges with file:line


def _graph(edges: list[Edge], node_of: dict[str, str]) -> dict[str, dict[str, list[Edge]]]:
    g: dict[str, dict[str, list[Edge]]] = {}
    for e in edges:
        a, b = node_of[e.src], node_of[e.dst]
        if a != b:
            g.setdefault(a, {}).setdefault(b, []).append(e)
    return g


def _cycle_violations(
    label: str, g: dict[str, dict[str, list[Edge]]], files: dict[str, str], show: dict[str, str]
) -> list[Violation]:
    succ = {a: set(bs) for a, bs in g.items()}
    nodes = set(succ) | {b for bs in succ.values() for b in bs}
    out = []
    for comp in _sccs(nodes, succ):
        # One shortest cycle through every member, so each back edge shows up once.
        cycles: list[list[str]] = []
        for start in comp:
            cyc = _one_cycle(comp, succ, start)
            k = min(range(len(cyc) - 1), key=lambda i: cyc[i])  # rotate: dedupe
            canon = cyc[k:-1] + cyc[:k] + [cyc[k]]
            if canon not in cycles:
                cycles.append(canon)
        members = " ".join(show[c] for c in comp)
        key = f"cycle({label}): {{{members}}}"
        parts = [key]
        for cyc in cycles:
            parts.append("  " + " -> ".join(show[c] for c in cyc))
            for a, b in itertools.pairwise(cyc):
                es = sorted(g[a][b], key=lambda e: (files[e.src], e.line))
                where = ", ".join(f"{e.where(files)} ({e.kind})" for e in es[:3])
                more = f" +{len(es) - 3} more" if len(es) > 3 else ""
                parts.append(f"      {show[a]} -> {show[b]}   [{where}{more}]")
        out.append(Violation(key, "\n".join(parts)))
    return out


def layer_of(name: str) -> int | None:
    for rank, layer in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(name, pat) for pat in layer.members):
            return rank
    return None


def _layer_name(top: str) -> str:
    return "__init__" if top == PACKAGE else top


def violations(root: Path | None = None) -> list[Violation]:
    """Every cycle (file and package graph) and every upward/sideways import."""
    files, edges = collect_edges(root or source_root())
    out: list[Violation] = []
    file_node = {m: m for m in files}
    out += _cycle_violations("files", _graph(edges, file_node), files, files)
    pkg_node = {m: top_name(m) for m in files}
    pkg_show = {top_name(m): top_name(m) for m in files}
    out += _cycle_violations("packages", _graph(edges, pkg_node), files, pkg_show)

    layered: dict[tuple[str, str], list[Edge]] = {}
    for e in edges:
        a, b = top_name(e.src), top_name(e.dst)
        if a == b:
            continue
        la, lb = layer_of(_layer_name(a)), layer_of(_layer_name(b))
        if la is None or lb is None:
            continue  # reported by unlayered()
        if lb < la or (lb == la and LAYERS[la].independent):  # lower index = higher layer
            layered.setdefault((files[e.src], files[e.dst]), []).append(e)
    for (src, dst), es in sorted(layered.items()):
        e = es[0]
        la = layer_of(_layer_name(top_name(e.src)))
        lb = layer_of(_layer_name(top_name(e.dst)))
        assert la is not None and lb is not None
        what = "sideways" if la == lb else "upward"
        key = f"{what}: {src} -> {dst}"
        where = ", ".join(f"{x.where(files)} ({x.kind})" for x in es)
        detail = f"{key}   [{where}]  ({LAYERS[la].name} -> {LAYERS[lb].name})"
        out.append(Violation(key, detail))
    return out


def unlayered(root: Path | None = None) -> list[str]:
    files = module_files(root or source_root())
    tops = sorted({_layer_name(top_name(m)) for m in files})
    return [t for t in tops if layer_of(t) is None]


# --------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------
def _report(found: list[Violation]) -> str:
    return "\n".join(v.detail for v in found)


def test_every_module_has_a_layer() -> None:
    missing = unlayered()
    if missing:
        pytest.fail(
            f"top-level modules with no row in LAYERS: {', '.join(missing)}; "
            "add each to the row of the layer it belongs to in tests/test_layers.py",
            pytrace=False,
        )


def test_no_import_cycles() -> None:
    found = [v for v in violations() if v.key.startswith("cycle") and v.key not in ALLOWED]
    if found:
        pytest.fail("import cycles (break each by moving the shared code down):\n" + _report(found), pytrace=False)


def test_no_upward_imports() -> None:
    found = [v for v in violations() if not v.key.startswith("cycle") and v.key not in ALLOWED]
    if found:
        pytest.fail(
            "imports against the layer table (LAYERS in tests/test_layers.py):\n" + _report(found), pytrace=False
        )


def test_allowed_list_only_shrinks() -> None:
    current = {v.key for v in violations()}
    stale = sorted(ALLOWED - current)
    if stale:
        pytest.fail("fixed, so remove from ALLOWED in tests/test_layers.py:\n" + "\n".join(stale), pytrace=False)
