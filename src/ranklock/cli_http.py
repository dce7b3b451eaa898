"""CLI commands for the http area, registered on :data:`ranklock.cli.app`."""

from __future__ import annotations
