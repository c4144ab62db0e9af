"""An OAuth gateway in front of the lab's MCP endpoint (``MCP_TEST_AUTH=oauth``).

It plays the part of mcp-gateway for client tests, on the lab's own origin:

* RFC 9728 protected-resource metadata at ``/.well-known/oauth-protected-resource`` (root
  and path-inserted) and a ``WWW-Authenticate: Bearer resource_metadata="…"`` challenge on
  every MCP request without a valid token;
* RFC 8414 metadata, RFC 7591 registration, RFC 8628 device authorization with an
  ``/activate`` page where a person approves or denies a user code;
* ``/token``: device grant and refresh grant with rotation; presenting a consumed refresh
  token revokes its whole family (as mcp-gateway does).

Knobs (env): ``MCP_TEST_TOKEN_TTL_SECONDS`` (3600), ``MCP_TEST_DEVICE_INTERVAL_SECONDS``
(5), ``MCP_TEST_AUTO_APPROVE`` (false). With ``MCP_TEST_CONTROL=true`` the ``/lab/oauth/*``
routes steer it (see ``docs/auth.md``). Token values appear only in ``/lab/oauth/state``.
"""

from __future__ import annotations

import html
import secrets
import string
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from labserver.settings import parse_bool, parse_number

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
DEVICE_EXPIRES_S = 900
PRM_PATH = "/.well-known/oauth-protected-resource"


@dataclass
class DeviceGrant:
    device_code: str
    user_code: str
    client_id: str
    expires_at: float
    status: str = "pending"  # pending | approved | denied


@dataclass
class AccessToken:
    client_id: str
    family: str
    expires_at: float


@dataclass
class RefreshToken:
    client_id: str
    family: str
    consumed: bool = False


