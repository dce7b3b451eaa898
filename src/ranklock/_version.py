"""The package version: a leaf, so modules below the facade can read it without importing ``ranklock``."""

__version__ = "0.1.0"
