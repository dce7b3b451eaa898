"""How the CLI prints results: readable at 80 columns, plain when piped, machine formats on request.

The command functions in ``cli*.py`` call one ``render_*`` function here with the engine's result
and the chosen ``--format``:

* ``table`` (default): for a person; ids and text shown escaped (ranklock.phrasing.shown).  Width-aware (the rich Console's width, ``COLUMNS`` when set);
  a search hit is a short block, not a wide table row; no colour and no box drawing when stdout is
  not a terminal, so a pipe or a file gets plain text.
* ``json``: one JSON object, the same as the older ``--json`` flag (kept as an alias).
* ``jsonl``: one JSON object per hit, snapshot or mode, for ``jq -c`` and line tools.
* ``trec``: a TREC run (``qid Q0 docid rank score tag``) for ``trec_eval``, one line a hit (an id with
  whitespace or a control character percent-encoded, ranklock.phrasing.trec_token): each hit's rank in the
  whole list (a later page, ``--offset``, goes on from it) and its fused score, every digit
  (``repr``).  trec_eval re-sorts by score and breaks ties by document id, so within a tie group
  (``Hit.tie_group``: identical signals, an order that carries no meaning) it may order hits
  otherwise; the run files ``ranklock eval --out`` writes score ``n + 1 - rank`` instead, so that
  trec_eval scores exactly the ranking ranklock's metrics were computed on.

    >>> render_search(res, fmt="table")   # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import InputError
from ..phrasing import plural, shown, trec_token

if TYPE_CHECKING:
    from ..search.results import BranchSignal

__all__ = [
    "FORMATS",
    "branch_ranks",
    "clip",
    "FormatOpt",
    "query_terms",
    "render_eval",
    "render_search",
    "render_snapshots",
    "resolve_format",
    "snippet",
    "stdout_console",
    "table_box",
    "waiting",
]

FORMATS = ("table", "json", "jsonl", "trec")
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format", help="table (for a person; the default), json (= --json), jsonl (one object per line) or trec."
    ),
]

_WORD = re.compile(r"\w+", re.UNICODE)


def clip(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters: cut at a word boundary, with "…" where it was cut.

    >>> clip("Recall is the ceiling: a generator cannot cite a passage", 30)
    'Recall is the ceiling: a…'
    """
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = flat[: width - 1]
    space = cut.rfind(" ")
    # Back to the last space unless that loses most of the room (one very long word).
    if space > (width - 1) // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def resolve_format(fmt: str | None, as_json: bool, allowed: Sequence[str], command: str) -> str:
    """The effective format: ``--json`` is ``--format json``; anything else must be one ``command`` supports."""
    if as_json and fmt not in (None, "json"):
        raise InputError(f"--json and --format {fmt} disagree; pass one of them (--json means --format json).")
    chosen = "json" if as_json else (fmt or "table")
    if chosen not in allowed:
        raise InputError(f"{command} has no --format {chosen!r}; use one of {', '.join(allowed)}.")
    return chosen


def stdout_console() -> Console:
    """A Console on the current stdout, built per call so ``COLUMNS`` and a swapped stdout (tests) count.

    rich already drops colour when stdout is not a terminal; highlighting of numbers and
    paths is turned off because it colours text by guesswork.
    """
    return Console(highlight=False)


def table_box(console: Console) -> box.Box | None:
    """The box style for a table on ``console``: lines in a terminal, none through a pipe."""
    return _box(console)


def _box(console: Console) -> box.Box | None:
    # Box-drawing characters only for a terminal; a pipe gets aligned plain columns.
    return box.SIMPLE_HEAD if console.is_terminal else None


