"""``/mcp`` in-process over a real store (SQLite and PostgreSQL): one URI watched on two servers is named
apart (``mcpsub://<id>/<uri>``), read from the store by either name, and followed by its
own name on a listen; the agent policy can be widened by the daemon's setting."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.face import protocol as p
from tests.api.live import LiveApi
from tests.support.http import uds_client

ONE, TWO = "http://127.0.0.1:1/mcp", "http://127.0.0.1:2/mcp"
URI = "test://shared/doc"
MODERN = {"MCP-Protocol-Version": p.MODERN}
META = {"_meta": {p.META_VERSION: p.MODERN, p.META_CAPS: {}}}


@pytest.fixture
def live(tmp_path: Path, migrated_db: Path, database_url: str) -> Iterator[LiveApi]:
    """The API on a unix socket over the parametrized backend (SQLite, PostgreSQL)."""
    server = LiveApi(tmp_path / "state", migrated_db, database_url=database_url).start()
    try:
        yield server
    finally:
        server.stop()


def client(live: LiveApi) -> httpx.Client:
    return uds_client(
        str(live.socket_path),
        headers={"Accept": "application/json, text/event-stream", **MODERN},
        timeout=10,
    )


def call(c: httpx.Client, method: str, params: dict[str, Any], name: str | None = None) -> Any:
    headers = {"Mcp-Method": method, **({"Mcp-Name": name} if name else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, **META}}
    answer = c.post("/mcp", json=body, headers=headers).json()
    assert "result" in answer, answer
    return answer["result"]


def tool(c: httpx.Client, name: str, **arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = call(c, "tools/call", {"name": name, "arguments": arguments}, name)
    return result


def test_one_uri_on_two_servers_is_named_apart(live: LiveApi) -> None:
    one = live.call(lambda sup: sup.subscribe(ONE, URI))[0]
    two = live.call(lambda sup: sup.subscribe(TWO, URI))[0]
    live.call(lambda sup: sup.publish(one, "from one"))
    live.call(lambda sup: sup.publish(two, "from two"))
    scoped = {one.id: f"mcpsub://{one.id}/{URI}", two.id: f"mcpsub://{two.id}/{URI}"}
    with client(live) as c:
        listed = call(c, "resources/list", {})["resources"]
        assert [r["uri"] for r in listed] == [scoped[one.id], scoped[two.id]]
        assert {r["name"] for r in listed} == {URI}
        read = call(c, "resources/read", {"uri": scoped[one.id]}, scoped[one.id])
        assert read["contents"][0] == {
            "uri": scoped[one.id], "mimeType": "text/plain", "text": "from one",
        }  # fmt: skip
        assert read["_meta"]["mcpsub/serverUrl"] == ONE and read["cacheScope"] == "private"
        newest = tool(c, "read", uri=URI)["structuredContent"]
        assert (newest["text"], newest["uri"]) == ("from two", scoped[two.id])
        assert tool(c, "read", uri=URI, url=ONE)["structuredContent"]["text"] == "from one"
        ambiguous = tool(c, "unsubscribe", uri=URI)["structuredContent"]
        assert ambiguous["errorCode"] == "AMBIGUOUS_URI" and "mcpsub://" in ambiguous["hint"]

        listen = {
            "jsonrpc": "2.0",
            "id": "L",
            "method": "subscriptions/listen",
            "params": {**META, "notifications": {"resourceSubscriptions": [scoped[one.id]]}},
        }
        frames: list[dict[str, Any]] = []
        with c.stream(
            "POST", "/mcp", json=listen, headers={"Mcp-Method": "subscriptions/listen"}
        ) as stream:
            lines = stream.iter_lines()
            for line in lines:
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                    if len(frames) == 1:  # the ack: now change both
                        live.call(lambda sup: sup.publish(two, "two again"))
                        live.call(lambda sup: sup.publish(one, "one again"))
                    else:
                        break
        ack, updated = frames
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert updated == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": scoped[one.id], "_meta": {p.META_SUBSCRIPTION: "L"}},
        }
        # A person made both: the agent may not remove them until the daemon allows it.
        refused = tool(c, "unsubscribe", uri=scoped[two.id])
        assert refused["isError"] is True
        assert refused["structuredContent"]["errorCode"] == "NOT_CREATED_BY_AGENT"
        live.app.state.api.subscriptions.agent_unsubscribe = "any"
        removed = tool(c, "unsubscribe", uri=scoped[two.id])
        assert removed["isError"] is False
        assert [r["uri"] for r in call(c, "resources/list", {})["resources"]] == [URI]


def test_an_agent_removes_only_what_an_agent_made(live: LiveApi) -> None:
    """The face's unsubscribe must not remove a person's subscription, with its revisions and
    deliveries, at a prompt injection's request."""
    person = live.call(lambda sup: sup.subscribe(ONE, URI))[0]
    live.call(lambda sup: sup.publish(person, "the person's"))
    # What the face's subscribe does (the real daemon's is in tests/hostile/test_face_policy.py;
    # here no link ever reports a first state).
    agents = live.call(
        lambda sup: sup.subscribe_many(ONE, ["test://agent/own"], created_by="agent")
    )
    mine = {"id": agents[0][0].id}
    with client(live) as c:
        listed = tool(c, "list_subscriptions")
        rows = {r["id"]: r for r in listed["structuredContent"]["subscriptions"]}
        assert rows[person.id]["createdBy"] == "person" and rows[mine["id"]]["createdBy"] == "agent"
        text = listed["content"][0]["text"]
        assert "made by a person" in text and "made by an agent" in text
        refused = tool(c, "unsubscribe", uri=URI)
        assert refused["isError"] is True
        error = refused["structuredContent"]
        assert error["errorCode"] == "NOT_CREATED_BY_AGENT", error
        assert f"mcpsubctl unsubscribe {person.id}" in error["hint"]
        assert "error NOT_CREATED_BY_AGENT" in refused["content"][0]["text"]
        assert tool(c, "read", uri=URI)["structuredContent"]["text"] == "the person's"
        removed = tool(c, "unsubscribe", uri="test://agent/own")
        assert (
            removed["isError"] is False
            and removed["structuredContent"]["removed"]["id"] == (mine["id"])
        )
    api = httpx.Client(
        transport=httpx.HTTPTransport(uds=str(live.socket_path)), base_url="http://localhost"
    )
    with api:
        denied = api.delete(f"/v1/agent/subscriptions/{person.id}")
        assert denied.status_code == 403 and denied.json()["errorCode"] == "NOT_CREATED_BY_AGENT"
        assert api.delete("/v1/agent/subscriptions/999").status_code == 404
        assert api.get(f"/v1/subscriptions/{person.id}").json()["createdBy"] == "person"
        live.app.state.api.subscriptions.agent_unsubscribe = "any"
        assert api.delete(f"/v1/agent/subscriptions/{person.id}").status_code == 200


