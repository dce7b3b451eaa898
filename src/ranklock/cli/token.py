"""``ranklock token``: the API tokens ``ranklock serve`` requires beyond loopback (create, list, revoke)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ._common import DsnOpt, HomeOpt, JsonOpt, console, engine, print_json

#: This module's commands; cli/root.py merges them into the root app.
app = typer.Typer()

__all__ = ["token_app"]

token_app = typer.Typer(help="API tokens for `ranklock serve` (stored as sha256 hashes).", no_args_is_help=True)
app.add_typer(token_app, name="token")


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="A name for who uses the token (e.g. ci-agent).")],
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="read (search, ask, collections, documents), paid-generator (choose the openai Ask "
            "generator, billed to you) or admin (drop a collection over HTTP); repeatable. Default: read.",
        ),
    ] = None,
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a token and print it once: only its sha256 is stored, so it cannot be shown again."""
    with engine(dsn, home, creates=True) as eng:
        info, secret = eng.create_token(name, scope or ["read"])
    if as_json:
        print_json({**info.as_dict(), "token": secret})
        return
    console.print(f"token {info.name!r} (id {info.id}, scopes {', '.join(info.scopes)}):", highlight=False)
    console.print(secret, highlight=False, soft_wrap=True)
    console.print(
        "Send it as `Authorization: Bearer <token>`. It is shown only now; `ranklock token revoke "
        f"{info.name}` ends it.",
        highlight=False,
    )


@token_app.command("list")
def token_list(dsn: DsnOpt = None, home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Every token, live and revoked, with its first characters (never the secret)."""
    with engine(dsn, home) as eng:
        tokens = eng.list_tokens()
    if as_json:
        print_json({"tokens": [t.as_dict() for t in tokens]})
        return
    table = Table("id", "name", "token", "scopes", "created", "revoked")
    for t in tokens:
        table.add_row(
            str(t.id),
            t.name,
            f"{t.prefix}…",
            ", ".join(t.scopes),
            t.created_at.isoformat(timespec="seconds"),
            t.revoked_at.isoformat(timespec="seconds") if t.revoked_at else "-",
        )
    console.print(table)


@token_app.command("revoke")
def token_revoke(
    which: Annotated[str, typer.Argument(help="The token's name or id.")],
    dsn: DsnOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a token: a running server refuses it from its next request."""
    with engine(dsn, home) as eng:
        info = eng.revoke_token(which)
    if as_json:
        print_json(info.as_dict())
        return
    console.print(f"revoked token {info.name!r} ({info.prefix}…, id {info.id})", highlight=False)
