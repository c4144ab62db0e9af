"""Fixtures shared by every test: real lab servers, real CLI subprocesses, both databases."""

from tests.support.lab import lab_server, lab_server_factory  # noqa: F401
from tests.support.postgres import (  # noqa: F401
    database_url,
    db_backend,
    pg_cluster,
    sqlite_template,
)
from tests.support.store import pg_pair, store  # noqa: F401
