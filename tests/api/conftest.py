"""In-process API fixtures: a real migrated SQLite store, a fake supervisor, httpx over ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from service.daemon.webapp import create_app
from tests.api.fakes import FakeSupervisor, make_supervisor, migrated_store
from tests.api.live import LiveApi


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Alembic run per session; every test gets a copy."""
    path = tmp_path_factory.mktemp("template") / "state.db"
    migrated_store(path)
    return path


@pytest.fixture
async def supervisor(tmp_path: Path, migrated_db: Path) -> AsyncIterator[FakeSupervisor]:
    sup = await make_supervisor(tmp_path / "state.db", migrated_db)
    try:
        yield sup
    finally:
        await sup.store.close()


@pytest.fixture
def app(supervisor: FakeSupervisor) -> FastAPI:
    return create_app(supervisor, supervisor.parts, token=None, keepalive_s=0.2)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        yield c


@pytest.fixture
def live(tmp_path: Path, migrated_db: Path) -> Iterator[LiveApi]:
    """The API on a real unix socket (0600) in tmp_path, served by uvicorn in a thread."""
    server = LiveApi(tmp_path / "state", migrated_db).start()
    try:
        yield server
    finally:
        server.stop()
