"""``mcpsubctl mcp`` driven by the official Python SDK client (``mcp`` 2.x) over stdio in a
2025 era: tools, resources and ``resources/subscribe``, on a real daemon and lab server, on
SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from service.face import protocol as p
from tests.face.stdio_peer import StdioPeer
from tests.support.cli import BIN
from tests.support.daemon import Daemon

DOC = "test://face/doc"
META = {"_meta": {p.META_VERSION: p.MODERN, p.META_CAPS: {}}}


def stdio_params(d: Daemon, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "mcpsubctl"),
        args=["mcp", *extra],
        env={"MCPSUB_STATE_DIR": str(d.state_dir), "PATH": str(BIN)},
    )


def put(lab: Any, uri: str, text: str) -> None:
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": text}).raise_for_status()


def test_sdk_stdio_tools_resources_and_subscribe(
    lab_server_factory: Any, daemon_factory: Any, database_url: str, tmp_path: Path
) -> None:
    lab = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"})
    put(lab, DOC, "line one\n")
    d = daemon_factory()
    assert d.ctl("subscribe", "--url", lab.url, "--uri", DOC, "--json").code == 0

    updates: list[str] = []
    got_update = asyncio.Event()
    list_changes: list[int] = []
    got_list_change = asyncio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updates.append(str(root.params.uri))
            got_update.set()
        if getattr(root, "method", None) == "notifications/resources/list_changed":
            list_changes.append(1)
            got_list_change.set()

    async def scenario() -> None:
        warnings.simplefilter("ignore")
        async with Client(stdio_params(d), mode="legacy", message_handler=on_message) as client:
            assert client.protocol_version == "2025-11-25"
            caps = client.server_capabilities
            assert caps.resources is not None and caps.resources.subscribe is True
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {
                "subscribe", "unsubscribe", "list_subscriptions", "read",
                "wait_for_change", "changes_since",
            }  # fmt: skip
            listing = await client.call_tool("list_subscriptions", {})
            (row,) = listing.structured_content["subscriptions"]
            assert (row["uri"], row["state"], row["revision"]) == (DOC, "active", 1)
            assert row["link"]["state"] == "open"

            read = await client.call_tool("read", {"uri": DOC})
            assert read.structured_content["text"] == "line one\n"
            cursor = read.structured_content["eventId"]
            assert "line one" in read.content[0].text

            resources = (await client.list_resources()).resources
            assert [str(r.uri) for r in resources] == [DOC]
            contents = await client.read_resource(DOC)
            assert contents.contents[0].text == "line one\n"
            assert contents.meta["mcpsub/revision"] == 1

            await client.subscribe_resource(DOC)
            put(lab, DOC, "line one\nline two\n")
            await asyncio.wait_for(got_update.wait(), 20)
            assert updates == [DOC]

            change = await client.call_tool(
                "wait_for_change", {"uri": "test://face/*", "after": cursor, "timeoutSeconds": 20}
            )
            body = change.structured_content
            assert body["changed"] is True and body["revision"] == 2
            assert (body["initialText"], body["finalText"]) == (
                "line one\n",
                "line one\nline two\n",
            )
            assert "+line two" in body["diff"]
            quiet = await client.call_tool(
                "wait_for_change", {"after": body["cursor"], "timeoutSeconds": 0.3}
            )
            assert quiet.structured_content["changed"] is False
            assert quiet.structured_content["cursor"] >= body["cursor"]

            since = await client.call_tool("changes_since", {"after": cursor})
            events = since.structured_content["events"]
            # (a subscription.state event of the link's acknowledgement may come in between)
            revisions = [e["revision"] for e in events if e["type"] == "resource.updated"]
            assert revisions == [2]

            refused = await client.call_tool(
                "subscribe", {"url": "http://127.0.0.1:9/mcp", "uri": "test://x"}
            )
            assert refused.is_error
            assert refused.structured_content["errorCode"] == "AGENT_ORIGIN_NOT_ALLOWED"
            assert "agent_allowed_origins" in refused.structured_content["hint"]

            other = "test://face/other"
            put(lab, other, "other\n")
            added = await client.call_tool("subscribe", {"url": lab.url, "uri": [other]})
            assert not added.is_error, added
            (sub,) = added.structured_content["subscriptions"]
            assert (sub["state"], sub["revision"]) == ("active", 1)
            await asyncio.wait_for(got_list_change.wait(), 20)  # a subscription came
            got_list_change.clear()
            gone = await client.call_tool("unsubscribe", {"uri": other})
            assert not gone.is_error, gone
            await asyncio.wait_for(got_list_change.wait(), 20)  # and went

            missing = await client.call_tool(
                "subscribe", {"url": lab.url, "uri": "test://face/nope"}
            )
            assert missing.is_error
            assert missing.structured_content["errorCode"] == "RESOURCE_NOT_FOUND"
            assert "probe" in missing.structured_content["hint"]

    asyncio.run(scenario())
    channel_and_listen(lab, d)


def channel_and_listen(lab: Any, d: Daemon) -> None:
    """The same daemon through raw JSON-RPC: a 2026-07-28 listen on stdio, and Claude Code
    channel messages (escaped) from ``--channel``, which speaks only the 2025 handshake era
    (Claude Code drops channels on a 2026-07-28 connection; the agent lab shows it)."""
    peer = StdioPeer(d.state_dir)
    try:
        peer.request(1, "server/discover", META)
        discover = peer.answer(1)["result"]
        assert discover["supportedVersions"] == [p.MODERN]
        assert "experimental" not in discover["capabilities"]
        peer.request(
            "L", "subscriptions/listen", {**META, "notifications": {"resourceSubscriptions": [DOC]}}
        )
        ack = peer.until(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        assert ack["params"]["_meta"][p.META_SUBSCRIPTION] == "L"
        put(lab, DOC, "one\nevil \x1b]0;owned\x07 two\n")
        updated = peer.until(lambda m: m.get("method") == "notifications/resources/updated")
        assert updated["params"] == {"uri": DOC, "_meta": {p.META_SUBSCRIPTION: "L"}}
        peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}}
        )
        closed = peer.answer("L")
        assert closed["result"]["_meta"][p.META_SUBSCRIPTION] == "L"
        peer.request(2, "tools/call", {**META, "name": "read", "arguments": {"uri": DOC}})
        read = peer.answer(2)["result"]
        assert read["resultType"] == "complete" and read["structuredContent"]["revision"] == 3
        assert "\x1b" not in read["content"][0]["text"]
        assert read["structuredContent"]["text"].startswith("one\nevil \x1b]0;owned")
    finally:
        assert peer.close() == 0

    channel = StdioPeer(d.state_dir, "--channel")
    try:
        channel.request(1, "server/discover", META)
        refused = channel.answer(1)["error"]
        assert refused["code"] == p.METHOD_NOT_FOUND
        assert refused["data"]["supportedVersions"] == list(p.HANDSHAKE_VERSIONS)
        channel.request(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        init = channel.answer(2)["result"]
        assert init["protocolVersion"] == "2025-11-25"
        assert init["capabilities"]["experimental"] == {"claude/channel": {}}
        put(lab, DOC, "three\nevil \x1b]0;owned\x07 four\n")
        message = channel.until(lambda m: m.get("method") == "notifications/claude/channel")
        content = message["params"]["content"]
        assert "four" in content and "\x1b" not in content and "\x07" not in content
        assert message["params"]["meta"]["uri"] == DOC
        assert message["params"]["meta"]["revision"] == "4"
    finally:
        assert channel.close() == 0
