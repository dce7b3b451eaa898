"""Golden sets: queries with judged documents, read from BEIR folders or hand-labelled files.

Two formats are read:

* **BEIR** (a folder): ``queries.jsonl`` (``{"_id": ..., "text": ...}`` per line) and
  ``qrels/<split>.tsv`` (``query-id<TAB>corpus-id<TAB>score`` with a header line).  The
  score is the graded relevance; 0 means judged not relevant.  Only queries that have
  qrels in the split are part of the set.
* **Hand-labelled** (``.jsonl``, ``.yaml`` or ``.yml``): one entry per query with
  ``query`` (the text), ``expected`` (document ids, or a mapping id -> grade), optional
  ``grades`` (a list parallel to ``expected``), optional ``filter`` (passed to the search
  as is) and optional ``id``::

      {"query": "vaccine side effects", "expected": ["d12", "d40"], "grades": [2, 1]}
      {"id": "q7", "query": "prices in 2024", "expected": {"d3": 1}, "filter": "year = 2024"}

Every broken line is reported as ``file:line`` with what is wrong and how to fix it.

    >>> gs = load_golden("data/scifact")          # doctest: +SKIP
    >>> gs.queries[0].qid, gs.queries[0].relevant  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["GoldenQuery", "GoldenSet", "load_golden", "load_queries"]


@dataclass(frozen=True)
class GoldenQuery:
    """One judged query.  ``judgments`` maps document id to grade (0 = judged not relevant)."""

    qid: str
    text: str
    judgments: Mapping[str, int]
    filter: Any = None

    @property
    def relevant(self) -> dict[str, int]:
        """Documents with a positive grade: trec_eval's relevance_level 1."""
        return {d: g for d, g in self.judgments.items() if g > 0}


