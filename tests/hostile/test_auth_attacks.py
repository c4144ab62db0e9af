"""OAuth discovery against a hostile server: bombs and deep JSON are refused, not inflated.

The authorization metadata a CLI or the daemon fetches comes from whatever the MCP server
names, so it gets the same bounds as MCP answers (compression bombs, deep JSON).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from service.auth.oauth import protected_resource_metadata
from service.mcp.coding import BadContentEncoding, BodyTooLarge
from tests.support.hostile import HostileServer

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    server = HostileServer().start()
    yield server
    server.stop()


async def test_metadata_behind_stacked_gzip_is_refused(hostile: HostileServer) -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(BadContentEncoding, match="stacked"):
            await protected_resource_metadata(client, hostile.url("bomb"))


async def test_metadata_inflating_past_the_limit_is_refused(hostile: HostileServer) -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(BodyTooLarge, match="1048576"):
            await protected_resource_metadata(client, hostile.url("bomb1"))


async def test_deep_metadata_is_no_metadata(hostile: HostileServer) -> None:
    async with httpx.AsyncClient() as client:
        assert await protected_resource_metadata(client, hostile.url("deep-read")) is None
