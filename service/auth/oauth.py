"""The HTTP side of gateway authentication (RFC 9728, 8414, 7591, 8628, 6749 refresh).

Every function takes an ``httpx.AsyncClient`` so that callers decide timeouts and tests
can substitute transports. Transport failures become :class:`AuthServerUnreachable`
(cause kept, so the network classification still sees ECONNREFUSED and friends);
timeouts become :class:`AuthTimeout`; OAuth error answers become :class:`OAuthError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from service import jsondecode
from service.auth.errors import AuthServerUnreachable, AuthTimeout, OAuthError
from service.auth.rules import (
    DEFAULT_DEVICE_EXPIRES_S,
    DEFAULT_INTERVAL_S,
    DEVICE_GRANT,
    canonical_resource,
    next_poll,
    number_or,
    origin_of,
    parse_www_authenticate,
    well_known_urls,
)
from service.mcp.transports.viahttpx import read_body
from service.safetext import known_secrets, redact_known

FORM = {"Accept": "application/json"}


@dataclass(frozen=True)
class Endpoints:
    registration: str
    device_authorization: str
    token: str
    # The RFC 8707 resource indicator to send, when the server advertised PRM (RFC 9728).
    resource: str | None = None


@dataclass(frozen=True)
class DeviceCode:
    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float

    def __repr__(self) -> str:
        return f"DeviceCode(user_code={self.user_code!r}, expires_in={self.expires_in})"


@dataclass(frozen=True)
class TokenSet:
    access_token: str
    refresh_token: str | None
    expires_in: object

    def __repr__(self) -> str:
        return f"TokenSet(expires_in={self.expires_in!r})"


MAX_AUTH_BODY_BYTES = 1024 * 1024
"""Metadata documents and token answers are a few KB; more is refused, not buffered."""
_FRAMING = frozenset({"content-encoding", "content-length", "transfer-encoding"})


async def _send(
    client: httpx.AsyncClient, method: str, url: str, origin: str, **kwargs: Any
) -> httpx.Response:
    """One request; the body is decoded under :data:`MAX_AUTH_BODY_BYTES` (one coding layer
    at most): an authorization server named by an MCP server is as untrusted as the server,
    and httpx's own decoding would inflate a compression bomb whole."""
    try:
        async with client.stream(method, url, **kwargs) as streamed:
            body = await read_body(streamed, MAX_AUTH_BODY_BYTES)
    except httpx.TimeoutException as exc:
        raise AuthTimeout(f"authorization server at {origin} did not answer in time") from exc
    except httpx.HTTPError as exc:
        raise AuthServerUnreachable(origin) from exc
    headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() not in _FRAMING]
    return httpx.Response(
        streamed.status_code, headers=headers, content=body, request=streamed.request
    )


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = jsondecode.loads(response.content)
    except jsondecode.InvalidJson:
        return None
    return body if isinstance(body, dict) else None


def oauth_error(response: httpx.Response, secrets: tuple[str, ...] = ()) -> OAuthError:
    """The error an authorization server answered. ``secrets``: what the request carried (a
    refresh token, a device code), cut from its text: a server that echoes its request in
    ``error_description`` must not put the refresh token into what ``mcpsubctl login``
    prints, a link's state and hint, or what an agent reads."""
    body = _json_object(response) or {}
    error = body.get("error")
    description = body.get("error_description")
    return OAuthError(
        redact_known(error, secrets) if isinstance(error, str) and error else "unknown_error",
        redact_known(description, secrets) if isinstance(description, str) else None,
        response.status_code,
    )


def _string(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) and value else None


# ---- discovery -------------------------------------------------------------------------
async def _get_json(client: httpx.AsyncClient, url: str, origin: str) -> dict[str, Any] | None:
    response = await _send(client, "GET", url, origin, headers=FORM)
    if not response.is_success:
        return None
    return _json_object(response)


