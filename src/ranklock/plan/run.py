"""Plans against a live collection: its schema, executing an answer, explaining every hit.

``Engine.plan`` and ``Engine.search_request`` are thin doors onto these
functions: they hand over the database, the collection record, the schema (read
with the collection's domain pack) and, to run a plan, a
:class:`~ranklock.search.protocol.Searcher`; nothing here knows the Engine or a
domain.  Executing an ``answer`` plan is one ordinary search:
the constraints become the structured filter (SQL, both branches), the
ranking text and preferred values become the query.  Soft preferences can
therefore reorder candidates but never remove one: whatever passes the filter
is a candidate, and ``depth`` is raised to ``k`` so that, with ``k`` at or
above the number of matching candidates, all of them come back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Protocol

from psycopg import sql
from pydantic import BaseModel, Field

from ..collection import CollectionInfo
from ..errors import QueryError
from ..search.protocol import Searcher
from ..search.results import SearchResult, WithSignals
from ..settings import REQUEST
from ..snapshot.segments import chunks_sql, live_documents_sql, live_sql, read_layout
from ..store.database import Database
from .evaluate import matches
from .extract import RuleExtractor
from .model import Plan
from .pack import DomainPack
from .schema import PlanSchema, build_schema
from .validate import validate_plan

__all__ = [
    "Extractor",
    "HitExplanation",
    "PlannedSearch",
    "check_request",
    "explain_hits",
    "plan_request",
    "read_schema",
    "search_request",
]


class Extractor(Protocol):
    """Anything that proposes a plan for a request; its plan is validated before use."""

    name: str

    def extract(self, request: str, schema: PlanSchema, collection: str | None = None) -> Plan: ...


class ConstraintCheck(BaseModel):
    constraint: str
    field: str
    value: Any = None
    satisfied: bool


class HitExplanation(WithSignals):
    """Why a hit is where it is; its branch signals shown as the hit shows them (ranklock.search.results)."""

    rank: int
    doc_id: str
    tie_group: int | None = None
    score: float
    constraints: list[ConstraintCheck] = Field(default_factory=list)
    preferences_matched: list[str] = Field(default_factory=list)
    rank_without_preferences: int | None = None
    moved_by_preferences: int | None = Field(
        None, description="Places gained (+) or lost (-) through the soft preferences; None: no preferences."
    )
    display: dict[str, Any] = Field(default_factory=dict, description="Shown to people; never ranked.")


class PlannedSearch(BaseModel):
    """A request's plan and, for an answer, its search result and per-hit explanations."""

    plan: Plan
    result: SearchResult | None = None
    explanations: list[HitExplanation] | None = None
    notes: list[str] = Field(default_factory=list)

    def to_json(self, *, indent: int | None = None) -> str:
        return self.model_dump_json(exclude={"result": {"timings", "query_id"}}, indent=indent)


#: The query run when a plan has no words to rank by.
NO_RANKING_QUERY = "*"


# Snapshots are immutable, so a schema read from one never goes stale: cached per database, collection,
# active snapshot and pack (the least recently used dropped beyond _SCHEMA_CACHE_SIZE).
_SCHEMA_CACHE_SIZE = 256
_SCHEMAS: OrderedDict[tuple[str, int, int | None, str], PlanSchema] = OrderedDict()
_SCHEMAS_LOCK = threading.Lock()


def read_schema(db: Database, coll: CollectionInfo, pack: DomainPack) -> PlanSchema:
    """The planner's schema of ``coll``: declared fields, and for keyword fields the values stored in its
    active snapshot plus the pack's closed vocabulary of the field."""
    key = (db.dsn, coll.id, coll.active_snapshot_id, pack.name)
    with _SCHEMAS_LOCK:
        cached = _SCHEMAS.get(key)
        if cached is not None:
            _SCHEMAS.move_to_end(key)
            return cached
    schema = _read_schema(db, coll, pack)
    with _SCHEMAS_LOCK:
        _SCHEMAS[key] = schema
        while len(_SCHEMAS) > _SCHEMA_CACHE_SIZE:
            _SCHEMAS.popitem(last=False)
    return schema


def _read_schema(db: Database, coll: CollectionInfo, pack: DomainPack) -> PlanSchema:
    vocab: dict[str, list[str]] = {}
    for f in coll.fields:
        if f.type not in ("keyword", "keyword[]"):
            continue
        values = set(pack.vocabulary.get(f.name, []))
        if coll.active_snapshot_id is not None:
            col = sql.Identifier(f.name)
            expr = sql.SQL("unnest({})").format(col) if f.type == "keyword[]" else col
            layout = read_layout(db, coll.active_snapshot_id)
            q = sql.SQL("SELECT DISTINCT {} AS v FROM {} AS c WHERE {} LIMIT 5001").format(
                expr, chunks_sql(layout), live_sql(layout)
            )
            rows = db.fetchall(q)
            # A field with thousands of distinct values (ids, free tags) is not a vocabulary.
            if len(rows) <= 5000:
                values.update(str(r["v"]) for r in rows if r["v"] is not None)
        vocab[f.name] = sorted(values)
    return build_schema(coll.fields, vocab, pack)


