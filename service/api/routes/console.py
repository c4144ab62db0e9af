"""The console's part of the REST API: the one-time login links ``mcpsubctl ui`` prints, the
loopback listener it asks for, and ending every session. The pages themselves (``/ui``) are
:mod:`service.console`'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from service.api.state import api_state
from service.app.errors import ApiError
from service.http.sessions import BrowserSessions

router = APIRouter()


class ConsoleNeedsToken(ApiError):
    error_code = "CONSOLE_NEEDS_TCP"


@router.post(
    "/v1/console/login-link",
    tags=["console"],
    status_code=201,
    responses={409: {"description": "CONSOLE_NEEDS_TCP: this listener takes no token"}},
)
async def login_link(request: Request) -> dict[str, Any]:
    """A one-time login link for the console on this listener (good once, for 120 s)."""
    sessions = request.scope.get("state", {}).get("sessions")
    if not isinstance(sessions, BrowserSessions):
        raise ConsoleNeedsToken("the console needs no login on this listener")
    ticket, ttl = sessions.new_ticket()
    return {"path": f"/ui/login?ticket={ticket}", "expiresInSeconds": ttl}


class NoConsoleListener(ApiError):
    error_code = "CONSOLE_LISTENER_UNAVAILABLE"


@router.post(
    "/v1/console/listener",
    tags=["console"],
    status_code=201,
    responses={409: {"description": "CONSOLE_LISTENER_UNAVAILABLE: nothing to open"}},
)
async def console_listener(request: Request) -> dict[str, Any]:
    """Open (once) a loopback TCP listener for the console and hand out a one-time login
    link on it: what ``mcpsubctl ui`` asks a daemon that serves only its unix socket. On a
    TCP listener, the link is for that listener."""
    listener = api_state(request).console_listener
    own = request.scope.get("state", {}).get("sessions")
    if listener is not None:
        url, sessions = await listener.open()
    elif isinstance(own, BrowserSessions):  # a TCP listener already: this one will do
        url, sessions = f"http://{request.headers.get('host', '127.0.0.1')}", own
    else:
        raise NoConsoleListener("this daemon has no console listener to open")
    ticket, ttl = sessions.new_ticket()
    return {"url": url, "path": f"/ui/login?ticket={ticket}", "expiresInSeconds": ttl}


@router.delete("/v1/console/sessions", tags=["console"])
async def revoke_sessions(request: Request) -> dict[str, Any]:
    """End every console session on this daemon (``mcpsubctl ui --revoke-all``): each cookie
    handed out so far is refused from now on, here and on the console listener."""
    revoked = 0
    own = request.scope.get("state", {}).get("sessions")
    if isinstance(own, BrowserSessions):
        revoked += own.revoke_all()
    listener = api_state(request).console_listener
    if listener is not None and listener.sessions is not None and listener.sessions is not own:
        revoked += listener.sessions.revoke_all()
    return {"revoked": revoked}
