from collections.abc import Iterator

import pytest

from tests.api.conftest import app, client, migrated_db, supervisor  # noqa: F401
from tests.support.daemon import daemon_factory  # noqa: F401
from tests.support.lab import LabServer
from tests.webhooks.helpers import SLOW_LAB


@pytest.fixture(scope="session")
def shared_lab() -> Iterator[LabServer]:
    """One lab server per worker; every test uses its own URIs on it (see ``uri``)."""
    lab = LabServer(SLOW_LAB).start()
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def uri(request: pytest.FixtureRequest) -> str:
    """A URI of this test only, so that tests sharing a lab server stay independent."""
    return f"test://trig/{request.node.name.replace('[', '-').rstrip(']')}"