def check_request(request: object) -> None:
    """Refuse an empty request (before anything is looked up)."""
    if not isinstance(request, str) or not request.strip():
        raise QueryError("the request is empty; describe the candidates you need, e.g. 'python, 3+ years'.")


def plan_request(
    schema: PlanSchema, request: str, extractor: Extractor | None = None, collection: str | None = None
) -> Plan:
    """Plan ``request`` against ``schema`` (of collection ``collection``); every plan is validated."""
    check_request(request)
    ext: Extractor = extractor or RuleExtractor()
    plan = ext.extract(request, schema, collection)
    return validate_plan(plan, schema)


def _metadata(
    db: Database, coll: CollectionInfo, snapshot_id: int, doc_ids: list[str]
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    rows = db.fetchall(
        sql.SQL(
            "SELECT d.doc_id, d.metadata, d.display FROM ({}) AS sd "
            "JOIN ranklock.documents d ON d.collection_id = %(coll)s AND d.doc_id = sd.doc_id "
            "AND d.content_hash = sd.content_hash"
        ).format(live_documents_sql()),
        {"coll": coll.id, "sid": snapshot_id, "ids": doc_ids},
    )
    return {r["doc_id"]: (r["metadata"], r["display"]) for r in rows}


def explain_hits(
    db: Database, coll: CollectionInfo, plan: Plan, result: SearchResult, baseline: SearchResult | None
) -> list[HitExplanation]:
    """One explanation per hit: constraints it satisfies, branch ranks, preferences that moved it."""
    data = _metadata(db, coll, result.snapshot.id, [h.doc_id for h in result.hits])
    base_rank = {h.doc_id: h.rank for h in baseline.hits} if baseline is not None else {}
    out = []
    for h in result.hits:
        meta, display = data.get(h.doc_id, ({}, {}))
        checks = [
            ConstraintCheck(
                constraint=f"{'not ' if c.negate else ''}{c.field} {c.op} {c.value!r}",
                field=c.field,
                value=meta.get(c.field),
                satisfied=matches(c.to_filter(), meta),
            )
            for c in plan.constraints
        ]
        matched = []
        low_text = h.text.lower()
        for p in plan.preferences:
            have = meta.get(p.field) if p.field else None
            if (isinstance(have, list) and p.value in have) or have == p.value or p.value.lower() in low_text:
                matched.append(p.value)
        without = base_rank.get(h.doc_id) if baseline is not None else None
        moved = None
        if baseline is not None:
            # A hit the baseline did not return moved up from beyond its last rank.
            before = without if without is not None else len(baseline.hits) + 1
            moved = before - h.rank
        out.append(
            HitExplanation(
                rank=h.rank,
                doc_id=h.doc_id,
                tie_group=h.tie_group,
                score=h.score,
                signals=h.signals,
                constraints=checks,
                preferences_matched=matched,
                rank_without_preferences=without,
                moved_by_preferences=moved,
                display=display,
            )
        )
    return out


def search_request(
    search: Searcher,
    db: Database,
    coll: CollectionInfo,
    schema: PlanSchema,
    request: str,
    *,
    k: int = REQUEST.k,
    explain: bool = False,
    extractor: Extractor | None = None,
    **params: Any,
) -> PlannedSearch:
    """Plan ``request``; run it through ``search`` when the plan is an answer; explain the hits when asked."""
    name = coll.name
    plan = plan_request(schema, request, extractor, name)
    if plan.kind != "answer":
        return PlannedSearch(plan=plan)
    # Depth at least k: with k at or above the number of matching candidates, every one of
    # them reaches fusion, so a soft preference can reorder them but never push one out.
    depth = max(int(params.pop("depth", None) or 0), k, int(coll.search_defaults.get("depth", 40)))
    notes = []
    query = plan.query_text()
    if not query:
        # Only exclusions ("no agency recruiters"): nothing says who is better.  A query with no
        # words skips the lexical branch; the order that remains is arbitrary, and we say so.
        query = NO_RANKING_QUERY
        notes.append(
            "the request only excludes candidates and gives nothing to rank by; the order of the hits "
            "carries no meaning"
        )
    result = search(name, query, k=k, filter=plan.filter, depth=depth, **params)
    if result.hits and any(h.tie_group is not None for h in result.hits):
        notes.append("hits that share a tie group are equally good for the ranker; their order carries no meaning")
    explanations = None
    if explain:
        baseline = None
        if plan.preferences:
            base_plan = plan.model_copy(update={"preferences": []})
            base_query = base_plan.query_text() or NO_RANKING_QUERY
            baseline = search(name, base_query, k=k, filter=plan.filter, depth=depth, **params)
        explanations = explain_hits(db, coll, plan, result, baseline)
    return PlannedSearch(plan=plan, result=result, explanations=explanations, notes=notes)
