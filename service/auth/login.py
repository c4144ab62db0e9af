"""The ``--login`` device flow: discover, register (once per origin), authorize, poll, save.

Output is the caller's business: :func:`login` reports the device code through
``on_code`` before it starts polling. Login is not bounded by ``--timeout-ms``; it waits
up to the device code's lifetime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from service.auth import oauth
from service.auth.errors import OAuthError
from service.auth.rules import CLIENT_REJECTED_ERRORS, expiry_ms, origin_of
from service.auth.store import TokenStore, now_ms
from service.tlstrust import client_context

HTTP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LoginResult:
    origin: str
    expires_at_ms: int
    client_id: str


async def login(
    url: str,
    *,
    program: str,
    on_code: Callable[[oauth.DeviceCode], None],
    store_path: Path | None = None,
    client: httpx.AsyncClient | None = None,
) -> LoginResult:
    origin = origin_of(url)
    owned = client is None
    http = client or httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, verify=client_context())
    try:
        cached_client: str | None = None
        existing = TokenStore.open_existing(store_path)
        if existing is not None:
            with existing:
                cached = existing.get(origin)
                cached_client = cached.client_id if cached is not None else None
        endpoints = await oauth.discover(http, url)
        client_id = cached_client or await oauth.register(http, endpoints, program)
        try:
            code = await oauth.request_device_code(http, endpoints, client_id)
        except OAuthError as exc:
            if cached_client is None or exc.error not in CLIENT_REJECTED_ERRORS:
                raise
            client_id = await oauth.register(http, endpoints, program)
            code = await oauth.request_device_code(http, endpoints, client_id)
        on_code(code)
        tokens = await oauth.poll_for_token(http, endpoints, client_id, code)
        expires_at = expiry_ms(now_ms(), tokens.expires_in)
        with TokenStore.create(store_path) as store:
            store.save(
                origin,
                client_id=client_id,
                access_token=tokens.access_token,
                refresh_token=tokens.refresh_token,
                expires_at=expires_at,
            )
        return LoginResult(origin, expires_at, client_id)
    finally:
        if owned:
            await http.aclose()


def forget(url: str, *, store_path: Path | None = None) -> bool:
    """Delete the cached row for ``url``'s origin; never creates the store."""
    origin = origin_of(url)
    store = TokenStore.open_existing(store_path)
    if store is None:
        return False
    with store:
        return store.delete(origin)
