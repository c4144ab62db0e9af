"""The reference MCP 2026-07-28 lab server (``mcp-lab-server``)."""

DISTRIBUTION = "mcpsub"
"""Checked at start-up by ``mcpsub_start``: this package is mcpsub's, not another of the same name."""
