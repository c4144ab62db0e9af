"""Alembic migrations for the daemon's database; applied by ``mcpsubd`` on start."""