@dataclass
class GoldenSet:
    """A named list of judged queries, in file order."""

    path: str
    format: str
    queries: list[GoldenQuery] = field(default_factory=list)
    #: Queries dropped because no document was judged relevant (trec_eval cannot score them).
    skipped: list[str] = field(default_factory=list)

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        """The judgments as a trec_eval qrels mapping: qid -> doc id -> grade."""
        return {q.qid: dict(q.judgments) for q in self.queries}

    def digest(self) -> str:
        """sha256 over the queries, judgments and filters, so two reports can tell they used the same set."""
        h = hashlib.sha256()
        for q in self.queries:
            entry = [q.qid, q.text, sorted(q.judgments.items()), q.filter]
            h.update(json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()

    def describe(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "queries": len(self.queries),
            "skipped_no_relevant": len(self.skipped),
            "judgments": sum(len(q.judgments) for q in self.queries),
            "relevant": sum(len(q.relevant) for q in self.queries),
            "digest": self.digest(),
        }


def load_golden(path: str | Path, *, split: str = "test") -> GoldenSet:
    """Read a golden set from a BEIR folder, a BEIR qrels file, or a hand-labelled JSONL/YAML file."""
    p = Path(path)
    if p.is_dir():
        return _load_beir(p, p / "qrels" / f"{split}.tsv")
    if not p.exists():
        raise InputError(
            f"golden set {str(p)!r} does not exist; pass a BEIR folder (queries.jsonl + qrels/{split}.tsv) "
            "or a hand-labelled .jsonl/.yaml file."
        )
    if p.suffix == ".tsv":
        # A qrels file inside a BEIR folder: queries.jsonl sits one level up.
        return _load_beir(p.parent.parent, p)
    if p.suffix == ".jsonl":
        return _load_labelled(p, _read_jsonl(p), "jsonl")
    if p.suffix in (".yaml", ".yml"):
        return _load_labelled(p, _read_yaml(p), "yaml")
    raise InputError(
        f"golden set {str(p)!r} has an unknown format (suffix {p.suffix!r}); use a BEIR folder, "
        "a qrels .tsv inside one, or a hand-labelled .jsonl, .yaml or .yml file."
    )


def load_queries(path: str | Path, *, split: str = "test") -> list[tuple[str, str, Any]]:
    """Queries to replay (stability, canary): ``(qid, text, filter)`` triples, judged or not.

    Reads everything :func:`load_golden` reads, plus a ``.txt`` file (one query per line)
    and a JSONL file of ``{"_id", "text"}`` or ``{"query"}`` objects without judgments.
    """
    p = Path(path)
    if p.suffix == ".txt":
        if not p.exists():
            raise InputError(f"query file {str(p)!r} does not exist; pass a .txt, .jsonl, .yaml or BEIR folder.")
        lines = p.read_text(encoding="utf-8").splitlines()
        out = [(str(i), line.strip(), None) for i, line in enumerate(lines, 1) if line.strip()]
        if not out:
            raise InputError(f"{p}: no queries found; write one query per line.")
        return out
    if p.suffix == ".jsonl" and p.exists():
        rows = _read_jsonl(p)
        if rows and all(isinstance(r, dict) and "expected" not in r for _, r in rows):
            out = []
            for lineno, r in rows:
                text = r.get("text", r.get("query"))
                if not isinstance(text, str) or not text.strip():
                    raise InputError(f'{p}:{lineno}: no query text; give "text" (BEIR) or "query" as a string.')
                qid = r.get("_id", r.get("id", str(lineno)))
                out.append((str(qid), text, r.get("filter")))
            return out
    gs = load_golden(p, split=split)
    return [(q.qid, q.text, q.filter) for q in gs.queries]


# -- BEIR ------------------------------------------------------------------------------


def _load_beir(root: Path, qrels_path: Path) -> GoldenSet:
    qfile = root / "queries.jsonl"
    if not qfile.is_file():
        raise InputError(f"{root}: no queries.jsonl; a BEIR golden set needs queries.jsonl and qrels/<split>.tsv.")
    if not qrels_path.is_file():
        available = sorted(x.name for x in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        raise InputError(
            f"{qrels_path}: no such qrels file; available: {', '.join(available) or '(none)'}. "
            "Pick a split that exists (e.g. --split test)."
        )
    texts: dict[str, str] = {}
    for lineno, row in _read_jsonl(qfile):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("_id"), (str, int))
            or not isinstance(row.get("text"), str)
        ):
            raise InputError(f'{qfile}:{lineno}: a BEIR query needs "_id" and "text"; got {_short(row)}.')
        texts[str(row["_id"])] = row["text"]
    judgments: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if not line.strip():
                continue
            if lineno == 1 and parts[:1] == ["query-id"]:
                continue  # BEIR header
            if len(parts) == 4:  # TREC qrels: qid iter docid rel
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3:
                raise InputError(
                    f"{qrels_path}:{lineno}: expected 3 tab-separated columns (query-id, corpus-id, score), "
                    f"got {len(parts)}: {line.strip()!r}."
                )
            qid, did, score = parts
            try:
                grade = int(score)
            except ValueError:
                raise InputError(
                    f"{qrels_path}:{lineno}: relevance {score!r} is not an integer; grades are 0, 1, 2, …"
                ) from None
            if qid not in texts:
                raise InputError(
                    f"{qrels_path}:{lineno}: query {qid!r} is not in {qfile.name}; use the queries file "
                    "that belongs to these qrels."
                )
            judgments.setdefault(qid, {})[did] = grade
    gs = GoldenSet(path=str(qrels_path), format="beir")
    for qid, js in judgments.items():
        gq = GoldenQuery(qid=qid, text=texts[qid], judgments=js)
        (gs.queries.append(gq) if gq.relevant else gs.skipped.append(qid))
    if not gs.queries:
        raise InputError(f"{qrels_path}: no query has a relevant document (score > 0); check the qrels file.")
    return gs


# -- hand-labelled ---------------------------------------------------------------------


