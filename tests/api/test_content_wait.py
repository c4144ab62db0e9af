"""/v1/content and the /v1/wait long-poll, events driven through the real store."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from service.store.records import Subscription
from tests.api.fakes import FakeSupervisor
from tests.support.poll import until_async

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:8089/mcp"
OTHER = "http://127.0.0.1:8090/mcp"


async def _sub(supervisor: FakeSupervisor, uri: str = "test://a", url: str = URL) -> Subscription:
    sub, _ = await supervisor.subscribe(url, uri)
    return sub


async def test_content_not_watched_then_no_content_then_content(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    response = await client.get("/v1/content", params={"uri": "test://a"})
    assert response.status_code == 404 and response.json()["errorCode"] == "NOT_WATCHED"
    sub = await _sub(supervisor)
    response = await client.get("/v1/content", params={"uri": "test://a"})
    assert response.status_code == 404 and response.json()["errorCode"] == "NO_CONTENT_YET"
    rev = await supervisor.publish(sub, "v1")
    body = (await client.get("/v1/content", params={"uri": "test://a"})).json()
    events = (await client.get("/v1/events", params={"type": "resource.updated"})).json()
    assert body == {
        "subscriptionId": sub.id, "serverUrl": URL, "uri": "test://a", "revision": 1,
        "contentHash": rev.content_hash, "generation": rev.generation, "readAt": rev.read_at,
        "contents": [{"uri": "test://a", "mimeType": "text/plain", "text": "v1"}],
        "text": "v1", "eventId": events["events"][0]["id"],
    }  # fmt: skip


async def test_content_filters_by_url(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    first = await _sub(supervisor, url=URL)
    second = await _sub(supervisor, url=OTHER)
    await supervisor.publish(first, "from first")
    await supervisor.publish(second, "from second")
    # Two servers and none named: no silent pick of the newest; both are named.
    for path in ("/v1/content", "/v1/wait"):
        ambiguous = await client.get(path, params={"uri": "test://a"})
        assert ambiguous.status_code == 409, ambiguous.text
        body = ambiguous.json()
        assert body["errorCode"] == "AMBIGUOUS_URI"
        assert URL in body["message"] and OTHER in body["message"]
        assert [s["serverId"] for s in body["servers"]] == [first.server_id, second.server_id]
    chosen = (await client.get("/v1/content", params={"uri": "test://a", "url": URL})).json()
    assert chosen["text"] == "from first" and chosen["serverUrl"] == URL
    for server in (str(second.server_id), OTHER):
        named = await client.get("/v1/content", params={"uri": "test://a", "server": server})
        assert named.json()["text"] == "from second", named.text
    unknown = await client.get("/v1/content", params={"uri": "test://a", "server": "999"})
    assert unknown.status_code == 404 and unknown.json()["errorCode"] == "NOT_WATCHED"
    missing = await client.get(
        "/v1/content", params={"uri": "test://a", "url": "http://127.0.0.1:1/x"}
    )
    assert missing.status_code == 404 and missing.json()["errorCode"] == "NOT_WATCHED"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, "INVALID_PARAMETER"),
        ({"uri": "no scheme"}, "INVALID_URI"),
        ({"uri": "test://a", "url": "ftp://x"}, "INVALID_URL"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/content", "/v1/wait"])
async def test_bad_query(
    client: httpx.AsyncClient, path: str, params: dict[str, str], code: str
) -> None:
    response = await client.get(path, params=params)
    assert response.status_code == 400 and response.json()["errorCode"] == code


async def waiting(app: FastAPI, count: int = 1) -> None:
    """Until ``count`` clients are in a long-poll (the API counts its waiters)."""
    await until_async(f"{count} long-polls", lambda: app.state.api.waiters >= count, 10)


async def test_wait_returns_the_next_update(
    app: FastAPI, client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    sub = await _sub(supervisor)
    await supervisor.publish(sub, "v1")

    async def later() -> None:
        await waiting(app)
        await supervisor.store.set_subscription_state([sub.id], "active")  # not an update
        await supervisor.publish(sub, "v2")

    task = asyncio.create_task(later())
    response = await client.get("/v1/wait", params={"uri": "test://a", "timeout_ms": 5000})
    await task
    assert response.status_code == 200
    body = response.json()
    assert body["event"]["type"] == "resource.updated" and body["event"]["revision"] == 2
    assert body["revision"]["text"] == "v2" and body["revision"]["eventId"] == body["event"]["id"]


async def test_wait_after_cursor_returns_at_once(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    sub = await _sub(supervisor)
    await supervisor.publish(sub, "v1")
    await supervisor.publish(sub, "v2")
    body = (await client.get("/v1/wait", params={"uri": "test://a", "after": 0})).json()
    assert body["revision"]["text"] == "v1"
    after = body["event"]["id"]
    body = (await client.get("/v1/wait", params={"uri": "test://a", "after": after})).json()
    assert body["revision"]["text"] == "v2"
    assert "link" in body  # one request serves a waiter: it carries the link too


async def test_wait_filters_by_url(client: httpx.AsyncClient, supervisor: FakeSupervisor) -> None:
    first = await _sub(supervisor, url=URL)
    second = await _sub(supervisor, url=OTHER)
    await supervisor.publish(second, "other server")
    await supervisor.publish(first, "mine")
    body = (await client.get("/v1/wait", params={"uri": "test://a", "url": URL, "after": 0})).json()
    assert body["revision"]["text"] == "mine" and body["event"]["serverUrl"] == URL


async def test_wait_timeout(client: httpx.AsyncClient, supervisor: FakeSupervisor) -> None:
    sub = await _sub(supervisor)
    await supervisor.publish(sub, "v1")
    last = await supervisor.store.last_event_id()
    response = await client.get("/v1/wait", params={"uri": "test://a", "timeout_ms": 100})
    assert response.status_code == 408
    body = response.json()
    assert body["errorCode"] == "NOTIFICATION_TIMEOUT" and body["after"] == last
    assert supervisor.events.last_id == last


async def test_wait_not_watched_and_limits(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    response = await client.get("/v1/wait", params={"uri": "test://a", "timeout_ms": 100})
    assert response.status_code == 404 and response.json()["errorCode"] == "NOT_WATCHED"
    await _sub(supervisor)
    for params in ({"timeout_ms": 0}, {"timeout_ms": 10**9}, {"after": -1}, {"after": "x"}):
        response = await client.get("/v1/wait", params={"uri": "test://a", **params})
        assert response.status_code == 400, params
        assert response.json()["errorCode"] == "INVALID_PARAMETER"


async def test_wait_too_many_waiters(supervisor: FakeSupervisor) -> None:
    from service.daemon.webapp import create_app

    app = create_app(supervisor, supervisor.parts, token=None, max_waiters=1)
    transport = httpx.ASGITransport(app=app)
    await _sub(supervisor)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        first = asyncio.create_task(
            c.get("/v1/wait", params={"uri": "test://a", "timeout_ms": 500})
        )
        await waiting(app)
        second = await c.get("/v1/wait", params={"uri": "test://a", "timeout_ms": 500})
        assert second.status_code == 503 and second.json()["errorCode"] == "TOO_MANY_WAITERS"
        assert (await first).status_code == 408
        third = await c.get("/v1/wait", params={"uri": "test://a", "timeout_ms": 50})
        assert third.status_code == 408
