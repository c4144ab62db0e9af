"""Alembic migrations for the daemon's database; applied by ``mcpsubd`` on start."""

DISTRIBUTION = "mcpsub"
"""Checked at start-up by ``mcpsub_start``: this package is mcpsub's, not another of the same name."""
