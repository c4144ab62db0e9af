"""POST/GET/DELETE /v1/subscriptions against a real SQLite store."""

from __future__ import annotations

import httpx
import pytest

from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:8089/mcp"


async def test_create_is_idempotent(client: httpx.AsyncClient) -> None:
    first = await client.post("/v1/subscriptions", json={"url": URL, "uri": "test://a"})
    assert first.status_code == 201
    body = first.json()
    assert body["uri"] == "test://a" and body["serverUrl"] == URL and body["created"] is True
    again = await client.post("/v1/subscriptions", json={"url": URL, "uri": "test://a"})
    assert again.status_code == 200
    assert again.json()["id"] == body["id"] and again.json()["created"] is False
    listed = (await client.get("/v1/subscriptions")).json()["subscriptions"]
    assert [s["id"] for s in listed] == [body["id"]]


@pytest.mark.parametrize(
    ("payload", "code", "field"),
    [
        ({"uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": "", "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": 5, "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": "ftp://host/mcp", "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": "/relative/mcp", "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": "http:///nohost", "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": "http://h:99999/mcp", "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": "http://h/m cp", "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": "http://" + "h" * 3000, "uri": "test://a"}, "INVALID_URL", "url"),
        ({"url": URL}, "INVALID_URI", "uri"),
        ({"url": URL, "uri": ""}, "INVALID_URI", "uri"),
        ({"url": URL, "uri": ["test://a"]}, "INVALID_URI", "uri"),
        ({"url": URL, "uri": "no-scheme"}, "INVALID_URI", "uri"),
        ({"url": URL, "uri": "test://a b"}, "INVALID_URI", "uri"),
        ({"url": URL, "uri": "test://a\n"}, "INVALID_URI", "uri"),
    ],
)
async def test_bad_input_is_rejected_and_nothing_is_written(
    client: httpx.AsyncClient,
    supervisor: FakeSupervisor,
    payload: dict[str, object],
    code: str,
    field: str,
) -> None:
    response = await client.post("/v1/subscriptions", json=payload)
    assert response.status_code == 400
    body = response.json()
    assert body["errorCode"] == code and body["field"] == field and body["message"]
    assert supervisor.subscribe_calls == 0
    assert (await supervisor.store.counts())["subscriptions"] == 0
    ok = await client.post("/v1/subscriptions", json={"url": URL, "uri": "test://a"})
    assert ok.status_code == 201


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"not json", b"[1, 2]", b'"text"', b"null", b"\xff\xfe"]
)
async def test_malformed_json(
    client: httpx.AsyncClient, supervisor: FakeSupervisor, raw: bytes
) -> None:
    response = await client.post(
        "/v1/subscriptions", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["errorCode"] == "INVALID_JSON"
    assert (await supervisor.store.counts()) == {
        "servers": 0, "subscriptions": 0, "revisions": 0, "events": 0
    }  # fmt: skip


async def test_oversized_body(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/subscriptions", content=b"{" + b" " * 70_000 + b"}")
    assert response.status_code == 413
    assert response.json()["errorCode"] == "BODY_TOO_LARGE"


async def test_show_has_link_and_current_revision(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    sub_id = (await client.post("/v1/subscriptions", json={"url": URL, "uri": "test://a"})).json()[
        "id"
    ]
    shown = (await client.get(f"/v1/subscriptions/{sub_id}")).json()
    assert shown["current"] is None
    assert shown["link"]["url"] == URL and shown["link"]["honoredUris"] == ["test://a"]
    sub = await supervisor.store.get_subscription(sub_id)
    assert sub is not None
    await supervisor.publish(sub, "v1")
    shown = (await client.get(f"/v1/subscriptions/{sub_id}")).json()
    assert shown["revision"] == 1
    assert shown["current"]["revision"] == 1 and shown["current"]["text"] == "v1"
    # One shape of a revision: /v1/content's and the history's, without the contents.
    content = (await client.get("/v1/content", params={"uri": "test://a"})).json()
    kept = (await client.get(f"/v1/subscriptions/{sub_id}/revisions/1")).json()
    assert kept == {k: v for k, v in content.items() if k not in ("serverUrl", "eventId")}
    assert shown["current"] == {
        k: v for k, v in kept.items() if k not in ("subscriptionId", "uri", "contents")
    }


async def test_delete(client: httpx.AsyncClient, supervisor: FakeSupervisor) -> None:
    sub_id = (await client.post("/v1/subscriptions", json={"url": URL, "uri": "test://a"})).json()[
        "id"
    ]
    removed = await client.delete(f"/v1/subscriptions/{sub_id}")
    assert removed.status_code == 200 and removed.json()["id"] == sub_id
    assert (await client.get("/v1/subscriptions")).json() == {"subscriptions": []}
    again = await client.delete(f"/v1/subscriptions/{sub_id}")
    assert again.status_code == 404
    assert again.json()["errorCode"] == "SUBSCRIPTION_NOT_FOUND"
    missing = await client.get(f"/v1/subscriptions/{sub_id}")
    assert missing.status_code == 404
    assert missing.json()["errorCode"] == "SUBSCRIPTION_NOT_FOUND"


@pytest.mark.parametrize("bad", ["abc", "1.5", "0", "-3", str(2**64)])
@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_bad_ids(client: httpx.AsyncClient, method: str, bad: str) -> None:
    response = await client.request(method, f"/v1/subscriptions/{bad}")
    assert response.status_code == 400
    body = response.json()
    assert body["errorCode"] == "INVALID_PARAMETER" and body["field"] == "id"
    assert (await client.get("/v1/subscriptions")).status_code == 200


async def test_unknown_route_and_method_are_json(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/nope")
    assert missing.status_code == 404 and missing.json()["errorCode"] == "NOT_FOUND"
    wrong = await client.put("/v1/subscriptions")
    assert wrong.status_code == 405 and wrong.json()["errorCode"] == "METHOD_NOT_ALLOWED"


async def test_batch_adds_many_uris_in_one_call(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    await client.post("/v1/subscriptions", json={"url": URL, "uri": "test://b"})
    uris = ["test://a", "test://b", "test://c", "test://a"]  # b exists; a repeated
    response = await client.post("/v1/subscriptions", json={"url": URL, "uris": uris})
    assert response.status_code == 201
    body = response.json()
    assert [(s["uri"], s["created"]) for s in body["subscriptions"]] == [
        ("test://a", True), ("test://b", False), ("test://c", True)
    ]  # fmt: skip
    assert body["created"] == 2
    assert supervisor.subscribe_calls == 2  # one for b, one for the whole batch
    events = await supervisor.store.events_after(0, types=["subscription.created"])
    assert [e.uri for e in events] == ["test://b", "test://a", "test://c"]
    again = await client.post("/v1/subscriptions", json={"url": URL, "uris": ["test://c"]})
    assert again.status_code == 200 and again.json()["created"] == 0


@pytest.mark.parametrize(
    "payload",
    [
        {"url": URL, "uris": []},
        {"url": URL, "uris": "test://a"},
        {"url": URL, "uris": ["test://a", "no-scheme"]},
        {"url": URL, "uris": ["test://a", 5]},
        {"url": URL, "uri": "test://a", "uris": ["test://b"]},
        {"url": URL, "uris": [f"test://x/{n}" for n in range(1001)]},
    ],
)
async def test_bad_batch_is_rejected_and_nothing_is_written(
    client: httpx.AsyncClient, supervisor: FakeSupervisor, payload: dict[str, object]
) -> None:
    response = await client.post("/v1/subscriptions", json=payload)
    assert response.status_code == 400
    body = response.json()
    assert body["field"] in ("uris", "uri") and body["errorCode"] in (
        "INVALID_PARAMETER", "INVALID_URI"
    )  # fmt: skip
    assert supervisor.subscribe_calls == 0
    assert (await supervisor.store.counts())["subscriptions"] == 0