def _load_labelled(path: Path, rows: list[tuple[int, Any]], fmt: str) -> GoldenSet:
    gs = GoldenSet(path=str(path), format=fmt)
    seen: dict[str, int] = {}
    for lineno, row in rows:
        where = f"{path}:{lineno}"
        if not isinstance(row, dict):
            raise InputError(f'{where}: an entry must be an object with "query" and "expected"; got {_short(row)}.')
        unknown = sorted(set(row) - {"id", "query", "expected", "grades", "filter"})
        if unknown:
            raise InputError(
                f"{where}: unknown key(s) {', '.join(unknown)}; allowed: expected, filter, grades, id, query."
            )
        text = row.get("query")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f'{where}: "query" must be a non-empty string; got {_short(text)}.')
        judgments = _expected(where, row.get("expected"), row.get("grades"))
        qid = str(row.get("id", lineno))
        if qid in seen:
            raise InputError(f"{where}: query id {qid!r} was already used on line {seen[qid]}; give each a unique id.")
        seen[qid] = lineno
        gq = GoldenQuery(qid=qid, text=text, judgments=judgments, filter=row.get("filter"))
        (gs.queries.append(gq) if gq.relevant else gs.skipped.append(qid))
    if not gs.queries:
        raise InputError(f'{path}: no query with a relevant document; list at least one id in "expected".')
    return gs


def _expected(where: str, expected: Any, grades: Any) -> dict[str, int]:
    if isinstance(expected, dict):
        if grades is not None:
            raise InputError(f'{where}: "expected" is a mapping id -> grade, so "grades" must be left out.')
        out: dict[str, int] = {}
        for did, g in expected.items():
            if not isinstance(g, int) or isinstance(g, bool):
                raise InputError(f"{where}: grade of {did!r} is {g!r}; grades are integers (0, 1, 2, …).")
            out[str(did)] = g
        return out
    if not isinstance(expected, list) or not expected:
        raise InputError(
            f'{where}: "expected" must be a non-empty list of document ids or a mapping id -> grade; '
            f"got {_short(expected)}."
        )
    ids = [str(x) for x in expected]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(f'{where}: document id(s) listed twice in "expected": {", ".join(dupes)}.')
    if grades is None:
        return dict.fromkeys(ids, 1)
    if not isinstance(grades, list) or len(grades) != len(ids):
        raise InputError(
            f'{where}: "grades" must be a list as long as "expected" ({len(ids)} ids); got {_short(grades)}.'
        )
    for g in grades:
        if not isinstance(g, int) or isinstance(g, bool):
            raise InputError(f"{where}: grade {g!r} is not an integer; grades are 0, 1, 2, …")
    return dict(zip(ids, grades, strict=True))


# -- readers ---------------------------------------------------------------------------


def _read_jsonl(path: Path) -> list[tuple[int, Any]]:
    rows: list[tuple[int, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"{path}:{lineno}: not valid JSON ({exc.msg}); write one JSON object per line."
                ) from None
    return rows


def _read_yaml(path: Path) -> list[tuple[int, Any]]:
    """Entries with their line numbers (YAML nodes know where they start)."""
    import yaml

    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{line}: not valid YAML ({getattr(exc, 'problem', exc)}); fix the syntax.") from None
    if isinstance(data, dict) and "queries" in data and isinstance(node, yaml.MappingNode):
        data = data["queries"]
        node = next(v for k, v in node.value if k.value == "queries")
    if not isinstance(data, list) or not isinstance(node, yaml.SequenceNode):
        raise InputError(f"{path}:1: expected a list of entries (or a mapping with a 'queries' list).")
    return [(n.start_mark.line + 1, d) for n, d in zip(node.value, data, strict=True)]


def _short(value: Any) -> str:
    s = json.dumps(value, ensure_ascii=False, default=str)
    return s if len(s) <= 60 else s[:57] + "…"
