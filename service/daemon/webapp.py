"""The daemon's one ASGI app, composed: the REST API (``/v1``, :mod:`service.api`), the MCP
face (``/mcp``, :mod:`service.face`) and the console (``/ui``, :mod:`service.console`) on
one app, over one supervisor, one set of use cases (:class:`service.app.usecases.UseCases`,
with one agent policy) and one pool of waiter slots, behind the Host/Origin/token guard
(:mod:`service.http.guard`).

The three front ends never import each other; this is the one place that knows all three.
:class:`service.daemon.run.DaemonRun` builds the app once (:func:`build_app`, from one
:class:`AppSettings`) and serves it on each listener behind that listener's guard
(:func:`guarded`): the API socket without a token, the console's loopback listener with the
API token. So both answer with one agent policy, one ``Subscriptions`` and one pool of waiter
slots.
The API tests call :func:`create_app`, the same app with its guard as middleware.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp

from service.api import create_api
from service.app.policy import parse_setting, parse_unsubscribe_setting
from service.app.supervisor_protocol import SupervisorLike
from service.app.usecases import DaemonParts, UseCases
from service.console import routes as console_routes
from service.daemon.config import Settings
from service.http.guard import DEFAULT_ALLOWED_HOSTS, LocalGuard
from service.http.sessions import SESSION_IDLE_S, SESSION_MAX_AGE_S, BrowserSessions


@dataclass(frozen=True)
class AppSettings:
    """What the daemon's app is made of, one object for every listener that serves it."""

    allowed_hosts: Iterable[str] = DEFAULT_ALLOWED_HOSTS
    keepalive_s: float = 15.0
    max_wait_ms: int = 600_000
    max_waiters: int = 256
    read_timeout_s: float = 10.0
    agent_allowed_origins: tuple[str, ...] | None = None
    agent_progress_s: float = 5.0
    agent_unsubscribe: str = "own"
    session_idle_s: float = SESSION_IDLE_S
    """A console session's lifetimes (``console_session_idle_s``, ``…_max_age_s``)."""
    session_max_age_s: float = SESSION_MAX_AGE_S

    def sessions(self, token: str) -> BrowserSessions:
        """A listener's console sessions, for its ``token``."""
        return BrowserSessions(token, idle_s=self.session_idle_s, max_age_s=self.session_max_age_s)

    @classmethod
    def of(cls, settings: Settings) -> AppSettings:
        """From ``mcpsubd``'s settings (already checked when they were loaded)."""
        return cls(
            read_timeout_s=settings.api_header_timeout_s,
            agent_allowed_origins=parse_setting(settings.agent_allowed_origins),
            agent_progress_s=settings.agent_progress_s,
            agent_unsubscribe=parse_unsubscribe_setting(settings.agent_unsubscribe),
            session_idle_s=settings.console_session_idle_s,
            session_max_age_s=settings.console_session_max_age_s,
        )


def build_app(supervisor: SupervisorLike, parts: DaemonParts, settings: AppSettings) -> FastAPI:
    """The daemon's app, without its guard: built once, served by every listener."""
    cases = UseCases.build(
        supervisor,
        parts,
        agent_origins=settings.agent_allowed_origins,
        agent_unsubscribe=settings.agent_unsubscribe,
    )
    app = create_api(
        supervisor,
        cases,
        keepalive_s=settings.keepalive_s,
        max_wait_ms=settings.max_wait_ms,
        max_waiters=settings.max_waiters,
        read_timeout_s=settings.read_timeout_s,
    )
    app.include_router(console_routes.router)
    _mount_face(app, cases, settings.agent_progress_s)
    return app


def guarded(app: ASGIApp, settings: AppSettings, token: str | None) -> LocalGuard:
    """What one listener serves: ``app`` behind the guard. ``token`` is required on every
    request but ``/healthz`` when set (loopback TCP; the console's sessions are its own);
    None for the unix socket, whose file mode is the access control."""
    sessions = settings.sessions(token) if token is not None else None
    return LocalGuard(app, token=token, allowed_hosts=settings.allowed_hosts, sessions=sessions)


def create_app(
    supervisor: SupervisorLike, parts: DaemonParts, *, token: str | None, **settings: Any
) -> FastAPI:
    """The daemon's app with its guard as middleware, for one listener (the API tests);
    ``settings`` are :class:`AppSettings`' fields."""
    made = AppSettings(**settings)
    app = build_app(supervisor, parts, made)
    # The console's sessions (login links included) for a token; None on the unix socket.
    app.state.sessions = made.sessions(token) if token is not None else None
    app.add_middleware(
        LocalGuard, token=token, allowed_hosts=made.allowed_hosts, sessions=app.state.sessions
    )
    return app


def _mount_face(app: FastAPI, cases: UseCases, progress_s: float) -> None:
    """The agent face at ``/mcp``, counting against the API's waiter slots (one pool)."""
    from service.face.handlers import Face
    from service.face.http import FaceHttp
    from service.face.inproc import InProcessBackend

    face = Face(InProcessBackend(cases.subscriptions, cases.changes), progress_every_s=progress_s)
    app.state.face_http = FaceHttp(face, app.state.api)
    app.router.routes.append(
        Route(
            "/mcp", app.state.face_http, methods=["GET", "POST", "DELETE"], include_in_schema=False
        )
    )
