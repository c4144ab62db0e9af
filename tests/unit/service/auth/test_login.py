"""service.auth.login: the device flow's order and its client-id cache, with the OAuth
exchanges replaced by fakes (the HTTP side is tested in tests/auth)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.auth import login as login_module
from service.auth import oauth
from service.auth.errors import OAuthError
from service.auth.login import forget, login
from service.auth.store import TokenStore

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"
ORIGIN = "http://127.0.0.1:9"


@dataclass
class FakeOAuth:
    """Records the calls; ``reject`` is the error the device-code request answers once."""

    calls: list[str] = field(default_factory=list)
    reject: str | None = None
    registered: int = 0

    async def discover(self, _http: Any, url: str) -> oauth.Endpoints:
        self.calls.append("discover")
        return oauth.Endpoints("r", "d", "t")

    async def register(self, _http: Any, _endpoints: Any, program: str) -> str:
        self.registered += 1
        self.calls.append("register")
        return f"{program}-client-{self.registered}"

    async def request_device_code(
        self, _http: Any, _endpoints: Any, client_id: str
    ) -> oauth.DeviceCode:
        self.calls.append(f"code:{client_id}")
        if self.reject:
            error, self.reject = self.reject, None
            raise OAuthError(error)
        return oauth.DeviceCode("dev", "USER-CODE", "http://127.0.0.1:9/verify", None, 600, 0)

    async def poll_for_token(
        self, _http: Any, _endpoints: Any, client_id: str, _code: Any
    ) -> oauth.TokenSet:
        self.calls.append("poll")
        return oauth.TokenSet(f"access-for-{client_id}", "refresh", 3600)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeOAuth:
    fake = FakeOAuth()
    for name in ("discover", "register", "request_device_code", "poll_for_token"):
        monkeypatch.setattr(login_module.oauth, name, getattr(fake, name))
    return fake


async def run(store: Path, shown: list[str] | None = None) -> login_module.LoginResult:
    async with httpx.AsyncClient() as http:
        return await login(
            URL,
            program="mcpsubctl",
            on_code=lambda code: (shown if shown is not None else []).append(code.user_code),
            store_path=store,
            client=http,
        )


async def test_first_login_registers_shows_the_code_then_saves(
    tmp_path: Path, fake: FakeOAuth
) -> None:
    store = tmp_path / "tokens.db"
    shown: list[str] = []
    result = await run(store, shown)
    assert fake.calls == ["discover", "register", "code:mcpsubctl-client-1", "poll"]
    assert shown == ["USER-CODE"]
    assert (result.origin, result.client_id) == (ORIGIN, "mcpsubctl-client-1")
    with TokenStore.create(store) as tokens:
        row = tokens.get(ORIGIN)
    assert row is not None
    assert row.access_token == "access-for-mcpsubctl-client-1"
    assert row.expires_at == result.expires_at_ms


async def test_a_second_login_reuses_the_registered_client(tmp_path: Path, fake: FakeOAuth) -> None:
    store = tmp_path / "tokens.db"
    await run(store)
    fake.calls.clear()
    result = await run(store)
    assert fake.calls == ["discover", "code:mcpsubctl-client-1", "poll"]
    assert result.client_id == "mcpsubctl-client-1"


@pytest.mark.parametrize("error", ["invalid_client", "unauthorized_client"])
async def test_a_rejected_cached_client_registers_again(
    tmp_path: Path, fake: FakeOAuth, error: str
) -> None:
    store = tmp_path / "tokens.db"
    await run(store)
    fake.calls.clear()
    fake.reject = error
    result = await run(store)
    assert fake.calls == [
        "discover",
        "code:mcpsubctl-client-1",
        "register",
        "code:mcpsubctl-client-2",
        "poll",
    ]
    assert result.client_id == "mcpsubctl-client-2"


async def test_other_errors_and_a_fresh_client_rejected_are_raised(
    tmp_path: Path, fake: FakeOAuth
) -> None:
    store = tmp_path / "tokens.db"
    fake.reject = "invalid_client"  # a client registered just now: no second registration
    with pytest.raises(OAuthError):
        await run(store)
    assert fake.registered == 1
    await run(store)
    fake.reject = "access_denied"
    with pytest.raises(OAuthError):
        await run(store)
    assert fake.registered == 2


async def test_forget_deletes_the_origin_and_never_creates_the_store(
    tmp_path: Path, fake: FakeOAuth
) -> None:
    store = tmp_path / "tokens.db"
    assert forget(URL, store_path=store) is False
    assert not store.exists()
    await run(store)
    assert forget(URL + "/other/path", store_path=store) is True  # by origin
    assert forget(URL, store_path=store) is False
