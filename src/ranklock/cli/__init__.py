"""The ``ranklock`` command line: a thin shell over :class:`ranklock.Engine`.

Each command builds an engine, calls one method, and prints a readable table
or (``--json``) one stable JSON object.  Domain errors become a one-paragraph
message on stderr and exit code 2; nothing here knows SQL.

This file is what the ``ranklock`` entry point imports, so it imports nothing but the
standard library: :func:`main` first offers ``ranklock search`` to the command service of
the data directory (ranklock.cli.client), a process that has the CLI imported already, and
imports the Typer app (ranklock.cli.root: typer, rich, the engine) only when that service
cannot run it.  ``app`` is that Typer app, imported on first use (PEP 562).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .root import app

__all__ = ["app", "main"]


def main() -> None:
    """The ``ranklock`` command: through the command service when it can run it, else in this process."""
    from .client import run_served

    code = run_served(sys.argv)
    if code is not None:
        sys.exit(code)
    from .root import app

    app()


def __getattr__(name: str) -> Any:
    if name == "app":
        from .root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
