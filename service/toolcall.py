"""One ``tools/call``, start to finish, under a single deadline.

The deadline covers discovery and the call together: a server that accepts TCP and never
answers must fail in about the requested time, not after a library default (seed #112).
"""

from __future__ import annotations

import asyncio
from typing import Any

from service.mcp.client import McpClient
from service.mcp.errors import TransportError


async def call_tool_once(
    url: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    token: str | None,
    timeout_s: float,
    client_name: str = "mcpsub",
    ca_cert: str | None = None,
) -> dict[str, Any]:
    async with McpClient(
        url, token=token, client_name=client_name, ca_cert=ca_cert, timeout=timeout_s
    ) as client:
        try:
            async with asyncio.timeout(timeout_s):
                await client.discover()
                return await client.call_tool(tool, arguments)
        except TimeoutError as exc:
            raise TransportError(
                f"no answer from {url} within {timeout_s * 1000:.0f} ms", kind="timeout"
            ) from exc
