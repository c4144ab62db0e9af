"""Triggers: the daemon's third fan-out, a program run on every matching revision."""
