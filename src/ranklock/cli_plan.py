"""CLI commands for the plan area, registered on :data:`ranklock.cli.app`."""

from __future__ import annotations
