"""The root Typer app: every command module's commands merged into one ``ranklock`` command.

Importing it imports typer, rich and every command module (bench/cli_startup.py times it), so the
``ranklock`` entry point (``ranklock.cli.main``) imports it only when the command service
(ranklock.cli.service) cannot run the command.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer._click.exceptions import ClickException
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
from ._common import fail, json_errors
from .client import wants_json


class _RootGroup(TyperGroup):
    """Lists commands before groups, each in registration order, as the one-module CLI did; and says a
    usage error of a command asked for JSON as JSON (ranklock.cli._common.fail)."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return [n for n in names if not hasattr(self.commands[n], "commands")] + [
            n for n in names if hasattr(self.commands[n], "commands")
        ]

    def main(self, args: Sequence[str] | None = None, *rest: Any, **kwargs: Any) -> Any:
        token = json_errors.set(wants_json(list(sys.argv[1:] if args is None else args)))
        try:
            return super().main(args, *rest, **kwargs)
        finally:
            json_errors.reset(token)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except ClickException as exc:
            raise _usage_error(exc, info_name or "ranklock") from None

    def invoke(self, ctx: Any) -> Any:
        # Every subcommand's arguments are parsed in here: click's usage errors ("no such option", a
        # missing argument, a bad value) come out of this call.
        try:
            return super().invoke(ctx)
        except ClickException as exc:
            raise _usage_error(exc, ctx.command_path) from None


def _usage_error(exc: ClickException, where: str) -> Exception:
    """``exc`` as it stands (click prints it) or, for a command asked for JSON, the JSON error's exit."""
    if not json_errors.get():
        return exc
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else where
    return fail(f"{exc.format_message().rstrip('.')}; `{path} --help` says what it takes.", etype="UsageError")


app = typer.Typer(
    cls=_RootGroup,
    name="ranklock",
    help="Deterministic hybrid retrieval on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(given: bool) -> None:
    if given:
        from .._version import __version__

        print(f"ranklock {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """Deterministic hybrid retrieval on PostgreSQL."""


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
