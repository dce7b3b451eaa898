"""The root Typer app: every command module's commands merged into one ``ranklock`` command.

Importing it imports typer, rich and every command module (bench/cli_startup.py times it), so the
``ranklock`` entry point (``ranklock.cli.main``) imports it only when the command service
(ranklock.cli.service) cannot run the command.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from . import (
    ask,
    collection,
    db,
    demo,
    documents,
    eval,
    ingest,
    log,
    mcp,
    plan,
    replica,
    search,
    serve,
    snapshot,
    token,
)


class _RootGroup(TyperGroup):
    """Lists commands before groups, each in registration order, as the one-module CLI did."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return [n for n in names if not hasattr(self.commands[n], "commands")] + [
            n for n in names if hasattr(self.commands[n], "commands")
        ]


app = typer.Typer(
    cls=_RootGroup,
    name="ranklock",
    help="Deterministic hybrid retrieval on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# One registration mechanism: every command module has its own Typer `app`, merged into the root
# (add_typer without a name merges its commands and groups), in the order they were added before.
for _module in (
    db,
    ingest,
    documents,
    search,
    demo,
    ask,
    eval,
    collection,
    serve,
    log,
    mcp,
    plan,
    replica,
    snapshot,
    token,
):
    app.add_typer(_module.app)

__all__ = ["app"]