def _write_lines(lines: Iterator[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")


@contextmanager
def waiting(message: str) -> Iterator[None]:
    """A spinner on stderr saying what the wait is for, only when stderr is a terminal."""
    err = Console(stderr=True)
    ctx = err.status(message, spinner="dots") if err.is_terminal else nullcontext()
    with ctx:
        yield


# -- search -------------------------------------------------------------------------------


def query_terms(query: str) -> list[str]:
    """The words of ``query`` worth highlighting (two or more letters), lower-cased, in order, once each."""
    seen: dict[str, None] = {}
    for m in _WORD.finditer(query.lower()):
        if len(m.group()) >= 2:
            seen.setdefault(m.group(), None)
    return list(seen)


def _matches(word: str, terms: Sequence[str]) -> bool:
    # A rough stand-in for the stemmer, the same rule as the web page: equal, or one a prefix of the
    # other from four letters on (bone ~ bones, harbour ~ harbours).
    w = word.lower()
    return any(
        w == t or (len(t) >= 4 and w.startswith(t)) or (len(w) >= 4 and t.startswith(w) and len(t) - len(w) <= 2)
        for t in terms
    )


def snippet(text: str, terms: Sequence[str], width: int, lines: int = 2) -> list[Text]:
    """At most ``lines`` lines of ``width`` from ``text``, centred on the first query term, terms in bold."""
    flat = " ".join(text.split())
    budget = width * lines
    start = 0
    if len(flat) > budget:
        first = next((m.start() for m in _WORD.finditer(flat) if _matches(m.group(), terms)), 0)
        start = max(0, min(first - width // 3, len(flat) - budget))
        # Start on a word boundary, so the excerpt does not open with half a word.
        if start > 0:
            space = flat.find(" ", start)
            start = space + 1 if 0 <= space < first else start
    excerpt = ("…" if start > 0 else "") + flat[start:]
    wrapped = textwrap.wrap(excerpt, width=width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        last = wrapped[-1]
        wrapped[-1] = (last if len(last) < width else last[: width - 1].rstrip()) + "…"
    out = []
    for line in wrapped:
        t = Text(line)
        for m in _WORD.finditer(line):
            if _matches(m.group(), terms):
                t.stylize("bold yellow", m.start(), m.end())
        out.append(t)
    return out


def branch_ranks(hit: Any) -> list[str]:
    """Each branch's rank of ``hit`` for a table cell, in branch order (``-``: it did not rank it)."""
    return ["-" if sig.rank is None else str(sig.rank) for sig in hit.signals]


#: The colour of each branch's signals in a hit line, in branch order (ranklock.search.branches).
BRANCH_STYLES = ("blue", "dark_orange", "magenta", "green")


def _branch(sig: BranchSignal) -> str:
    """One branch's signals in a hit line: its short name (``lex``), rank and raw score, or a dash."""
    from ..search.branches import short_name

    label = short_name(sig.name)
    if sig.rank is None:
        return f"{label} -"
    return f"{label} #{sig.rank} ({sig.keys.raw_format.format(sig.raw)})"


def render_search(res: Any, fmt: str, *, timings: bool = False, qid: str = "1") -> None:
    """Print a search result in ``fmt`` (see the module docstring)."""
    if fmt == "json":
        sys.stdout.write(res.to_json(timings=timings, served_by=True) + "\n")
        return
    if fmt == "jsonl":
        base = {"query": res.query, "collection": res.collection, "mode": res.mode, "snapshot": res.snapshot.id}
        _write_lines(json.dumps({**base, **h.model_dump()}, ensure_ascii=False) for h in res.hits)
        return
    if fmt == "trec":
        # trec_eval splits a line on whitespace: an id with a space, a tab or a newline is percent-encoded.
        _write_lines(
            f"{trec_token(qid)} Q0 {trec_token(h.doc_id)} {h.rank} {h.score!r} ranklock-{res.mode}" for h in res.hits
        )
        return
    console = stdout_console()
    width = max(console.width, 40)
    terms = query_terms(res.query)
    indent = "    "
    for h in res.hits:
        head = Text()
        head.append(f"{h.rank:>2}. ", style="bold")
        head.append(shown(h.doc_id), style="bold cyan")
        if h.chunk:
            head.append(f" [chunk {h.chunk}]")
        head.append(f"  fused {h.score:.5f}")
        for i, sig in enumerate(h.signals):
            head.append("  ")
            head.append(_branch(sig), style=BRANCH_STYLES[i % len(BRANCH_STYLES)])
        if h.tie_group is not None:
            head.append(f"  tie {h.tie_group}", style="yellow")
        console.print(head, overflow="fold")
        for line in snippet(shown(h.text, backslash=False), terms, width - len(indent)):
            console.print(Text(indent) + line, overflow="fold")
    if not res.hits:
        console.print("no hits")
    page = f" after the first {res.offset} (--offset)" if res.offset else ""
    summary = f"{len(res.hits)} of k={res.k}{page} from snapshot {res.snapshot.id}"
    if res.matching_count is not None:
        # Without a filter the count is of every document searched; "match the filter" would invent one.
        n = res.matching_count
        counted = "searched" if res.filter is None else "matches the filter" if n == 1 else "match the filter"
        summary += f"; {plural(n, 'document')} {counted}, complete={res.complete}"
        if res.truncation:
            summary += f" (truncated: {res.truncation})"
    summary += f"; {res.timings.get('total_ms', 0):.0f} ms (query embedding {res.timings.get('embed_ms', 0):.0f} ms)"
    console.print(Text(summary, style="dim"))
    if res.query_id is not None:
        console.print(Text(f"logged as query {res.query_id}: `ranklock replay {res.query_id}` re-runs it", style="dim"))


# -- snapshot list --------------------------------------------------------------------------


def render_snapshots(collection: str, rows: list[dict[str, Any]], fmt: str) -> None:
    """Print ``ranklock snapshot list``: every column on a wide terminal, the essential ones at 80."""
    if fmt == "json":
        sys.stdout.write(json.dumps({"collection": collection, "snapshots": rows}, ensure_ascii=False, default=str))
        sys.stdout.write("\n")
        return
    if fmt == "jsonl":
        _write_lines(json.dumps({"collection": collection, **r}, ensure_ascii=False, default=str) for r in rows)
        return
    console = stdout_console()
    wide = console.width >= 120
    table = Table(box=_box(console), pad_edge=False, show_edge=False)
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("parent", justify="right", no_wrap=True)
    table.add_column("docs", justify="right", no_wrap=True)
    table.add_column("chunks", justify="right", no_wrap=True)
    if wide:
        table.add_column("embedded", justify="right", no_wrap=True)
        table.add_column("reused", justify="right", no_wrap=True)
        table.add_column("corpus", no_wrap=True)
    table.add_column("manifest", no_wrap=True)
    table.add_column("built (UTC)", no_wrap=True)
    for r in rows:
        mark = " (active)" if r["active"] else (" (previous)" if r["previous"] else "")
        cells = [
            str(r["id"]),
            f"{r['status']}{mark}",
            str(r["parent_id"] or "-"),
            str(r["documents"] or 0),
            str(r["chunks"] or 0),
        ]
        if wide:
            cells += [
                str(r["embedded"] if r["embedded"] is not None else "-"),
                str(r["reused"] if r["reused"] is not None else "-"),
                _short(r["corpus_digest"]),
            ]
        cells += [_short(r["manifest_hash"]), str(r["built_at"] or "-")[:16]]
        table.add_row(*cells)
    console.print(table)
    if not wide and rows:
        console.print(Text("more columns (vectors reused, corpus digest): a wider terminal or --format json"))


def _short(h: Any) -> str:
    return "-" if not h else str(h)[:12]


# -- eval ---------------------------------------------------------------------------------


def render_eval(report: dict[str, Any], fmt: str, *, trec_runs: dict[str, str], files: list[str]) -> None:
    """Print ``ranklock eval``: metrics as rows and modes as columns, so it fits 80 columns for any ks."""
    modes = list(report["modes"])
    if fmt == "json":
        out = {k: report[k] for k in ("snapshot", "golden", "ks", "modes", "params")}
        sys.stdout.write(json.dumps({"collection": report["collection"], **out, "files": files}, default=str) + "\n")
        return
    if fmt == "jsonl":
        _write_lines(
            json.dumps({"collection": report["collection"], "mode": m, **report["modes"][m]}, default=str)
            for m in modes
        )
        return
    if fmt == "trec":
        if len(modes) != 1:
            raise InputError(
                f"--format trec writes one run, and this evaluation has {len(modes)} modes ({', '.join(modes)}); "
                "pass one, e.g. --modes hybrid."
            )
        sys.stdout.write(trec_runs[modes[0]])
        return
    console = stdout_console()
    ks = report["ks"]
    metrics = [f"recall@{x}" for x in ks] + [f"ndcg@{x}" for x in ks] + ["mrr"]
    table = Table(box=_box(console), pad_edge=False, show_edge=False)
    table.add_column("metric", no_wrap=True)
    for m in modes:
        table.add_column(m, justify="right", no_wrap=True)
    for name in metrics:
        table.add_row(name, *(f"{report['modes'][m][name]:.4f}" for m in modes))
    rankers = [str(report["params"][m].get("lexical_ranker") or "-") for m in modes]
    table.add_row("lexical ranker", *rankers)
    console.print(table)
    g = report["golden"]
    console.print(
        Text(
            f"{g['queries']} queries from {g['path']} on snapshot {report['snapshot']['id']} "
            f"(manifest {str(report['snapshot']['manifest_hash'])[:16]}…)"
        )
    )
