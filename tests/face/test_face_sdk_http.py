"""``/mcp`` on the daemon's TCP API driven by the official Python SDK client (``mcp`` 2.x):
2026-07-28 (tools with progress, ``subscriptions/listen``) and the 2025 era over Streamable
HTTP (``resources/subscribe`` with the session's GET stream), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import socket
import warnings
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated

from tests.support.daemon import Daemon

DOC = "test://face/doc"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def put(lab: Any, uri: str, text: str) -> None:
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": text}).raise_for_status()


def tcp_daemon(daemon_factory: Any, **env: str) -> Daemon:
    d: Daemon = daemon_factory(
        env={
            "MCPSUB_API": f"tcp://127.0.0.1:{free_port()}",
            "MCPSUB_AGENT_PROGRESS_S": "0.2",
            **env,
        }
    )
    return d


def sdk_client(d: Daemon, mode: str, **kwargs: Any) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {d.token}"}, timeout=httpx2.Timeout(30, read=60)
    )
    transport = streamable_http_client(f"{d.tcp_url}/mcp", http_client=http)
    return Client(transport, mode=mode, **kwargs)  # type: ignore[arg-type]


def test_sdk_http_both_eras(
    lab_server_factory: Any, daemon_factory: Any, database_url: str
) -> None:
    """One daemon on TCP: the API guard on ``/mcp``; a 2025-era session that subscribes on a
    server nobody subscribed to before (the daemon's ``agent_allowed_origins`` names it) and
    gets ``resources/subscribe`` updates on its GET stream; then 2026-07-28: tools with
    progress, resources, and a listen with updates and ``list_changed``."""
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    put(lab, DOC, "one\n")
    d = tcp_daemon(daemon_factory, MCPSUB_AGENT_ALLOWED_ORIGINS=lab.base_url)

    url = f"{d.tcp_url}/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    assert httpx.post(url, json=body).status_code == 401
    headers = {"Authorization": f"Bearer {d.token}"}
    evil = httpx.post(url, json=body, headers={**headers, "Origin": "http://evil.example"})
    assert evil.status_code == 403
    rebound = httpx.post(url, json=body, headers={**headers, "Host": "evil.example"})
    assert rebound.status_code == 421

    got = asyncio.Event()
    seen: list[str] = []
    progress: list[float] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            seen.append(str(root.params.uri))
            got.set()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def legacy() -> None:
        warnings.simplefilter("ignore")
        async with sdk_client(d, "legacy", message_handler=on_message) as client:
            assert client.protocol_version == "2025-11-25"
            added = await client.call_tool("subscribe", {"url": lab.url, "uri": DOC})
            assert not added.is_error, added
            assert added.structured_content["subscriptions"][0]["revision"] == 1
            await client.subscribe_resource(DOC)
            put(lab, DOC, "one\ntwo\n")
            await asyncio.wait_for(got.wait(), 20)
            assert seen == [DOC]
            listing = await client.call_tool("list_subscriptions", {})
            assert listing.structured_content["subscriptions"][0]["revision"] == 2

    async def modern() -> None:
        async with sdk_client(d, "2026-07-28") as client:
            assert client.protocol_version == "2026-07-28"
            read = await client.call_tool("read", {"uri": DOC})
            assert read.structured_content["text"] == "one\ntwo\n"
            cursor = read.structured_content["eventId"]
            quiet = await client.call_tool(
                "wait_for_change",
                {"after": cursor, "timeoutSeconds": 1},
                progress_callback=on_progress,
            )
            assert quiet.structured_content["changed"] is False
            assert len(progress) >= 2 and progress == sorted(progress)
            resources = (await client.list_resources()).resources
            assert [str(r.uri) for r in resources] == [DOC]
            async with client.listen(
                resource_subscriptions=[DOC], resources_list_changed=True
            ) as sub:
                assert list(sub.honored.resource_subscriptions or []) == [DOC]
                put(lab, DOC, "one\ntwo\nthree\n")
                events = aiter(sub)
                first = await asyncio.wait_for(anext(events), 20)
                assert isinstance(first, ResourceUpdated) and first.uri == DOC
                contents = await client.read_resource(DOC)
                assert contents.contents[0].text == "one\ntwo\nthree\n"
                other = "test://face/other"
                put(lab, other, "x\n")
                added = await client.call_tool("subscribe", {"url": lab.url, "uri": other})
                assert not added.is_error, added
                while not isinstance(
                    nxt := await asyncio.wait_for(anext(events), 20), ResourcesListChanged
                ):
                    pass
                assert isinstance(nxt, ResourcesListChanged)

    asyncio.run(legacy())
    asyncio.run(modern())
