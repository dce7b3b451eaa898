"""The HTTP API and the search page: a thin shell over :class:`ranklock.Engine`."""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
