"""``/v1/webhooks`` and ``/v1/deliveries`` in process: a real store, a fake supervisor."""

from __future__ import annotations

import httpx
import pytest

from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio
HOOK = "http://127.0.0.1:9/hook"


async def _create(client: httpx.AsyncClient, **body: object) -> dict[str, object]:
    response = await client.post("/v1/webhooks", json={"url": HOOK, **body})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_create_shows_the_secret_once(client: httpx.AsyncClient) -> None:
    created = await _create(client, uriPatterns=["test://*"], subscriptionIds=[3], mode="latest")
    secret = str(created["secret"])
    assert secret.startswith("whsec_")
    assert created["uriPatterns"] == ["test://*"] and created["subscriptionIds"] == [3]
    assert created["mode"] == "latest" and created["enabled"] is True
    key = secret.removeprefix("whsec_")
    for path in ("/v1/webhooks", f"/v1/webhooks/{created['id']}", "/v1/status"):
        response = await client.get(path)
        assert response.status_code == 200
        assert key not in response.text and "secret" not in response.text.lower()
    own = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    assert (await _create(client, secret=own))["secret"] == own


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"url": "ftp://127.0.0.1/x"}, "INVALID_URL", "url"),
        ({"url": "http:///nohost"}, "INVALID_URL", "url"),
        ({"url": "http://127.0.0.1:0/x"}, "INVALID_URL", "url"),
        ({"url": "http://127.0.0.1:99999/x"}, "INVALID_URL", "url"),
        ({"url": "http://127.0.0.1:port/x"}, "INVALID_URL", "url"),
        ({"url": "http://127.0.0.1/a b"}, "INVALID_URL", "url"),
        ({}, "INVALID_URL", "url"),
        ({"url": HOOK, "mode": "some"}, "INVALID_PARAMETER", "mode"),
        ({"url": HOOK, "secret": "whsec_short"}, "INVALID_SECRET", "secret"),
        ({"url": HOOK, "secret": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "INVALID_SECRET", "secret"),
        ({"url": HOOK, "uriPatterns": "test://*"}, "INVALID_PARAMETER", "uriPatterns"),
        ({"url": HOOK, "subscriptionIds": [True]}, "INVALID_PARAMETER", "subscriptionIds"),
    ],
)
async def test_create_validation(
    client: httpx.AsyncClient, body: dict[str, object], code: str, field: str
) -> None:
    response = await client.post("/v1/webhooks", json=body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["errorCode"] == code and error["field"] == field and error["message"]


async def test_not_found_and_enable_disable(client: httpx.AsyncClient) -> None:
    for method, path in (
        ("GET", "/v1/webhooks/7"),
        ("DELETE", "/v1/webhooks/7"),
        ("POST", "/v1/webhooks/7/enable"),
        ("POST", "/v1/webhooks/7/test"),
        ("POST", "/v1/webhooks/7/rotate-secret"),
    ):
        response = await client.request(method, path)
        assert response.status_code == 404 and response.json()["errorCode"] == "WEBHOOK_NOT_FOUND"
    for method, path in (("GET", "/v1/deliveries/7"), ("POST", "/v1/deliveries/7/retry")):
        response = await client.request(method, path)
        assert response.status_code == 404 and response.json()["errorCode"] == "DELIVERY_NOT_FOUND"
    created = await _create(client)
    off = (await client.post(f"/v1/webhooks/{created['id']}/disable")).json()
    assert off["enabled"] is False and off["disabledReason"]
    on = (await client.post(f"/v1/webhooks/{created['id']}/enable")).json()
    assert on["enabled"] is True and on["disabledReason"] is None
    status = (await client.get("/v1/status")).json()
    assert status["webhooks"] == {"targets": 1, "enabled": 1}
    rotated = (await client.post(f"/v1/webhooks/{created['id']}/rotate-secret")).json()
    assert rotated["secret"] != created["secret"] and rotated["previousSecretValidUntil"] > 0
    removed = await client.delete(f"/v1/webhooks/{created['id']}")
    assert removed.status_code == 200 and (await client.get("/v1/webhooks")).json() == {
        "webhooks": []
    }


async def test_deliveries_list_retry_recover(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    a = await _create(client, uriPatterns=["test://a"])
    b = await _create(client)
    sub, _ = await supervisor.subscribe("http://127.0.0.1:1/mcp", "test://a")
    await supervisor.publish(sub, "one")
    await supervisor.publish(sub, "two")
    page = (await client.get("/v1/deliveries")).json()
    assert len(page["deliveries"]) == 4 and page["nextAfter"] == page["deliveries"][-1]["id"]
    first = page["deliveries"][0]
    assert first["state"] == "pending" and first["webhookId"].startswith("msg_")
    only_a = (await client.get("/v1/deliveries", params={"target": a["id"]})).json()
    assert {d["targetId"] for d in only_a["deliveries"]} == {a["id"]}
    paged = (await client.get("/v1/deliveries", params={"after": first["id"], "limit": 1})).json()
    assert [d["id"] for d in paged["deliveries"]] == [first["id"] + 1]
    bad = await client.get("/v1/deliveries", params={"state": "lost"})
    assert bad.status_code == 400 and bad.json()["field"] == "state"
    assert (await client.get(f"/v1/deliveries/{first['id']}")).json() == first
    retried = (await client.post(f"/v1/deliveries/{first['id']}/retry")).json()
    assert retried["webhookId"] == first["webhookId"] and retried["state"] == "pending"
    status = (await client.get("/v1/status")).json()
    assert status["deliveries"]["pending"] == 4 and status["deliveries"]["dead"] == 0

    for since in (0, "0", "2020-01-01T00:00:00Z", "2020-01-01T00:00:00"):
        response = await client.post(
            "/v1/deliveries/recover", json={"target": b["id"], "since": since}
        )
        assert response.status_code == 200, response.text
        assert response.json()["recovered"] == 0  # nothing failed yet
    for body, field in (
        ({"target": b["id"], "since": "yesterday"}, "since"),
        ({"target": b["id"]}, "since"),
        ({"target": "x", "since": 0}, "target"),
    ):
        response = await client.post("/v1/deliveries/recover", json=body)
        assert response.status_code == 400 and response.json()["field"] == field
    response = await client.post("/v1/deliveries/recover", json={"target": 99, "since": 0})
    assert response.status_code == 404
