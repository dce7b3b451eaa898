"""CLI commands for the snapshot area, registered on :data:`ranklock.cli.app`."""

from __future__ import annotations
