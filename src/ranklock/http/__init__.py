"""The HTTP API and the search page: a thin shell over :class:`ranklock.Engine`."""

from __future__ import annotations

from .._extras import require

require("server", "fastapi", "the HTTP API")  # before .app imports it, so a missing extra says which

from .app import create_app  # noqa: E402

__all__ = ["create_app"]
