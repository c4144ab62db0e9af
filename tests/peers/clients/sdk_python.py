"""The official MCP Python SDK (``mcp`` 2.x) client through the lab's whole cycle.

discover (mode="auto"), list, read, listen, wait for the update, read again, close the
listen. Prints one JSON line: SDK version, texts before/after. Exit 0 only if it saw v2.
"""

import asyncio
import json
import sys
from importlib.metadata import version

import anyio
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated

REVIEW = "test://review/status"


def _text(result: object) -> str:
    return str(result.contents[0].text)  # type: ignore[attr-defined]


async def main(url: str) -> int:
    async with Client(url) as client:
        await client.list_resources()
        before = _text(await client.read_resource(REVIEW))
        async with client.listen(resource_subscriptions=[REVIEW]) as sub:
            with anyio.fail_after(15):
                async for event in sub:
                    if isinstance(event, ResourceUpdated) and event.uri == REVIEW:
                        break
            after = _text(await client.read_resource(REVIEW))
    print(json.dumps({"sdk": "mcp", "version": version("mcp"), "before": before, "after": after}))
    return 0 if "version: 2" in after else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
