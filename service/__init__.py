"""mcpsub's engine: the MCP 2026-07-28 client, and (later) the daemon built on it."""

from service._version import __version__

__all__ = ["__version__"]
