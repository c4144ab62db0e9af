"""/v1/events paging, /v1/status, health, readiness, metrics, OpenAPI."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from sqlalchemy import insert

from service.store import schema
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:8089/mcp"


async def test_events_paging_and_filters(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    a, _ = await supervisor.subscribe(URL, "test://a")
    b, _ = await supervisor.subscribe(URL, "test://b")
    await supervisor.publish(a, "a1")
    await supervisor.publish(b, "b1")
    page = (await client.get("/v1/events", params={"limit": 2})).json()
    assert [e["type"] for e in page["events"]] == ["subscription.created"] * 2
    assert page["nextAfter"] == page["events"][-1]["id"]
    rest = (await client.get("/v1/events", params={"after": page["nextAfter"]})).json()
    assert [e["uri"] for e in rest["events"]] == ["test://a", "test://b"]
    only_b = (await client.get("/v1/events", params={"uri": "test://b"})).json()["events"]
    assert {e["uri"] for e in only_b} == {"test://b"} and len(only_b) == 2
    updates = await client.get("/v1/events", params=[("type", "resource.updated")])
    assert [e["revision"] for e in updates.json()["events"]] == [1, 1]
    both = await client.get("/v1/events", params={"type": "resource.updated,subscription.created"})
    assert len(both.json()["events"]) == 4
    empty = (await client.get("/v1/events", params={"after": 10**6})).json()
    assert empty == {"events": [], "nextAfter": 10**6}


async def test_events_limit_is_capped(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    rows = [{"type": "test.bulk", "data": "{}", "created_at": time.time()} for _ in range(1005)]
    async with supervisor.store.engine.begin() as conn:
        await conn.execute(insert(schema.events), rows)
    page = (await client.get("/v1/events", params={"limit": 5000})).json()
    assert len(page["events"]) == 1000 and page["nextAfter"] == page["events"][-1]["id"]


@pytest.mark.parametrize("params", [{"after": -1}, {"after": "x"}, {"limit": 0}, {"limit": "x"}])
async def test_events_bad_params(client: httpx.AsyncClient, params: dict[str, int | str]) -> None:
    response = await client.get("/v1/events", params=params)
    assert response.status_code == 400 and response.json()["errorCode"] == "INVALID_PARAMETER"


async def test_status(client: httpx.AsyncClient, supervisor: FakeSupervisor) -> None:
    sub, _ = await supervisor.subscribe(URL, "test://a")
    await supervisor.publish(sub, "x")
    status = (await client.get("/v1/status")).json()
    assert status["version"]
    assert status["uptimeSeconds"] >= 0
    assert status["eventLoop"] == "asyncio"  # the test's own loop (the daemon's: uvloop)
    assert status["links"] == supervisor.link_status()
    assert status["counts"] == {"servers": 1, "subscriptions": 1, "revisions": 1, "events": 2}
    assert status["subscriptionsByState"] == {"pending": 1}
    assert status["lastEventId"] == await supervisor.store.last_event_id()


async def test_health_and_readiness(client: httpx.AsyncClient, supervisor: FakeSupervisor) -> None:
    assert (await client.get("/healthz")).json() == {"ok": True}
    assert (await client.get("/readyz")).status_code == 200
    supervisor.ready = False
    not_ready = await client.get("/readyz")
    assert not_ready.status_code == 503 and not_ready.json()["errorCode"] == "NOT_READY"


async def test_metrics(client: httpx.AsyncClient, supervisor: FakeSupervisor) -> None:
    await supervisor.subscribe(URL, "test://a")
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert "# TYPE mcpsub_reads_total counter" in text and "mcpsub_reads_total 3.0" in text
    assert "# TYPE mcpsub_streams_open gauge" in text
    assert 'mcpsub_store_rows{table="subscriptions"} 1.0' in text
    assert "mcpsub_ready 1.0" in text
    assert all(line.startswith(("#", "mcpsub_")) for line in text.splitlines() if line.strip())


async def test_openapi(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    for path in (
        "/v1/subscriptions", "/v1/subscriptions/{id}", "/v1/content", "/v1/wait",
        "/v1/events", "/v1/events/stream", "/v1/status", "/healthz", "/readyz", "/metrics",
    ):  # fmt: skip
        assert path in spec["paths"], path
    body = spec["paths"]["/v1/subscriptions"]["post"]["requestBody"]
    forms = body["content"]["application/json"]["schema"]["oneOf"]
    assert [form["required"] for form in forms] == [["url", "uri"], ["url", "uris"]]


def test_status_json_falls_back_for_values_orjson_refuses() -> None:
    """``/v1/status`` is written with orjson; a server's capabilities may hold what orjson
    refuses (an integer past 64 bits, nesting past 254 levels): same JSON, via json."""
    import json

    from service.jsonencode import json_bytes

    deep: Any = 0
    for _ in range(300):
        deep = [deep]
    for value in ({"big": 2**70, "text": "é\u202e"}, {"deep": deep}, {"plain": [1, "é", None]}):
        assert json.loads(json_bytes(value)) == value
    assert json_bytes({"text": "é"}) == '{"text":"é"}'.encode()
