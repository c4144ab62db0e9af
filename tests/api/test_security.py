"""DNS-rebinding guard (Host, Origin) and the bearer token of the TCP mode."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.daemon.webapp import create_app
from service.http.guard import bearer_matches, split_host
from tests.api.fakes import FakeSupervisor

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token-value"


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8080", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:9"]
)
async def test_loopback_hosts_pass(client: httpx.AsyncClient, host: str) -> None:
    response = await client.get("/v1/subscriptions", headers={"Host": host})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "host",
    ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io:80", "10.0.0.1", "localhost:x",
     "[::1", "0.0.0.0", ""],
)  # fmt: skip
async def test_foreign_host_is_refused(client: httpx.AsyncClient, host: str) -> None:
    response = await client.get("/v1/subscriptions", headers={"Host": host})
    assert response.status_code == 421
    assert response.json()["errorCode"] == "HOST_NOT_ALLOWED"


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "https://localhost.evil.example", "null", "file://", "ftp://localhost",
     "http://127.0.0.1.evil:80"],
)  # fmt: skip
async def test_foreign_origin_is_refused(
    client: httpx.AsyncClient, supervisor: FakeSupervisor, origin: str
) -> None:
    response = await client.post(
        "/v1/subscriptions",
        json={"url": "http://127.0.0.1:1/mcp", "uri": "test://a"},
        headers={"Origin": origin},
    )
    assert response.status_code == 403
    assert response.json()["errorCode"] == "ORIGIN_NOT_ALLOWED"
    assert supervisor.subscribe_calls == 0


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "https://127.0.0.1", "http://[::1]:8080"]
)
async def test_loopback_origin_passes(client: httpx.AsyncClient, origin: str) -> None:
    response = await client.get("/v1/status", headers={"Origin": origin})
    assert response.status_code == 200


@pytest.fixture
async def tcp_client(supervisor: FakeSupervisor) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(supervisor, supervisor.parts, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7000") as c:
        yield c


@pytest.mark.parametrize(
    "path", ["/v1/subscriptions", "/v1/status", "/metrics", "/readyz", "/openapi.json",
             "/v1/events/stream", "/v1/nope"],
)  # fmt: skip
@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"]
)
async def test_token_required(
    tcp_client: httpx.AsyncClient, path: str, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = await tcp_client.get(path, headers=headers)
    assert response.status_code == 401
    assert response.json()["errorCode"] == "API_TOKEN_REQUIRED"
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN not in response.text


async def test_token_accepted_and_healthz_open(tcp_client: httpx.AsyncClient) -> None:
    assert (await tcp_client.get("/healthz")).json() == {"ok": True}
    good = {"Authorization": f"Bearer {TOKEN}"}
    assert (await tcp_client.get("/v1/status", headers=good)).status_code == 200
    lower = {"Authorization": f"bearer {TOKEN}"}
    assert (await tcp_client.get("/v1/subscriptions", headers=lower)).status_code == 200


async def test_host_checked_before_token(tcp_client: httpx.AsyncClient) -> None:
    response = await tcp_client.get(
        "/v1/status", headers={"Host": "evil.example", "Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 421


def test_split_host_and_bearer() -> None:
    assert split_host("LOCALHOST:80") == "localhost"
    assert split_host("[::1]:80") == "[::1]"
    assert split_host("host:") == "host"
    assert split_host("a:b:c") is None
    assert bearer_matches("Bearer abc", "abc") and not bearer_matches(None, "abc")
