"""mcpsub's command-line front doors (argument parsing and output only)."""

DISTRIBUTION = "mcpsub"
"""Checked at start-up by ``mcpsub_start``: this package is mcpsub's, not another of the same name."""
