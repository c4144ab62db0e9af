"""Fixtures shared by every test: real lab servers and real CLI subprocesses."""

from tests.support.lab import lab_server, lab_server_factory  # noqa: F401
