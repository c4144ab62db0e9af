"""Fixtures shared by the unit tests of the application layer and the face."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.fakes import FakeSupervisor, make_supervisor


@pytest.fixture
async def fake_supervisor(tmp_path: Path) -> AsyncIterator[FakeSupervisor]:
    """The API tests' fake supervisor over a real migrated SQLite store in ``tmp_path``."""
    sup = await make_supervisor(tmp_path / "state.db")
    try:
        yield sup
    finally:
        await sup.store.close()
