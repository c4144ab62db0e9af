"""Fixtures for the CLI end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.lab import LabServer


@pytest.fixture
def review_lab() -> Iterator[LabServer]:
    """A lab whose update comes 0.4 s after the listen opens.

    Long enough that the probe's pre-completion read (which follows the ack within a few
    milliseconds) still sees version 1, so the route is deterministically ``subscription``.
    """
    with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": "0.4"}) as server:
        yield server