def test_the_agent_policy_follows_the_daemon_setting(live: LiveApi) -> None:
    with client(live) as c:
        refused = tool(c, "subscribe", url=ONE, uri=URI)
        assert refused["isError"] and refused["structuredContent"]["errorCode"] == (
            "AGENT_ORIGIN_NOT_ALLOWED"
        )
        live.app.state.api.subscriptions.agent_origins = ("http://127.0.0.1:1",)
        refused_two = tool(c, "subscribe", url=TWO, uri=URI)["structuredContent"]
        assert refused_two["errorCode"] == "AGENT_ORIGIN_NOT_ALLOWED"
        assert "agent_allowed_origins" in refused_two["message"]
    api = httpx.Client(
        transport=httpx.HTTPTransport(uds=str(live.socket_path)), base_url="http://localhost"
    )
    with api:
        denied = api.post("/v1/agent/subscriptions", json={"url": TWO, "uris": [URI]})
        assert denied.status_code == 403
        assert denied.json()["errorCode"] == "AGENT_ORIGIN_NOT_ALLOWED"
        assert api.post("/v1/agent/subscriptions", json={"url": TWO}).status_code == 400


def test_a_listen_ends_with_its_result_when_the_daemon_stops(live: LiveApi) -> None:
    live.call(lambda sup: sup.subscribe(ONE, URI))
    listen = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "subscriptions/listen",
        "params": {**META, "notifications": {"resourcesListChanged": True}},
    }

    async def closing(_sup: Any) -> None:
        live.app.state.api.closing.set()

    frames: list[dict[str, Any]] = []
    with (
        client(live) as c,
        c.stream(
            "POST", "/mcp", json=listen, headers={"Mcp-Method": "subscriptions/listen"}
        ) as stream,
    ):
        for line in stream.iter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line[6:]))
                if len(frames) == 1:
                    live.call(closing)
    ack, final = frames
    assert ack["params"]["notifications"] == {"resourcesListChanged": True}
    assert final == {
        "jsonrpc": "2.0",
        "id": 9,
        "result": {"resultType": "complete", "_meta": {p.META_SUBSCRIPTION: 9}},
    }


def test_resources_read_is_bounded_for_many_items_and_blobs(live: LiveApi) -> None:
    """``resources/read`` of a resource of 20,000 items or of a 1.2 MB blob gives not all of it
    but the ``read`` tool's 65,536 characters, and ``_meta`` says so."""
    from service.face.render import MAX_TEXT_CHARS
    from tests.support.store import bump_generation

    many = [{"uri": URI, "mimeType": "text/plain", "text": f"item {n:05d} "} for n in range(20_000)]
    blob = [
        {"uri": "test://blob", "mimeType": "application/octet-stream", "blob": "QUJD" * 300_000}
    ]

    async def store(sup: Any) -> list[Any]:
        made = [(await sup.subscribe(ONE, uri))[0] for uri in (URI, "test://blob")]
        for sub, contents, text in ((made[0], many, None), (made[1], blob, None)):
            generation = await bump_generation(sup.store, sub.server_id)
            assert await sup.store.record_read(sub.id, sub.server_id, generation, contents, text)
        return made

    live.call(store)
    with client(live) as c:
        for uri in (URI, "test://blob"):
            read = call(c, "resources/read", {"uri": uri}, uri)
            shown = sum(
                len(item.get("text") or item.get("blob") or "") for item in read["contents"]
            )
            assert 0 < shown <= MAX_TEXT_CHARS, uri
            assert len(json.dumps(read)) < 3 * MAX_TEXT_CHARS
            assert read["_meta"]["mcpsub/truncated"] is True
            assert read["_meta"]["mcpsub/nextOffset"] is None  # no text to go on with: the CLI
            assert "mcpsubctl read" in read["_meta"]["mcpsub/hint"]
