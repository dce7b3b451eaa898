"""CLI commands for the filters area, merged into :data:`ranklock.cli.app` by ``cli/root.py``.

``ranklock collection create NAME --field years_exp:int! --field skills:keyword[] --index hnsw --m 16``
declares a collection's typed fields and vector index up front (or from a
``--schema schema.json`` file); ``ranklock collection show NAME`` prints them.
Filters themselves are passed to ``ranklock search --filter``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import ConfigError
from ..phrasing import plural
from ..settings import DEFAULT_EMBEDDER, search_param_help
from ._common import DsnOpt, HomeOpt, JsonOpt, ShardsOpt, ask_first, console, engine, fail, print_json

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["collection_app", "load_schema"]

collection_app = typer.Typer(
    help="Create, inspect and drop collections: typed fields, vector index, snapshot retention.", no_args_is_help=True
)
app.add_typer(collection_app, name="collection")

_SCHEMA_KEYS = ("accent", "chunker", "embedder", "fields", "index", "index_params", "language", "search_defaults")


def load_schema(path: Path) -> dict[str, Any]:
    """Read a schema file: a JSON object with any of the keys of ``Engine.create_collection``.

    ``fields`` is a list of ``"name:type[!]"`` strings or ``{"name", "type", "required"}`` objects::

        {"fields": ["years_exp:int!", "skills:keyword[]"], "index": "hnsw",
         "index_params": {"m": 32, "ef_construction": 128}, "language": "english"}
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read schema file {str(path)!r}: {exc.strerror}; check the path.") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"schema file {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno}; fix the file."
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"schema file {str(path)!r} must hold a JSON object with keys {', '.join(_SCHEMA_KEYS)}.")
    unknown = sorted(set(data) - set(_SCHEMA_KEYS))
    if unknown:
        raise ConfigError(
            f"schema file {str(path)!r} has unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(_SCHEMA_KEYS)}."
        )
    return data


def _field_text(f: Any) -> Any:
    from ..collection import FieldSpec

    if isinstance(f, dict):
        try:
            return FieldSpec(**f)
        except Exception as exc:  # pydantic ValidationError
            raise ConfigError(f"bad field declaration {f!r} in the schema file: {exc}") from None
    return f


@collection_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Collection name.")],
    field: Annotated[
        list[str] | None, typer.Option("--field", help="Typed field name:type, ! for required (repeatable).")
    ] = None,
    index: Annotated[str | None, typer.Option(help="Vector index: hnsw, ivfflat or exact.")] = None,
    m: Annotated[int | None, typer.Option("--m", help="HNSW: links per node.")] = None,
    ef_construction: Annotated[
        int | None, typer.Option("--ef-construction", help="HNSW: build candidate list.")
    ] = None,
    lists: Annotated[int | None, typer.Option("--lists", help="IVFFlat: number of lists.")] = None,
    probes: Annotated[
        int | None, typer.Option("--probes", help="Collection default: " + search_param_help("probes"))
    ] = None,
    ef_search: Annotated[
        int | None, typer.Option("--ef-search", help="Collection default: " + search_param_help("ef_search"))
    ] = None,
    language: Annotated[str | None, typer.Option(help="Text-search language (default english).")] = None,
    accent: Annotated[str | None, typer.Option(help="Accent policy: sensitive or insensitive.")] = None,
    embedder: Annotated[str | None, typer.Option(help=f"Embedder (default {DEFAULT_EMBEDDER}).")] = None,
    schema: Annotated[
        Path | None, typer.Option("--schema", help="JSON schema file; command-line options override it.")
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            help="Cut segments by time: FIELD:UNIT, a date or timestamp field and day, week, month or year; "
            "a filter on the field reads only the segments it can match.",
        ),
    ] = None,
    partition: Annotated[
        str | None,
        typer.Option(
            "--partition", help="Cut segments by a keyword or int field (a tenant): a filter on it reads its segments."
        ),
    ] = None,
    shards: ShardsOpt = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create an empty collection with typed fields and a vector index; ingest into it later."""
    try:
        spec: dict[str, Any] = load_schema(schema) if schema is not None else {}
    except ConfigError as exc:
        raise fail(exc) from None
    fields = [_field_text(f) for f in spec.get("fields", [])] + list(field or [])
    kind = index or spec.get("index", "hnsw")
    given = {"m": m, "ef_construction": ef_construction, "lists": lists}
    index_params = {**spec.get("index_params", {}), **{k: v for k, v in given.items() if v is not None}}
    defaults = {**spec.get("search_defaults", {})}
    if probes is not None:
        defaults["probes"] = probes
    if ef_search is not None:
        defaults["ef_search"] = ef_search
    kwargs: dict[str, Any] = {
        "fields": fields,
        "index": kind,
        "index_params": index_params,
        "search_defaults": defaults,
    }
    for key, value in (
        ("language", language),
        ("accent", accent),
        ("embedder", embedder),
        ("window", window),
        ("partition", partition),
        ("shards", shards),
    ):
        if value is not None or key in spec:
            kwargs[key] = value if value is not None else spec[key]
    with engine(dsn, home, creates=True) as eng:
        if "chunker" in spec:
            from ..settings import ChunkerParams

            kwargs["chunker"] = ChunkerParams(**spec["chunker"])
        info = eng.create_collection(name, **kwargs)
    _print_collection(info.model_dump(), as_json)


@collection_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Collection name.")],
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a collection's typed fields, vector index and search defaults."""
    with engine(dsn, home) as eng:
        info = eng.collection(name)
    _print_collection(info.model_dump(), as_json)


