"""API tokens: created and shown once, stored as the sha256 of their secret, revoked but never deleted.

A token reads ``rlk_`` followed by 43 URL-safe characters (256 random bits).
The server hashes what a request presents and looks the hash up: the secret
itself is never stored, logged or compared::

    >>> info, secret = create_token(db, "agent", ["read"])
    >>> verify_token_steps(secret)        # steps: TokenInfo, or Unauthorized naming why

Scopes (:data:`SCOPES`): ``read`` (search, ask, collections, documents),
``paid-generator`` (choose an Ask generator billed to the operator: ``openai``) and
``admin`` (drop a collection: ``DELETE /api/collections/NAME``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg

from ..errors import ConfigError, NotFound, Unauthorized
from .steps import Fetch, Steps

if TYPE_CHECKING:
    from .database import Database

__all__ = [
    "SCOPES",
    "TokenInfo",
    "create_token",
    "list_tokens",
    "revoke_token",
    "token_sha256",
    "verify_token_steps",
]

#: Every scope a token can hold, sorted; the table's CHECK (migrations 0010, 0014) lists the same.
SCOPES = ("admin", "paid-generator", "read")
_PREFIX = "rlk_"
_SHAPE = re.compile(r"rlk_[A-Za-z0-9_-]{43}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


@dataclass(frozen=True)
class TokenInfo:
    """A token as stored (never its secret)."""

    id: int
    name: str
    prefix: str
    scopes: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "prefix": self.prefix,
            "scopes": list(self.scopes),
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }


def token_sha256(token: str) -> str:
    """The stored form of a token: the hex sha256 of its UTF-8 text."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _info(row: dict[str, Any]) -> TokenInfo:
    return TokenInfo(
        id=int(row["id"]),
        name=row["name"],
        prefix=row["prefix"],
        scopes=tuple(sorted(row["scopes"])),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )


def create_token(db: Database, name: str, scopes: Sequence[str]) -> tuple[TokenInfo, str]:
    """A new token named ``name`` with ``scopes``; returns its record and the secret (shown once)."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"token name {name!r} is not a name: use 1-64 letters, digits and . _ @ -, starting with a letter "
            "or digit (e.g. 'ci-agent')."
        )
    wanted = sorted(set(scopes))
    unknown = [s for s in wanted if s not in SCOPES]
    if unknown:
        raise ConfigError(f"unknown token scope {unknown[0]!r}; use {' and/or '.join(SCOPES)} (--scope, repeatable).")
    if not wanted:
        raise ConfigError(f"a token needs at least one scope; use {' and/or '.join(SCOPES)} (--scope, repeatable).")
    secret = _PREFIX + secrets.token_urlsafe(32)
    try:
        row = db.fetchone(
            "INSERT INTO ranklock.api_tokens (name, prefix, secret_sha256, scopes) VALUES (%s, %s, %s, %s) "
            "RETURNING id, name, prefix, scopes, created_at, revoked_at",
            [name, secret[:10], token_sha256(secret), wanted],
        )
    except psycopg.errors.UniqueViolation:
        raise ConfigError(
            f"a live token named {name!r} exists already; revoke it first (`ranklock token revoke {name}`) "
            "or choose another name."
        ) from None
    if row is None:  # INSERT ... RETURNING always returns the row
        raise RuntimeError("INSERT returned no row")
    return _info(row), secret


def list_tokens(db: Database) -> list[TokenInfo]:
    """Every token, live and revoked, oldest first."""
    rows = db.fetchall("SELECT id, name, prefix, scopes, created_at, revoked_at FROM ranklock.api_tokens ORDER BY id")
    return [_info(r) for r in rows]


def revoke_token(db: Database, which: str) -> TokenInfo:
    """Revoke the live token named ``which`` (or with id ``which``); takes effect on the server's next request."""
    by_id = which.isdigit()
    row = db.fetchone(
        "UPDATE ranklock.api_tokens SET revoked_at = now() WHERE revoked_at IS NULL AND "
        + ("id = %s" if by_id else "name = %s")
        + " RETURNING id, name, prefix, scopes, created_at, revoked_at",
        [int(which) if by_id else which],
    )
    if row is None:
        live = sorted(t.name for t in list_tokens(db) if t.revoked_at is None)
        raise NotFound(
            f"no live token {'with id' if by_id else 'named'} {which!r}; live tokens: "
            f"{', '.join(live) if live else 'none'} (`ranklock token list`)."
        )
    return _info(row)


def verify_token_steps(token: str) -> Steps[TokenInfo]:
    """The live token ``token`` is, or :class:`Unauthorized` saying why not (malformed, unknown, revoked)."""
    if not _SHAPE.fullmatch(token):
        raise Unauthorized(
            "the bearer token is malformed (a ranklock token is rlk_ and 43 characters); send "
            "`Authorization: Bearer <token>` with a token from `ranklock token create`."
        )
    rows = yield Fetch(
        "SELECT id, name, prefix, scopes, created_at, revoked_at FROM ranklock.api_tokens WHERE secret_sha256 = %s",
        [token_sha256(token)],
        primary=True,
    )
    if not rows:
        raise Unauthorized("the bearer token is not one this server issued; ask its operator for a token.")
    info = _info(rows[0])
    if info.revoked_at is not None:
        raise Unauthorized(
            f"the bearer token {info.prefix}… ({info.name!r}) was revoked at {info.revoked_at.isoformat()}; "
            "ask the server's operator for a new one."
        )
    return info
