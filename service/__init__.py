"""mcpsub's engine: the MCP 2026-07-28 client, and (later) the daemon built on it."""

from service._version import __version__

__all__ = ["__version__"]

DISTRIBUTION = "mcpsub"
"""Checked at start-up by ``mcpsub_start``: this package is mcpsub's, not another of the same name."""