async def protected_resource_metadata(client: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """RFC 9728: the challenge's ``resource_metadata`` first, then the well-known URIs."""
    origin = origin_of(url)
    candidates: list[str] = []
    probe = await _send(client, "GET", url, origin, headers={"Accept": "application/json"})
    if probe.status_code == 401:
        params = parse_www_authenticate(probe.headers.get("www-authenticate"))
        if params and params.get("resource_metadata"):
            candidates.append(params["resource_metadata"])
    candidates += [
        u for u in well_known_urls(url, "oauth-protected-resource") if u not in candidates
    ]
    for candidate in candidates:
        try:
            document = await _get_json(client, candidate, origin_of(candidate))
        except ValueError:
            continue
        servers = document.get("authorization_servers") if document else None
        if isinstance(servers, list) and servers and isinstance(servers[0], str):
            return document
    return None


async def discover(client: httpx.AsyncClient, url: str) -> Endpoints:
    """PRM → ``authorization_servers[0]`` → RFC 8414 metadata → fixed-layout fallback."""
    origin = origin_of(url)
    issuer = origin
    resource: str | None = None
    prm = await protected_resource_metadata(client, url)
    if prm is not None:
        issuer = str(prm["authorization_servers"][0]).rstrip("/")
        advertised = prm.get("resource")
        resource = advertised if isinstance(advertised, str) else canonical_resource(url)
    as_origin = origin_of(issuer)
    metadata: dict[str, Any] | None = None
    for candidate in well_known_urls(issuer, "oauth-authorization-server"):
        metadata = await _get_json(client, candidate, as_origin)
        if metadata is not None:
            stated = metadata.get("issuer")
            if isinstance(stated, str) and stated.rstrip("/") != issuer:
                metadata = None  # RFC 8414 §3.3: a mismatching issuer is rejected
                continue
            break
    fields = ("registration_endpoint", "device_authorization_endpoint", "token_endpoint")
    if metadata is not None and all(_string(metadata, f) for f in fields):
        return Endpoints(
            str(metadata["registration_endpoint"]),
            str(metadata["device_authorization_endpoint"]),
            str(metadata["token_endpoint"]),
            resource,
        )
    return Endpoints(
        f"{as_origin}/register",
        f"{as_origin}/device_authorization",
        f"{as_origin}/token",
        resource,
    )


# ---- registration and device flow --------------------------------------------------------
async def register(client: httpx.AsyncClient, endpoints: Endpoints, program: str) -> str:
    """RFC 7591 dynamic client registration of a public device-flow client."""
    body = {"client_name": program, "grant_types": [DEVICE_GRANT, "refresh_token"]}
    response = await _send(
        client, "POST", endpoints.registration, origin_of(endpoints.registration), json=body
    )
    if not response.is_success:
        raise oauth_error(response)
    client_id = _string(_json_object(response) or {}, "client_id")
    if client_id is None:
        raise OAuthError("invalid_client_metadata", "registration returned no client_id")
    return client_id


async def request_device_code(
    client: httpx.AsyncClient, endpoints: Endpoints, client_id: str
) -> DeviceCode:
    """RFC 8628 §3.1-3.2."""
    form = {"client_id": client_id}
    if endpoints.resource:
        form["resource"] = endpoints.resource
    url = endpoints.device_authorization
    response = await _send(client, "POST", url, origin_of(url), data=form, headers=FORM)
    if not response.is_success:
        raise oauth_error(response)
    body = _json_object(response) or {}
    device_code, user_code = _string(body, "device_code"), _string(body, "user_code")
    complete = _string(body, "verification_uri_complete")
    uri = _string(body, "verification_uri") or complete
    if device_code is None or user_code is None or uri is None:
        raise OAuthError("invalid_response", "device authorization response is incomplete")
    return DeviceCode(
        device_code,
        user_code,
        uri,
        complete,
        number_or(body.get("expires_in"), DEFAULT_DEVICE_EXPIRES_S),
        number_or(body.get("interval"), DEFAULT_INTERVAL_S),
    )


def _token_set(response: httpx.Response) -> TokenSet:
    body = _json_object(response) or {}
    access = _string(body, "access_token")
    if access is None:
        raise OAuthError("invalid_response", "token response has no access_token")
    return TokenSet(access, _string(body, "refresh_token"), body.get("expires_in"))


async def _token_request(
    client: httpx.AsyncClient, endpoints: Endpoints, form: dict[str, str]
) -> TokenSet:
    if endpoints.resource:
        form = {**form, "resource": endpoints.resource}
    url = endpoints.token
    response = await _send(client, "POST", url, origin_of(url), data=form, headers=FORM)
    if not response.is_success:
        raise oauth_error(
            response, known_secrets(form.get("refresh_token"), form.get("device_code"))
        )
    return _token_set(response)


async def poll_for_token(
    client: httpx.AsyncClient,
    endpoints: Endpoints,
    client_id: str,
    code: DeviceCode,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> TokenSet:
    """RFC 8628 §3.4-3.5: sleep first; pending → again; slow_down → +5 s; else fail."""
    started = clock()
    interval = code.interval
    while True:
        await sleep(interval)
        if clock() > started + code.expires_in:
            raise OAuthError("expired_token", "the device code expired before approval")
        form = {"grant_type": DEVICE_GRANT, "device_code": code.device_code, "client_id": client_id}
        try:
            return await _token_request(client, endpoints, form)
        except OAuthError as exc:
            step = next_poll(exc.error, interval)
            if step.action == "fail":
                raise
            interval = step.interval_s


async def refresh(
    client: httpx.AsyncClient, endpoints: Endpoints, refresh_token: str, client_id: str | None
) -> TokenSet:
    """RFC 6749 §6 refresh grant (the server may rotate the refresh token)."""
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    if client_id:
        form["client_id"] = client_id
    return await _token_request(client, endpoints, form)
