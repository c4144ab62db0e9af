"""Bad input gets a documented 4xx, never a 500, and writes nothing."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.anyio
HOOK = "http://127.0.0.1:9/hook"
LONE = "\\ud800"  # a JSON escape Python decodes to a lone surrogate


def _raw(body: str) -> dict[str, object]:
    return {"content": body.encode(), "headers": {"content-type": "application/json"}}


async def _nothing_stored(client: httpx.AsyncClient) -> None:
    subs = await client.get("/v1/subscriptions")
    hooks = await client.get("/v1/webhooks")
    events = await client.get("/v1/events")
    assert subs.status_code == hooks.status_code == events.status_code == 200
    assert subs.json()["subscriptions"] == [] and hooks.json()["webhooks"] == []
    assert events.json()["events"] == []


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (f'{{"url": "http://127.0.0.1:9/{LONE}", "uri": "test://x"}}', "INVALID_URL", "url"),
        (f'{{"url": "http://127.0.0.1:9/mcp", "uri": "test://{LONE}"}}', "INVALID_URI", "uri"),
        ('{"url": "http://127.0.0.1:9/\\u0000", "uri": "test://x"}', "INVALID_URL", "url"),
        ('{"url": "http://127.0.0.1:9/mcp", "uri": "test://\\u001b[2J"}', "INVALID_URI", "uri"),
        ('{"url": "http://127.0.0.1:0/mcp", "uri": "test://x"}', "INVALID_URL", "url"),
        ('{"url": "http://127.0.0.1:9/mcp#frag", "uri": "test://x"}', "INVALID_URL", "url"),
        ('{"url": "http://127.0.0.1:9/mcp#", "uri": "test://x"}', "INVALID_URL", "url"),
    ],
)
async def test_subscription_input_is_refused_before_any_write(
    client: httpx.AsyncClient, body: str, code: str, field: str
) -> None:
    response = await client.post("/v1/subscriptions", **_raw(body))  # type: ignore[arg-type]
    assert response.status_code == 400, response.text
    assert response.json()["errorCode"] == code and response.json()["field"] == field
    await _nothing_stored(client)


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (f'{{"url": "{HOOK}{LONE}"}}', "INVALID_URL", "url"),
        (
            f'{{"url": "{HOOK}", "uriPatterns": ["test://{LONE}*"]}}',
            "INVALID_PARAMETER",
            "uriPatterns",
        ),
        (
            f'{{"url": "{HOOK}", "uriPatterns": ["test://\\u0007"]}}',
            "INVALID_PARAMETER",
            "uriPatterns",
        ),
        ('{"url": "http://127.0.0.1:9/hook#x"}', "INVALID_URL", "url"),
        ('{"url": "http://127.0.0.1:9/\\u0000"}', "INVALID_URL", "url"),
        ('{"url": "http://169.254.169.254/latest/meta-data/"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://169.254.1.7:8080/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://[fd00:ec2::254]/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://[fe80::1]/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://[::ffff:169.254.169.254]/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://[::a9fe:a9fe]/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://[64:ff9b::a9fe:a9fe]/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://[2002:a9fe:a9fe::]/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://[::ffff:0:a9fe:a9fe]/hook"}', "PRIVATE_TARGET", "url"),  # SIIT
        ('{"url": "http://[::ffff:0:6464:64c8]/hook"}', "PRIVATE_TARGET", "url"),  # SIIT
        ('{"url": "http://169.254.169.254./latest/"}', "PRIVATE_TARGET", "url"),  # trailing dot
        ('{"url": "http://0xa9fea9fe/hook"}', "PRIVATE_TARGET", "url"),  # inet_aton forms
        ('{"url": "http://2852039166/hook"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://metadata.google.internal/x"}', "PRIVATE_TARGET", "url"),
        ('{"url": "http://0.0.0.0:9/hook"}', "PRIVATE_TARGET", "url"),
        (
            f'{{"url": "{HOOK}", "allowPrivateTarget": "yes"}}',
            "INVALID_PARAMETER",
            "allowPrivateTarget",
        ),
    ],
)
async def test_webhook_input_is_refused_before_any_write(
    client: httpx.AsyncClient, body: str, code: str, field: str
) -> None:
    response = await client.post("/v1/webhooks", **_raw(body))  # type: ignore[arg-type]
    assert response.status_code == 400, response.text
    assert response.json()["errorCode"] == code and response.json()["field"] == field
    if code == "PRIVATE_TARGET":
        assert "--allow-private-target" in response.json()["hint"]
    await _nothing_stored(client)


async def test_private_target_allowed_when_asked_and_loopback_by_default(
    client: httpx.AsyncClient,
) -> None:
    metadata = "http://169.254.169.254/hook"
    allowed = await client.post("/v1/webhooks", json={"url": metadata, "allowPrivateTarget": True})
    assert allowed.status_code == 201, allowed.text
    for loopback in ("http://127.0.0.1:9/hook", "http://[::1]:9/hook", "http://localhost:9/h"):
        assert (await client.post("/v1/webhooks", json={"url": loopback})).status_code == 201
    listed = (await client.get("/v1/webhooks")).json()["webhooks"]
    assert listed[0]["url"] == metadata and len(listed) == 4


@pytest.mark.parametrize("path", ["/v1/subscriptions", "/v1/webhooks", "/v1/deliveries/recover"])
async def test_deeply_nested_body_is_invalid_json(client: httpx.AsyncClient, path: str) -> None:
    for depth in (5_000, 200_000):
        body = '{"url": ' + "[" * depth + "]" * depth + "}"
        response = await client.post(path, **_raw(body))  # type: ignore[arg-type]
        if len(body) > 64 * 1024:
            assert response.status_code == 413, response.text
            continue
        assert response.status_code == 400, response.text
        assert response.json()["errorCode"] == "INVALID_JSON"
    await _nothing_stored(client)


@pytest.mark.parametrize("header", ["origin", "host", "authorization"])
async def test_duplicate_guard_headers_are_refused(client: httpx.AsyncClient, header: str) -> None:
    values = {"origin": "http://localhost", "host": "localhost", "authorization": "Bearer x"}
    headers = [(header, values[header]), (header, values[header])]
    if header != "host":
        headers.append(("host", "localhost"))
    response = await client.post(
        "/v1/subscriptions",
        content=json.dumps({"url": "http://127.0.0.1:9/mcp", "uri": "test://x"}).encode(),
        headers=headers,
    )
    assert response.status_code == 400, response.text
    assert response.json()["errorCode"] == "DUPLICATE_HEADER"
    await _nothing_stored(client)


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("OPTIONS", "/v1/subscriptions", "GET, POST"),
        ("PUT", "/v1/subscriptions/1", "DELETE, GET"),
        ("GET", "/v1/deliveries/recover", "POST"),
        ("DELETE", "/v1/webhooks", "GET, POST"),
    ],
)
async def test_405_lists_every_method_of_the_path(
    client: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await client.request(method, path)
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allow
    assert response.json()["errorCode"] == "METHOD_NOT_ALLOWED"


async def test_openapi_documents_our_errors_not_fastapis(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    ops = [op for item in spec["paths"].values() for op in item.values()]
    assert all("422" not in op["responses"] for op in ops)
    create = spec["paths"]["/v1/subscriptions"]["post"]
    assert create["responses"]["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    single = create["requestBody"]["content"]["application/json"]["schema"]["oneOf"][0]
    assert "pattern" in single["properties"]["uri"]


@pytest.mark.parametrize("value", ["", "bad type", "resource.updated,", "x\x1b"])
async def test_event_type_filter_is_validated(client: httpx.AsyncClient, value: str) -> None:
    response = await client.get("/v1/events", params={"type": value})
    assert response.status_code == 400 and response.json()["field"] == "type"
    ok = await client.get("/v1/events", params={"type": "resource.updated,subscription.state"})
    assert ok.status_code == 200
