"""Peer check: the official MCP Python SDK 2.x client against our lab server.

If the SDK and the lab disagree, one of them is wrong about 2026-07-28; this test is where
we find out (see docs/labserver.md, "Interoperability").
"""

import asyncio

import anyio
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated

from tests.support.lab import LabServer

REVIEW = "test://review/status"


def _text(result: object) -> str:
    contents = result.contents  # type: ignore[attr-defined]
    text: str = contents[0].text
    return text


async def _probe(url: str) -> tuple[str, str, list[str], list[str], str]:
    async with Client(url) as client:  # mode="auto": probes server/discover first
        info = client.server_info
        assert info is not None
        listed = await client.list_resources()
        before = _text(await client.read_resource(REVIEW))
        async with client.listen(resource_subscriptions=[REVIEW]) as sub:
            honored = list(sub.honored.resource_subscriptions or [])
            with anyio.fail_after(5):
                async for event in sub:
                    assert isinstance(event, ResourceUpdated)
                    assert event.uri == REVIEW
                    break
            after = _text(await client.read_resource(REVIEW))
        return info.name, before, [str(r.uri) for r in listed.resources], honored, after


def test_sdk_client_discovers_lists_listens_and_rereads(lab_server: LabServer) -> None:
    lab_server.configure(updateDelaySeconds=0.2)
    name, before, uris, honored, after = asyncio.run(_probe(lab_server.url))
    assert name == "mcp-resource-subscribe-test"
    assert REVIEW in uris
    assert before.startswith("status: pending\nversion: 1\n")
    assert honored == [REVIEW]
    assert after.startswith("status: reviewed\nversion: 2\n")
    # mcp.request entries (who sent what, for the verdicts) precede each request's own events.
    events = [e["event"] for e in lab_server.log() if e["event"] != "mcp.request"]
    assert events[0] == "discover"
    assert events.index("listen.acknowledged") < events.index("notification.sent")
