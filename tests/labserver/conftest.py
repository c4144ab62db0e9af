"""Lab server fixtures for this package (``tests/conftest.py`` may also register them)."""

from tests.support.lab import lab_server, lab_server_factory  # noqa: F401
