"""The official MCP Python SDK client doing the subscriber's job, for side-by-side benches.

``python -m bench.sdk_subscriber URL URI...``: ``Client(url)`` (2026-07-28, discover first),
one ``client.listen(resource_subscriptions=URIs)``, and for every ``ResourceUpdated`` a
``client.read_resource(uri, cache_mode="bypass")`` (a fresh read, as a subscriber must do).
Prints ``ready`` once the listen is acknowledged and the count of reads when it stops
(SIGTERM, or stdin closing).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from mcp import Client
from mcp.client.subscriptions import ResourceUpdated


async def follow(url: str, uris: list[str]) -> int:
    reads = 0
    async with Client(url) as client, client.listen(resource_subscriptions=uris) as sub:
        print("ready", flush=True)
        async for event in sub:
            if isinstance(event, ResourceUpdated):
                await client.read_resource(event.uri, cache_mode="bypass")
                reads += 1
    return reads


async def main_async(url: str, uris: list[str]) -> None:
    loop = asyncio.get_running_loop()
    task = loop.create_task(follow(url, uris))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    loop.add_reader(sys.stdin.fileno(), lambda: task.cancel() if not sys.stdin.read(1) else None)
    with contextlib.suppress(asyncio.CancelledError):
        await task


if __name__ == "__main__":
    asyncio.run(main_async(sys.argv[1], sys.argv[2:]))