def _print_collection(info: dict[str, Any], as_json: bool) -> None:
    out = {
        "name": info["name"],
        "language": info["language"],
        "accent": info["accent"],
        "embedder_id": info["embedder_id"],
        "dim": info["dim"],
        "fields": info["fields"],
        "index": info["index_kind"],
        "index_params": info["index_params"],
        "search_defaults": info["search_defaults"],
        "active_snapshot_id": info["active_snapshot_id"],
    }
    # Only a sharded collection (ranklock.snapshot.shards) has the key: every other keeps its shape.
    if info.get("shards"):
        out["shards"] = info["shards"]
    if as_json:
        print_json(out)
        return
    console.print(
        f"[bold]{out['name']}[/]: {out['index']} index {json.dumps(out['index_params'], sort_keys=True)}, "
        f"language {out['language']}, embedder {out['embedder_id']} ({out['dim']}-d)"
        + (f", {out['shards']} shards on Citus" if out.get("shards") else "")
    )
    table = Table("field", "type", "required")
    for f in out["fields"]:
        table.add_row(f["name"], f["type"], "yes" if f["required"] else "no")
    console.print(table)


@collection_app.command("list")
def collection_list(dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """List collections with their active snapshot (the same as `ranklock collections`)."""
    from .ingest import collections

    collections(dsn=dsn, home=home, as_json=as_json)


@collection_app.command("drop")
def drop(
    name: Annotated[str, typer.Argument(help="Collection name.")],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Drop without asking (needed when standard input is not a terminal).")
    ] = False,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Drop a collection: every snapshot, document and log entry of it; not undone (asks first, unless --yes)."""
    with engine(dsn, home) as eng:
        summary = next((c for c in eng.collections() if c.name == name), None)
        if summary is None:
            eng.collection(name)  # NotFound, naming the collections there are
        docs = summary.documents if summary is not None else 0
        ask_first(
            yes,
            deletes=f"`ranklock collection drop {name}` deletes every snapshot, document and log entry of {name!r}",
            to="drop it",
            question=f"Drop {name!r} ({plural(docs or 0, 'document')} in its active snapshot, every snapshot and log "
            "entry of it)?",
            answer=name,
            shown="its name",
            nothing="dropped",
        )
        out = eng.drop_collection(name)
    if as_json:
        print_json(out.as_dict())
        return
    console.print(
        f"[bold]{name}[/]: dropped, with {plural(len(out.snapshots), 'snapshot')}, "
        f"{plural(out.documents, 'document')}, {plural(out.query_log_entries, 'query-log entry')} and "
        f"{plural(out.answer_log_entries, 'answer-log entry')} (drop {out.drop_id}: a replay of one of them says so).",
        highlight=False,
    )
