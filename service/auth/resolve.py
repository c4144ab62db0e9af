"""Which bearer token a run uses (seed-behaviour §5.5).

``resolve_token`` never creates the store, never prints, and never contacts the network
unless the cached access token is (nearly) expired and a refresh token exists. Sources:
``none`` (no cache entry), ``cache`` (fresh cached token), ``cache-refreshed`` (refreshed
now, here or by a concurrent process while we waited for the lock). The caller handles an
explicit ``--auth-token`` (it always wins) and may report ``explicit`` itself.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from service.auth.errors import (
    DEFAULT_PROGRAM,
    AuthLoginRequired,
    AuthRefreshFailed,
    AuthTimeout,
    OAuthError,
)
from service.auth.rules import LOGIN_REQUIRED_ERRORS, expiry_ms, is_fresh, origin_of
from service.auth.store import TokenRow, TokenStore, now_ms

if TYPE_CHECKING:  # imported where a refresh needs them: a probe without one never pays
    import httpx

    from service.auth import oauth

Source = Literal["none", "explicit", "cache", "cache-refreshed"]


async def resolve_token(
    url: str,
    budget_s: float,
    *,
    store_path: Path | None = None,
    program: str = DEFAULT_PROGRAM,
) -> tuple[str | None, Source]:
    deadline = time.monotonic() + budget_s
    try:
        origin = origin_of(url)
    except ValueError:
        return None, "none"
    store = TokenStore.open_existing(store_path)
    if store is None:
        return None, "none"
    with store:
        row = store.get(origin)
        if row is None:
            return None, "none"
        if is_fresh(row.expires_at, now_ms()):
            return row.access_token, "cache"
        if not row.refresh_token:
            raise AuthLoginRequired(
                f"the cached token for {origin} expired and there is no refresh token",
                url=url,
                program=program,
            )
        remaining_ms = (deadline - time.monotonic()) * 1000
        with store.lock(remaining_ms):
            current = store.get(origin)
            if current is None:
                raise AuthLoginRequired(
                    f"the cached token for {origin} was removed", url=url, program=program
                )
            if is_fresh(current.expires_at, now_ms()):
                return current.access_token, "cache-refreshed"
            token = await _refresh_row(store, current, url, deadline, program)
            return token, "cache-refreshed"


async def _refresh_row(
    store: TokenStore, row: TokenRow, url: str, deadline: float, program: str
) -> str:
    if not row.refresh_token:
        raise AuthLoginRequired(
            f"the cached token for {row.origin} expired and there is no refresh token",
            url=url,
            program=program,
        )
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise AuthTimeout("no time left to refresh the cached token")
    import httpx

    from service.tlstrust import client_context

    try:
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(remaining), verify=client_context()
        ) as client:
            tokens = await asyncio.wait_for(
                _discover_and_refresh(client, url, row.refresh_token, row.client_id), remaining
            )
    except TimeoutError as exc:
        raise AuthTimeout(
            f"refreshing the cached token for {row.origin} exceeded the time budget"
        ) from exc
    except OAuthError as exc:
        if exc.error in LOGIN_REQUIRED_ERRORS:
            raise AuthLoginRequired(
                f"the authorization server rejected the cached refresh token ({exc.error})",
                url=url,
                program=program,
            ) from exc
        raise AuthRefreshFailed(
            f"refreshing the cached token failed: {exc}; the refresh token is kept, retry later"
        ) from exc
    store.save(
        row.origin,
        client_id=row.client_id,
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token or row.refresh_token,
        expires_at=expiry_ms(now_ms(), tokens.expires_in),
    )
    return tokens.access_token


async def _discover_and_refresh(
    client: httpx.AsyncClient, url: str, refresh_token: str, client_id: str | None
) -> oauth.TokenSet:
    from service.auth import oauth

    endpoints = await oauth.discover(client, url)
    return await oauth.refresh(client, endpoints, refresh_token, client_id)


def resolve_token_sync(
    url: str, budget_s: float, *, store_path: Path | None = None, program: str = DEFAULT_PROGRAM
) -> tuple[str | None, Source]:
    """:func:`resolve_token` for synchronous callers (the CLIs)."""
    return asyncio.run(resolve_token(url, budget_s, store_path=store_path, program=program))
