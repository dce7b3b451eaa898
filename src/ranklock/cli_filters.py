"""CLI commands for the filters area, registered on :data:`ranklock.cli.app`."""

from __future__ import annotations
