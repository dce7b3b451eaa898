"""CLI commands for the eval area, registered on :data:`ranklock.cli.app`."""

from __future__ import annotations
