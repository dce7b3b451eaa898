"""Server checks and schema migrations, run once when a Database opens.

Migrations are the numbered ``.sql`` files in ``migrations/`` beside this
module, applied in order, each in its own transaction, under an advisory lock
(``ranklock.store.locks.MIGRATIONS``) so that two processes opening the same
database at once apply each file once.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import psycopg

from ..errors import ExtensionError
from . import locks

__all__ = ["MIN_PGVECTOR", "MIN_POSTGRES", "check_server", "migrate", "migrations"]

MIN_POSTGRES = 160000
MIN_PGVECTOR = (0, 8, 0)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def check_server(conn: psycopg.Connection[Any]) -> None:
    """Refuse a server older than PostgreSQL 16 or without pgvector >= 0.8; create the extensions."""
    version = conn.info.server_version
    if version < MIN_POSTGRES:
        raise ExtensionError(
            f"PostgreSQL {version // 10000} is too old: ranklock needs PostgreSQL >= 16. "
            "Upgrade the server, or unset RANKLOCK_DSN to use the embedded PostgreSQL 18."
        )
    row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if row is None:
        raise ExtensionError(
            "the PostgreSQL server has no `vector` extension available. Install pgvector >= 0.8 "
            "on the server (https://github.com/pgvector/pgvector#installation), or unset "
            "RANKLOCK_DSN to use the embedded server, which ships it."
        )
    # `IF NOT EXISTS` is not safe against a second process doing the same at the same instant (a
    # unique violation on pg_extension), so the extensions are created under the migrations' lock.
    conn.execute("SELECT pg_advisory_lock(%s)", [locks.MIGRATIONS])
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
    except psycopg.Error as exc:
        raise ExtensionError(
            f"cannot create the `vector`/`unaccent` extensions: {str(exc).strip()}. "
            "Run `CREATE EXTENSION vector; CREATE EXTENSION unaccent;` as a superuser once."
        ) from exc
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", [locks.MIGRATIONS])
    installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert installed is not None  # created just above
    if _version_tuple(installed[0]) < MIN_PGVECTOR:
        raise ExtensionError(
            f"pgvector {installed[0]} is too old: ranklock needs >= 0.8.0 (iterative index scans). "
            "Run `ALTER EXTENSION vector UPDATE;` after upgrading pgvector on the server."
        )


def migrations() -> list[tuple[int, str, str]]:
    """Every migration shipped with ranklock: (version, name, SQL), in order."""
    out = []
    folder = resources.files("ranklock.store") / "migrations"
    for entry in folder.iterdir():
        m = re.match(r"(\d{4})_(\w+)\.sql$", entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    return sorted(out)


def migrate(conn: psycopg.Connection[Any]) -> None:
    """Apply the migrations not applied yet, each in its own transaction, under the migrations lock."""
    conn.execute("SELECT pg_advisory_lock(%s)", [locks.MIGRATIONS])
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS public.ranklock_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r[0] for r in conn.execute("SELECT version FROM public.ranklock_migrations").fetchall()}
        for version, name, text in migrations():
            if version in done:
                continue
            with conn.transaction():
                conn.execute(text.encode())
                conn.execute("INSERT INTO public.ranklock_migrations (version, name) VALUES (%s, %s)", [version, name])
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", [locks.MIGRATIONS])
