"""Pure parts and in-process pieces of service.auth (no subprocesses)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest
import respx

from service.auth import oauth
from service.auth.errors import AuthLoginRequired, AuthTimeout, LockTimeout, OAuthError
from service.auth.resolve import resolve_token_sync
from service.auth.rules import (
    EXPIRY_MARGIN_MS,
    canonical_resource,
    expiry_ms,
    is_fresh,
    next_poll,
    origin_of,
    parse_www_authenticate,
    well_known_urls,
)
from service.auth.store import TokenStore, default_store_path, now_ms

# ---- rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            'Bearer resource_metadata="http://h/.well-known/oauth-protected-resource/mcp"',
            {"resource_metadata": "http://h/.well-known/oauth-protected-resource/mcp"},
        ),
        (
            'Bearer error="invalid_token", resource_metadata="u", scope="a b"',
            {"error": "invalid_token", "resource_metadata": "u", "scope": "a b"},
        ),
        ('bearer realm=x, resource_metadata="a\\"b"', {"realm": "x", "resource_metadata": 'a"b'}),
        ('Basic realm="x", Bearer resource_metadata="m"', {"resource_metadata": "m"}),
        ('Bearer resource_metadata="m", Basic realm="x"', {"resource_metadata": "m"}),
        ("Bearer", {}),
        ('Basic realm="x"', None),
        (None, None),
        ("", None),
    ],
)
def test_parse_www_authenticate(header: str | None, expected: dict[str, str] | None) -> None:
    assert parse_www_authenticate(header) == expected


def test_expiry_margin_is_five_minutes() -> None:
    now = 1_000_000_000
    assert EXPIRY_MARGIN_MS == 300_000
    assert is_fresh(now + EXPIRY_MARGIN_MS + 1, now)
    assert not is_fresh(now + EXPIRY_MARGIN_MS, now)
    assert not is_fresh(now - 1, now)
    assert expiry_ms(now, 3600) == now + 3_600_000
    assert expiry_ms(now, None) == now
    assert expiry_ms(now, "3600") == now
    assert expiry_ms(now, True) == now


def test_origins_and_well_known_urls() -> None:
    assert origin_of("HTTP://Example.COM:80/mcp?x=1") == "http://example.com"
    assert origin_of("https://h:8443/a/b") == "https://h:8443"
    for bad in ("not a url", "/mcp", "ftp://h/x", "http://", "http://h:99999/"):
        with pytest.raises(ValueError):
            origin_of(bad)
    assert canonical_resource("https://h/mcp/") == "https://h/mcp"
    assert well_known_urls("https://h/mcp", "oauth-protected-resource") == [
        "https://h/.well-known/oauth-protected-resource/mcp",
        "https://h/.well-known/oauth-protected-resource",
    ]
    assert well_known_urls("https://h", "oauth-authorization-server") == [
        "https://h/.well-known/oauth-authorization-server"
    ]


def test_poll_decisions() -> None:
    assert next_poll(None, 1).action == "done"
    assert (next_poll("authorization_pending", 1).action, next_poll("slow_down", 1).interval_s) == (
        "continue",
        6.0,
    )
    assert next_poll("access_denied", 1).action == "fail"
    assert next_poll("expired_token", 1).action == "fail"


def test_default_store_paths(tmp_path: Path) -> None:
    home = tmp_path
    tail = Path("mcp-resource-subscriber", "tokens.db")
    assert default_store_path({"MCP_PROBE_TOKEN_STORE_PATH": "/x/t.db"}, "linux", home) == Path(
        "/x/t.db"
    )
    assert default_store_path({"XDG_STATE_HOME": "/s"}, "linux", home) == Path("/s") / tail
    assert default_store_path({}, "linux", home) == home / ".local" / "state" / tail
    assert default_store_path({}, "darwin", home) == home / "Library/Application Support" / tail
    assert default_store_path({"LOCALAPPDATA": "/l"}, "win32", home) == Path("/l") / tail
    assert default_store_path({}, "win32", home) == home / "AppData" / "Local" / tail


# ---- store ------------------------------------------------------------------------------


def test_store_is_created_only_by_create(tmp_path: Path) -> None:
    path = tmp_path / "d" / "tokens.db"
    assert TokenStore.open_existing(path) is None
    assert not path.parent.exists()
    with TokenStore.create(path) as store:
        store.save(
            "http://h", client_id="c", access_token="secret-at", refresh_token=None, expires_at=5
        )
        row = store.get("http://h")
        assert row is not None and row.access_token == "secret-at" and row.refresh_token is None
        assert "secret-at" not in repr(row)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    store2 = TokenStore.open_existing(path)
    assert store2 is not None
    with store2:
        assert store2.delete("http://h") and not store2.delete("http://h")


def test_lock_times_out_within_its_budget(tmp_path: Path) -> None:
    path = tmp_path / "tokens.db"
    TokenStore.create(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with TokenStore.create(path) as store:
            started = time.monotonic()
            with pytest.raises(LockTimeout), store.lock(200):
                pass
            assert time.monotonic() - started < 3.0  # the 200 ms budget, not sqlite's busy wait
            with pytest.raises(LockTimeout), store.lock(0):
                pass
            # busy_timeout is restored after the attempt.
            assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# ---- resolution without network ---------------------------------------------------------


def _store_with(path: Path, *, expires_at: int, refresh: str | None) -> None:
    with TokenStore.create(path) as store:
        store.save(
            "http://h:1",
            client_id="c",
            access_token="at",
            refresh_token=refresh,
            expires_at=expires_at,
        )


def test_resolution_without_network(tmp_path: Path) -> None:
    path = tmp_path / "tokens.db"
    url = "http://h:1/mcp"
    assert resolve_token_sync(url, 1, store_path=path) == (None, "none")
    assert not path.exists()
    _store_with(path, expires_at=now_ms() + 3_600_000, refresh=None)
    assert resolve_token_sync(url, 1, store_path=path) == ("at", "cache")
    assert resolve_token_sync("http://other/mcp", 1, store_path=path) == (None, "none")
    _store_with(path, expires_at=now_ms() - 1, refresh=None)
    with pytest.raises(AuthLoginRequired) as raised:
        resolve_token_sync(url, 1, store_path=path, program="prog")
    assert raised.value.error_code == "AUTH_LOGIN_REQUIRED"
    assert (
        raised.value.hint is not None and "prog --login --url http://h:1/mcp" in raised.value.hint
    )
    _store_with(path, expires_at=now_ms() - 1, refresh="rt")
    with pytest.raises(AuthTimeout):
        resolve_token_sync(url, 0, store_path=path)


# ---- oauth over a mock transport ---------------------------------------------------------


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


# The authorization server's answers below are routed by respx: each test names the URLs it
# expects, anything else fails the test (assert_all_mocked), and a route records its calls.


@respx.mock(assert_all_called=False)
def test_discovery_falls_back_to_the_fixed_layout(respx_mock: respx.MockRouter) -> None:
    respx_mock.route(host="gw").respond(404)

    async def go() -> oauth.Endpoints:
        async with httpx.AsyncClient() as client:
            return await oauth.discover(client, "http://gw:9/mcp/x")

    assert _run(go()) == oauth.Endpoints(
        "http://gw:9/register", "http://gw:9/device_authorization", "http://gw:9/token", None
    )


@respx.mock
def test_discovery_follows_prm_and_sends_resource(respx_mock: respx.MockRouter) -> None:
    respx_mock.get("http://rs/mcp").respond(
        401, headers={"WWW-Authenticate": 'Bearer resource_metadata="http://rs/prm"'}
    )
    respx_mock.get("http://rs/prm").respond(
        200, json={"resource": "http://rs/mcp", "authorization_servers": ["http://as"]}
    )
    respx_mock.get("http://as/.well-known/oauth-authorization-server").respond(
        200,
        json={
            "issuer": "http://as",
            "registration_endpoint": "http://as/reg",
            "device_authorization_endpoint": "http://as/dev",
            "token_endpoint": "http://as/tok",
        },
    )
    device = respx_mock.post("http://as/dev").respond(
        200, json={"device_code": "d", "user_code": "U", "verification_uri": "http://as/a"}
    )

    async def go() -> tuple[oauth.Endpoints, oauth.DeviceCode]:
        async with httpx.AsyncClient() as client:
            endpoints = await oauth.discover(client, "http://rs/mcp")
            return endpoints, await oauth.request_device_code(client, endpoints, "cid")

    endpoints, code = _run(go())
    assert endpoints == oauth.Endpoints(
        "http://as/reg", "http://as/dev", "http://as/tok", "http://rs/mcp"
    )
    assert (code.interval, code.expires_in, code.verification_uri_complete) == (5.0, 900.0, None)
    form = parse_qs(device.calls.last.request.content.decode())
    assert form == {"client_id": ["cid"], "resource": ["http://rs/mcp"]}


@respx.mock
def test_polling_sleeps_first_and_slows_down(respx_mock: respx.MockRouter) -> None:
    respx_mock.post("http://a/t").mock(
        side_effect=[
            httpx.Response(400, json={"error": "authorization_pending"}),
            httpx.Response(400, json={"error": "slow_down"}),
            httpx.Response(200, json={"access_token": "a", "expires_in": 10}),
        ]
    )
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def go() -> oauth.TokenSet:
        endpoints = oauth.Endpoints("http://a/r", "http://a/d", "http://a/t")
        code = oauth.DeviceCode("d", "U", "http://a/v", None, 900, 1)
        async with httpx.AsyncClient() as client:
            return await oauth.poll_for_token(client, endpoints, "c", code, sleep=sleep)

    tokens = _run(go())
    assert (tokens.access_token, tokens.refresh_token) == ("a", None)
    assert sleeps == [1, 1, 6]


@respx.mock  # no route: a request after the local expiry fails the test
def test_polling_gives_up_when_the_code_expires_locally() -> None:
    clock = iter([0.0, 10.0])

    async def sleep(seconds: float) -> None:
        return None

    async def go() -> None:
        endpoints = oauth.Endpoints("http://a/r", "http://a/d", "http://a/t")
        code = oauth.DeviceCode("d", "U", "http://a/v", None, 5, 0)
        async with httpx.AsyncClient() as client:
            await oauth.poll_for_token(
                client, endpoints, "c", code, sleep=sleep, clock=lambda: next(clock)
            )

    with pytest.raises(OAuthError) as raised:
        _run(go())
    assert raised.value.error == "expired_token"


def test_non_json_error_is_unknown_error() -> None:
    response = httpx.Response(503, text="upstream down")
    error = oauth.oauth_error(response)
    assert (error.error, error.status) == ("unknown_error", 503)


def test_a_refresh_error_that_echoes_the_refresh_token_does_not_carry_it() -> None:
    """An authorization server that echoes its request in ``error_description``: the
    refresh token must not reach the message the CLI prints and a link's state shows."""
    secret = "rt-SECRET-0123456789abcdef"

    def echo(request: httpx.Request) -> httpx.Response:
        form = parse_qs(request.content.decode())
        said = f"refresh_token {form['refresh_token'][0]} is revoked"
        return httpx.Response(400, json={"error": "invalid_grant", "error_description": said})

    async def go() -> None:
        endpoints = oauth.Endpoints("http://a/r", "http://a/d", "http://a/t")
        async with httpx.AsyncClient(transport=httpx.MockTransport(echo)) as client:
            await oauth.refresh(client, endpoints, secret, "c")

    with pytest.raises(OAuthError) as raised:
        _run(go())
    assert raised.value.error == "invalid_grant"
    assert secret not in str(raised.value) and secret not in (raised.value.description or "")
    assert str(raised.value) == "invalid_grant: refresh_token *** is revoked (HTTP 400)"
