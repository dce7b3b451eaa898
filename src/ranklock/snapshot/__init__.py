"""Snapshots: build, manifest, activation."""