@dataclass
class OAuthGateway:
    token_ttl_s: float = 3600.0
    interval_s: float = 5.0
    auto_approve: bool = False
    clients: dict[str, str] = field(default_factory=dict)
    devices: dict[str, DeviceGrant] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    revoked_families: set[str] = field(default_factory=set)
    slow_down_remaining: int = 0
    token_unavailable: bool = False
    registrations: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    resources: dict[str, str | None] = field(default_factory=dict)  # RFC 8707, last seen

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OAuthGateway | None:
        if (env.get("MCP_TEST_AUTH") or "").strip().lower() != "oauth":
            return None
        return cls(
            token_ttl_s=parse_number(env.get("MCP_TEST_TOKEN_TTL_SECONDS"), 3600.0),
            interval_s=parse_number(env.get("MCP_TEST_DEVICE_INTERVAL_SECONDS"), 5.0),
            auto_approve=parse_bool(env.get("MCP_TEST_AUTO_APPROVE")),
        )

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    # ---- bearer check -----------------------------------------------------------------
    def token_valid(self, authorization: str | None) -> bool:
        if not authorization:
            return False
        scheme, _, presented = authorization.strip().partition(" ")
        token = self.access.get(presented.strip()) if scheme.lower() == "bearer" else None
        return (
            token is not None
            and token.expires_at > time.time()
            and token.family not in self.revoked_families
        )

    def challenge(self, request: Request) -> Response | None:
        """None if the request carries a valid access token, else the 401 answer."""
        values = request.headers.getlist("authorization")
        if len(values) == 1 and self.token_valid(values[0]):
            return None
        self._count("mcp.unauthorized")
        metadata = f"{_origin(request)}{PRM_PATH}{request.url.path}"
        params = f'resource_metadata="{metadata}"'
        if values:
            params = f'error="invalid_token", {params}'
        return JSONResponse(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Unauthorized: a valid token is required"},
            },
            status_code=401,
            headers={"WWW-Authenticate": f"Bearer {params}", "X-Accel-Buffering": "no"},
        )

    # ---- issuing ----------------------------------------------------------------------
    def _issue(self, client_id: str, family: str) -> dict[str, Any]:
        access, refresh = f"at-{uuid.uuid4()}", f"rt-{uuid.uuid4()}"
        self.access[access] = AccessToken(client_id, family, time.time() + self.token_ttl_s)
        self.refresh[refresh] = RefreshToken(client_id, family)
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": int(self.token_ttl_s),
            "refresh_token": refresh,
        }

    def new_device(self, client_id: str) -> DeviceGrant:
        letters = "".join(secrets.choice(string.ascii_uppercase) for _ in range(4))
        digits = "".join(secrets.choice(string.digits) for _ in range(4))
        grant = DeviceGrant(
            device_code=f"dc-{uuid.uuid4()}",
            user_code=f"{letters}-{digits}",
            client_id=client_id,
            expires_at=time.monotonic() + DEVICE_EXPIRES_S,
            status="approved" if self.auto_approve else "pending",
        )
        self.devices[grant.device_code] = grant
        return grant

    def find_user_code(self, user_code: str) -> DeviceGrant | None:
        wanted = user_code.strip().upper()
        for grant in self.devices.values():
            if grant.user_code == wanted:
                return grant
        return None

    def device_token(self, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        grant = self.devices.get(form.get("device_code", ""))
        if grant is None:
            return 400, {"error": "invalid_grant", "error_description": "unknown device_code"}
        if form.get("client_id") != grant.client_id:
            return 400, {"error": "invalid_grant", "error_description": "client mismatch"}
        if self.slow_down_remaining > 0:
            self.slow_down_remaining -= 1
            return 400, {"error": "slow_down"}
        if time.monotonic() > grant.expires_at:
            del self.devices[grant.device_code]
            return 400, {"error": "expired_token"}
        if grant.status == "denied":
            del self.devices[grant.device_code]
            return 400, {"error": "access_denied"}
        if grant.status != "approved":
            return 400, {"error": "authorization_pending"}
        del self.devices[grant.device_code]
        return 200, self._issue(grant.client_id, f"fam-{uuid.uuid4()}")

    def refresh_token(self, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        presented = self.refresh.get(form.get("refresh_token", ""))
        if presented is None or presented.family in self.revoked_families:
            return 400, {"error": "invalid_grant", "error_description": "unknown refresh token"}
        if presented.consumed:
            self.revoked_families.add(presented.family)
            self._count("family.revoked")
            return 400, {
                "error": "invalid_grant",
                "error_description": "refresh token reused; the token family is revoked",
            }
        client_id = form.get("client_id") or presented.client_id
        if client_id != presented.client_id:
            return 400, {"error": "invalid_grant", "error_description": "client mismatch"}
        presented.consumed = True
        return 200, self._issue(client_id, presented.family)

    def state(self) -> dict[str, Any]:
        return {
            "clients": sorted(self.clients),
            "registrations": self.registrations,
            "devices": [
                {"userCode": g.user_code, "clientId": g.client_id, "status": g.status}
                for g in self.devices.values()
            ],
            "accessTokens": sorted(self.access),
            "refreshTokens": sorted(self.refresh),
            "revokedFamilies": len(self.revoked_families),
            "slowDownRemaining": self.slow_down_remaining,
            "tokenUnavailable": self.token_unavailable,
            "tokenTtlSeconds": self.token_ttl_s,
            "counts": dict(self.counts),
            "resources": dict(self.resources),
        }


# ---- HTTP -------------------------------------------------------------------------------
def _origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


def _gateway(request: Request) -> OAuthGateway:
    gateway: OAuthGateway = request.app.state.oauth
    return gateway


async def _form(request: Request) -> dict[str, str]:
    raw = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}


def _oauth_error(status: int, error: str, description: str | None = None) -> JSONResponse:
    body = {"error": error}
    if description:
        body["error_description"] = description
    return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def protected_resource_route(route_suffix: str, mcp_path: str) -> Route:
    async def metadata(request: Request) -> Response:
        origin = _origin(request)
        return JSONResponse(
            {
                "resource": f"{origin}{mcp_path}",
                "authorization_servers": [origin],
                "bearer_methods_supported": ["header"],
            }
        )

    return Route(PRM_PATH + route_suffix, metadata, methods=["GET"])


async def as_metadata(request: Request) -> Response:
    origin = _origin(request)
    return JSONResponse(
        {
            "issuer": origin,
            "registration_endpoint": f"{origin}/register",
            "device_authorization_endpoint": f"{origin}/device_authorization",
            "token_endpoint": f"{origin}/token",
            "grant_types_supported": [DEVICE_GRANT, "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "response_types_supported": [],
        }
    )


async def register(request: Request) -> Response:
    gateway = _gateway(request)
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return _oauth_error(400, "invalid_client_metadata", "body must be a JSON object")
    gateway.registrations += 1
    client_id = f"client-{gateway.registrations}-{uuid.uuid4().hex[:8]}"
    name = body.get("client_name")
    gateway.clients[client_id] = name if isinstance(name, str) else ""
    return JSONResponse(
        {"client_id": client_id, "client_name": gateway.clients[client_id]}, status_code=201
    )


async def device_authorization(request: Request) -> Response:
    gateway = _gateway(request)
    form = await _form(request)
    client_id = form.get("client_id", "")
    if client_id not in gateway.clients:
        return _oauth_error(401, "invalid_client", "unknown client_id")
    grant = gateway.new_device(client_id)
    gateway._count("device_authorization")
    gateway.resources["device_authorization"] = form.get("resource")
    origin = _origin(request)
    return JSONResponse(
        {
            "device_code": grant.device_code,
            "user_code": grant.user_code,
            "verification_uri": f"{origin}/activate",
            "verification_uri_complete": f"{origin}/activate?user_code={quote(grant.user_code)}",
            "expires_in": DEVICE_EXPIRES_S,
            "interval": gateway.interval_s,
        }
    )


async def token(request: Request) -> Response:
    gateway = _gateway(request)
    form = await _form(request)
    grant_type = form.get("grant_type", "")
    gateway._count(f"token.{grant_type}")
    gateway.resources[f"token.{grant_type}"] = form.get("resource")
    if gateway.token_unavailable:
        return _oauth_error(503, "temporarily_unavailable", "token endpoint disabled by the lab")
    client_id = form.get("client_id")
    if grant_type == DEVICE_GRANT:
        if client_id not in gateway.clients:
            return _oauth_error(401, "invalid_client", "unknown client_id")
        status, body = gateway.device_token(form)
    elif grant_type == "refresh_token":
        if client_id is not None and client_id not in gateway.clients:
            return _oauth_error(401, "invalid_client", "unknown client_id")
        status, body = gateway.refresh_token(form)
    else:
        return _oauth_error(400, "unsupported_grant_type")
    return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Lab gateway: device login</title></head>
<body><h1>Device login</h1>{message}
<form method="post" action="/activate">
<label>User code <input name="user_code" value="{code}" autocomplete="off"></label>
<button name="action" value="approve">Approve</button>
<button name="action" value="deny">Deny</button>
</form></body></html>
"""


def _page(code: str, message: str = "", status: int = 200) -> HTMLResponse:
    text = f"<p>{html.escape(message)}</p>" if message else ""
    return HTMLResponse(_PAGE.format(message=text, code=html.escape(code)), status_code=status)


async def activate(request: Request) -> Response:
    gateway = _gateway(request)
    if request.method == "GET":
        return _page(request.query_params.get("user_code", ""))
    form = await _form(request)
    code, action = form.get("user_code", ""), form.get("action", "approve")
    grant = gateway.find_user_code(code)
    if grant is None or grant.status != "pending":
        return _page(code, "Unknown or already used code.", status=404)
    grant.status = "denied" if action == "deny" else "approved"
    return _page("", f"Code {grant.user_code} {grant.status}. You can close this page.")


def oauth_routes(mcp_paths: list[str], primary: str) -> list[Route]:
    """The gateway's public routes; the root PRM document describes ``primary``."""
    routes = [protected_resource_route("", primary)]
    routes += [protected_resource_route(path, path) for path in mcp_paths]
    routes += [
        Route("/.well-known/oauth-authorization-server", as_metadata, methods=["GET"]),
        Route("/register", register, methods=["POST"]),
        Route("/device_authorization", device_authorization, methods=["POST"]),
        Route("/token", token, methods=["POST"]),
        Route("/activate", activate, methods=["GET", "POST"]),
    ]
    return routes


# ---- /lab/oauth control --------------------------------------------------------------
async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _decide(status: str) -> Any:
    async def handler(request: Request) -> Response:
        grant = _gateway(request).find_user_code(str((await _body(request)).get("user_code", "")))
        if grant is None:
            return JSONResponse({"error": "unknown user_code"}, status_code=404)
        grant.status = status
        return JSONResponse({"userCode": grant.user_code, "status": status})

    return handler


async def slow_down(request: Request) -> Response:
    count = (await _body(request)).get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return JSONResponse({"error": "count must be an integer >= 0"}, status_code=400)
    _gateway(request).slow_down_remaining = count
    return JSONResponse({"slowDownRemaining": count})


async def expire_tokens(request: Request) -> Response:
    gateway = _gateway(request)
    for access in gateway.access.values():
        access.expires_at = 0.0
    return JSONResponse({"expired": len(gateway.access)})


async def revoke_all(request: Request) -> Response:
    gateway = _gateway(request)
    families = {t.family for t in gateway.access.values()} | {
        t.family for t in gateway.refresh.values()
    }
    gateway.revoked_families |= families
    return JSONResponse({"revokedFamilies": len(families)})


async def forget_clients(request: Request) -> Response:
    gateway = _gateway(request)
    count = len(gateway.clients)
    gateway.clients.clear()
    return JSONResponse({"forgotten": count})


async def token_unavailable(request: Request) -> Response:
    enabled = (await _body(request)).get("enabled", True)
    if not isinstance(enabled, bool):
        return JSONResponse({"error": "enabled must be a boolean"}, status_code=400)
    _gateway(request).token_unavailable = enabled
    return JSONResponse({"tokenUnavailable": enabled})


async def oauth_state(request: Request) -> Response:
    return JSONResponse(_gateway(request).state())


def oauth_control_routes() -> list[Route]:
    return [
        Route("/lab/oauth/approve", _decide("approved"), methods=["POST"]),
        Route("/lab/oauth/deny", _decide("denied"), methods=["POST"]),
        Route("/lab/oauth/slow-down", slow_down, methods=["POST"]),
        Route("/lab/oauth/expire-tokens", expire_tokens, methods=["POST"]),
        Route("/lab/oauth/revoke-all", revoke_all, methods=["POST"]),
        Route("/lab/oauth/forget-clients", forget_clients, methods=["POST"]),
        Route("/lab/oauth/token-unavailable", token_unavailable, methods=["POST"]),
        Route("/lab/oauth/state", oauth_state, methods=["GET"]),
    ]
