"""Connections, version checks and schema migrations.

Migrations are the numbered ``.sql`` files beside this module, applied in
order on open, each in its own transaction, under an advisory lock so that
two processes opening the same database at once apply each file once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from ..errors import DatabaseUnavailable, ExtensionError
from .errors import map_data_errors

__all__ = ["Database", "MIN_PGVECTOR", "MIN_POSTGRES"]

MIN_POSTGRES = 160000
MIN_PGVECTOR = (0, 8, 0)
_MIGRATION_LOCK = 7_142_001  # advisory lock key for migrations

Tracer = Callable[[str, Any], None]


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _redact(dsn: str) -> str:
    dsn = re.sub(r"(//[^:/@\s]+):[^@/\s]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


class Database:
    """A pool of connections to one PostgreSQL database, migrated on open."""

    def __init__(self, dsn: str, *, tracer: Tracer | None = None, min_size: int = 1, max_size: int = 8) -> None:
        self.dsn = dsn
        self.tracer = tracer
        try:
            # A quick direct probe gives a clear error for a wrong DSN before the
            # pool starts retrying in the background.
            with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
                self._check_server(conn)
                self._migrate(conn)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL at {_redact(dsn)}: {str(exc).strip()}. "
                "Check that the server runs and the DSN is right, or unset RANKLOCK_DSN "
                "to use the embedded server."
            ) from exc
        self.pool = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            open=True,
            configure=self._configure,
            # No server-side prepared statements: after five executions psycopg
            # would prepare, and PostgreSQL may then switch to a generic plan.
            # A different plan for the same query can walk an ANN index
            # differently and return different rows; one statement, one plan.
            kwargs={"autocommit": True, "prepare_threshold": None},
        )

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        # Belt and braces for statements prepared by anything else: always plan
        # with the actual parameter values.
        conn.execute("SET plan_cache_mode = force_custom_plan")

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        # Every statement runs inside one of these blocks (the helpers below
        # too), so this is where a refused value becomes a ranklock error.
        with map_data_errors(), self.pool.connection() as conn:
            yield conn

    def trace(self, query: Any, params: Any) -> None:
        if self.tracer is not None:
            self.tracer(query if isinstance(query, str) else query.as_string(None), params)

    def fetchall(self, query: sql.Composable | str, params: Any = None) -> list[dict[str, Any]]:
        self.trace(query, params)
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, params)  # type: ignore[arg-type]
            return cur.fetchall()

    def fetchone(self, query: sql.Composable | str, params: Any = None) -> dict[str, Any] | None:
        rows = self.fetchall(query, params)
        return rows[0] if rows else None

    def execute(self, query: sql.Composable | str, params: Any = None) -> None:
        self.trace(query, params)
        with self.connection() as conn:
            conn.execute(query, params)  # type: ignore[arg-type]

    # -- checks and migrations -------------------------------------------------

    @staticmethod
    def _check_server(conn: psycopg.Connection[Any]) -> None:
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
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
        except psycopg.Error as exc:
            raise ExtensionError(
                f"cannot create the `vector`/`unaccent` extensions: {str(exc).strip()}. "
                "Run `CREATE EXTENSION vector; CREATE EXTENSION unaccent;` as a superuser once."
            ) from exc
        installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert installed is not None  # created just above
        if _version_tuple(installed[0]) < MIN_PGVECTOR:
            raise ExtensionError(
                f"pgvector {installed[0]} is too old: ranklock needs >= 0.8.0 (iterative index scans). "
                "Run `ALTER EXTENSION vector UPDATE;` after upgrading pgvector on the server."
            )

    @staticmethod
    def migrations() -> list[tuple[int, str, str]]:
        out = []
        folder = resources.files("ranklock.store") / "migrations"
        for entry in folder.iterdir():
            m = re.match(r"(\d{4})_(\w+)\.sql$", entry.name)
            if m:
                out.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
        return sorted(out)

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT pg_advisory_lock(%s)", [_MIGRATION_LOCK])
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS public.ranklock_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM public.ranklock_migrations").fetchall()}
            for version, name, text in self.migrations():
                if version in done:
                    continue
                with conn.transaction():
                    conn.execute(text.encode())
                    conn.execute(
                        "INSERT INTO public.ranklock_migrations (version, name) VALUES (%s, %s)", [version, name]
                    )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [_MIGRATION_LOCK])
