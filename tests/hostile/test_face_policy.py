"""The agent face's unsubscribe against a real daemon, through ``mcpsubctl mcp`` (stdio) and
``/mcp`` (HTTP), both backends: what a resource's text could ask an agent to remove.

``unsubscribe`` through the face is limited as ``subscribe`` is: it must not remove a
person's subscription, with its revisions and deliveries."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from service.daemon.config import ConfigError, load_settings
from service.face import protocol as p
from tests.face.stdio_peer import StdioPeer
from tests.hostile.helpers import put, subscribe, wait_text
from tests.support.daemon import Daemon
from tests.support.poll import until

META = {p.META_VERSION: p.MODERN, p.META_CAPS: {}}


class Stdio:
    """One ``mcpsubctl mcp`` session: ``tool(name, **arguments)`` → the call's result."""

    def __init__(self, d: Daemon) -> None:
        self.peer = StdioPeer(d.state_dir)
        self.peer.request(0, "initialize", {"protocolVersion": "2025-03-26"})
        self.peer.answer(0)
        self.ids = 0

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        self.ids += 1
        self.peer.request(self.ids, "tools/call", {"name": name, "arguments": arguments})
        result: dict[str, Any] = self.peer.answer(self.ids)["result"]
        return result


def http_tool(d: Daemon, name: str, **arguments: Any) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": META},
    }
    headers = {"MCP-Protocol-Version": p.MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    answer = d.api("POST", "/mcp", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


def test_an_agent_cannot_remove_what_a_person_watches(
    database_url: str, daemon_factory: Any, lab_server_factory: Any
) -> None:
    lab = lab_server_factory()
    for uri in ("test://person/doc", "test://agent/stdio", "test://agent/http"):
        put(lab, uri, f"text of {uri}")
    d: Daemon = daemon_factory()
    person = subscribe(d, lab.url, "test://person/doc")  # what `mcpsubctl subscribe` does
    assert person["createdBy"] == "person"
    wait_text(d, "test://person/doc", "text of test://person/doc")
    stdio = Stdio(d)
    try:
        made = stdio.tool("subscribe", url=lab.url, uris=["test://agent/stdio"])
        assert made["isError"] is False, made
        by_stdio = made["structuredContent"]["subscriptions"][0]
        made = http_tool(d, "subscribe", url=lab.url, uris=["test://agent/http"])
        assert made["isError"] is False, made
        by_http = made["structuredContent"]["subscriptions"][0]
        assert by_stdio["createdBy"] == by_http["createdBy"] == "agent"

        for call in (stdio.tool, lambda name, **a: http_tool(d, name, **a)):
            listed = call("list_subscriptions")
            creators = {
                row["uri"]: row["createdBy"] for row in listed["structuredContent"]["subscriptions"]
            }
            assert creators == {
                "test://person/doc": "person",
                "test://agent/stdio": "agent",
                "test://agent/http": "agent",
            }
            text = listed["content"][0]["text"]
            assert "made by a person" in text and "made by an agent" in text
            refused = call("unsubscribe", uri="test://person/doc")
            assert refused["isError"] is True, refused
            error = refused["structuredContent"]
            assert error["errorCode"] == "NOT_CREATED_BY_AGENT", error
            assert error["hint"] == f"ask the person to run `mcpsubctl unsubscribe {person['id']}`"
        # Still there, with its revision; nothing was deleted.
        assert d.api("GET", f"/v1/subscriptions/{person['id']}").json()["revision"] == 1
        assert not d.api("GET", "/v1/events", params={"type": "subscription.deleted"}).json()[
            "events"
        ]
        # An agent removes what an agent made, on either transport.
        assert stdio.tool("unsubscribe", uri="test://agent/http")["isError"] is False
        assert http_tool(d, "unsubscribe", uri="test://agent/stdio")["isError"] is False
    finally:
        stdio.peer.close()
    assert d.api("GET", "/v1/subscriptions").json()["subscriptions"][0]["id"] == person["id"]
    # The CLI shows who made each.
    listed = d.ctl("--json", "list")
    assert listed.code == 0, listed
    assert json.loads(listed.stdout)["subscriptions"][0]["createdBy"] == "person", listed


def test_a_person_who_subscribes_to_what_an_agent_made_takes_it_over(
    database_url: str, daemon_factory: Any, lab_server_factory: Any
) -> None:
    """Before: the subscription stayed ``agent``'s, so a prompt-injected agent could still
    remove a URI the person had explicitly asked to watch."""
    lab = lab_server_factory()
    put(lab, "test://shared/doc", "v1")
    put(lab, "test://shared/other", "v1")
    d: Daemon = daemon_factory()
    subscribe(d, lab.url, "test://shared/other")  # the person allows the server's origin
    made = http_tool(d, "subscribe", url=lab.url, uris=["test://shared/doc"])
    assert made["structuredContent"]["subscriptions"][0]["createdBy"] == "agent", made
    person = subscribe(d, lab.url, "test://shared/doc")
    assert person["createdBy"] == "person", person
    refused = http_tool(d, "unsubscribe", uri="test://shared/doc")
    assert refused["structuredContent"]["errorCode"] == "NOT_CREATED_BY_AGENT", refused
    assert d.api("GET", f"/v1/subscriptions/{person['id']}").status_code == 200
    # An agent asking again gives nothing back to the agents.
    again = http_tool(d, "subscribe", url=lab.url, uris=["test://shared/doc"])
    assert again["structuredContent"]["subscriptions"][0]["createdBy"] == "person", again


def test_the_daemon_can_let_agents_remove_anything(
    daemon_factory: Any, lab_server_factory: Any
) -> None:
    lab = lab_server_factory()
    put(lab, "test://person/any", "v1")
    d: Daemon = daemon_factory(env={"MCPSUB_AGENT_UNSUBSCRIBE": "any"})
    person = subscribe(d, lab.url, "test://person/any")
    stdio = Stdio(d)
    try:
        removed = stdio.tool("unsubscribe", uri="test://person/any")
        assert removed["isError"] is False, removed
        assert removed["structuredContent"]["removed"]["id"] == person["id"]
    finally:
        stdio.peer.close()


def test_the_console_listener_serves_the_configured_agent_policy(
    daemon_factory: Any, lab_server_factory: Any
) -> None:
    """The loopback TCP listener ``mcpsubctl ui`` opens on a unix-socket daemon serves the
    daemon's one app: its ``/mcp`` applies ``agent_unsubscribe`` as the socket's does."""
    lab = lab_server_factory()
    put(lab, "test://person/console", "v1")
    d: Daemon = daemon_factory(env={"MCPSUB_AGENT_UNSUBSCRIBE": "any"})
    person = subscribe(d, lab.url, "test://person/console")
    opened = d.api("POST", "/v1/console/listener")
    assert opened.status_code == 201, opened.text
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "unsubscribe", "arguments": {"uri": "test://person/console"},
                   "_meta": META},
    }  # fmt: skip
    headers = {
        "MCP-Protocol-Version": p.MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "unsubscribe",
        "Authorization": f"Bearer {d.token}",
    }
    answer = httpx.post(opened.json()["url"] + "/mcp", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    removed = answer.json()["result"]
    assert removed["isError"] is False, removed
    assert removed["structuredContent"]["removed"]["id"] == person["id"]


def test_the_agent_unsubscribe_setting_takes_own_or_any() -> None:
    assert load_settings(env={}).agent_unsubscribe == "own"
    assert load_settings(env={"MCPSUB_AGENT_UNSUBSCRIBE": "any"}).agent_unsubscribe == "any"
    with pytest.raises(ConfigError, match="agent_unsubscribe: 'everything' is not one of own, any"):
        load_settings(env={"MCPSUB_AGENT_UNSUBSCRIBE": "everything"})


def test_an_agent_cannot_put_a_second_server_behind_a_persons_uri(
    daemon_factory: Any, lab_server_factory: Any
) -> None:
    """Before: an agent could subscribe the person's URI on another watched server, and the
    person's `mcpsubctl read --uri X` then returned that server's text (the newest read).
    Now the agent is refused, and where a person watches one URI on two servers, `read` and
    `wait` say so and take `--server URL|ID`; `tail --server` keeps to one."""
    ours, other = lab_server_factory(), lab_server_factory()
    put(ours, "test://x", "the person's server")
    put(other, "test://x", "the agent's choice")
    put(other, "test://y", "elsewhere")
    d: Daemon = daemon_factory()
    mine = subscribe(d, ours.url, "test://x")
    subscribe(d, other.url, "test://y")  # the agents may use this server's origin
    wait_text(d, "test://x", "the person's server")
    stdio = Stdio(d)
    try:
        refused = stdio.tool("subscribe", url=other.url, uris=["test://x"])
    finally:
        stdio.peer.close()
    assert refused["isError"] is True, refused
    error = refused["structuredContent"]
    assert error["errorCode"] == "URI_WATCHED_ELSEWHERE" and ours.url in error["message"]
    direct = d.api("POST", "/v1/agent/subscriptions", json={"url": other.url, "uris": ["test://x"]})
    assert direct.status_code == 403 and direct.json()["errorCode"] == "URI_WATCHED_ELSEWHERE"
    watchers = d.api("GET", "/v1/subscriptions", params={"pattern": "test://x"}).json()
    assert [s["serverUrl"] for s in watchers["subscriptions"]] == [ours.url]
    read = d.ctl("read", "--uri", "test://x")
    assert (read.code, read.stdout) == (0, "the person's server\n"), read

    # A person may watch it on both; then nothing is picked silently.
    theirs = subscribe(d, other.url, "test://x")

    def text_on(server: str) -> str:
        return d.ctl("read", "--uri", "test://x", "--server", server).stdout

    until("the second server read", lambda: text_on(other.url) == "the agent's choice\n", 20)
    ambiguous = d.ctl("read", "--uri", "test://x")
    assert ambiguous.code == 2 and "AMBIGUOUS_URI" in ambiguous.stdout, ambiguous
    assert ours.url in ambiguous.stderr and other.url in ambiguous.stderr
    assert f"id {mine['serverId']}" in ambiguous.stderr and "--server" in ambiguous.stderr
    waited = d.ctl("wait", "--uri", "test://x", "--timeout-ms", "1")
    assert waited.code == 2 and "AMBIGUOUS_URI" in waited.stdout, waited
    assert text_on(str(mine["serverId"])) == "the person's server\n"

    # One change on each server, in this order; --server keeps to the one named.
    start = str(d.api("GET", "/v1/status").json()["lastEventId"])
    put(ours, "test://x", "ours, changed")
    until("ours changed", lambda: text_on(ours.url) == "ours, changed\n", 20)
    put(other, "test://x", "theirs, changed")
    until("theirs changed", lambda: text_on(other.url) == "theirs, changed\n", 20)
    server = str(theirs["serverId"])
    tail = d.ctl("tail", "--uri", "test://x", "--server", server, "--after", start,
                 "--max-events", "1")  # fmt: skip
    assert tail.code == 0 and f"server={other.url}" in tail.stdout, tail
    waited = d.ctl("wait", "--uri", "test://x", "--server", server, "--after", start, "--json")
    assert waited.code == 0 and "theirs, changed" in waited.stdout, waited
    assert "ours, changed" not in waited.stdout
