"""The daemon's one ASGI app, composed: the REST API (``/v1``, :mod:`service.api`), the MCP
face (``/mcp``, :mod:`service.face`) and the console (``/ui``, :mod:`service.console`) on
one app, over one supervisor and one agent policy (:class:`service.app.agents.Agents`),
with one pool of waiter slots, behind the Host/Origin/token guard (:mod:`service.http.guard`).

The three front ends never import each other; this is the one place that knows all three
(:class:`service.daemon.main.DaemonRun` calls it for the API socket and the console's
loopback listener; the API tests call it for the same app).
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import FastAPI
from starlette.routing import Route

from service.api import create_api
from service.app.agents import Agents
from service.app.supervisor import SupervisorLike
from service.console import routes as console_routes
from service.http.guard import DEFAULT_ALLOWED_HOSTS, LocalGuard
from service.http.sessions import BrowserSessions


def create_app(
    supervisor: SupervisorLike,
    *,
    token: str | None,
    allowed_hosts: Iterable[str] = DEFAULT_ALLOWED_HOSTS,
    keepalive_s: float = 15.0,
    max_wait_ms: int = 600_000,
    max_waiters: int = 256,
    read_timeout_s: float = 10.0,
    agent_allowed_origins: tuple[str, ...] | None = None,
    agent_progress_s: float = 5.0,
    agent_unsubscribe: str = "own",
) -> FastAPI:
    """The daemon's app. ``token`` is required on every request but ``/healthz`` when set
    (loopback TCP); pass None for the unix socket, whose file mode is the access control."""
    agents = Agents(supervisor, agent_allowed_origins, agent_unsubscribe)
    app = create_api(
        supervisor,
        agents,
        keepalive_s=keepalive_s,
        max_wait_ms=max_wait_ms,
        max_waiters=max_waiters,
        read_timeout_s=read_timeout_s,
    )
    app.include_router(console_routes.router)
    _mount_face(app, agents, agent_progress_s)
    # The console's sessions (login links included) for a token; None on the unix socket.
    app.state.sessions = BrowserSessions(token) if token is not None else None
    app.add_middleware(
        LocalGuard, token=token, allowed_hosts=allowed_hosts, sessions=app.state.sessions
    )
    return app


def _mount_face(app: FastAPI, agents: Agents, progress_s: float) -> None:
    """The agent face at ``/mcp``, counting against the API's waiter slots (one pool)."""
    from service.face.handlers import Face
    from service.face.http import FaceHttp
    from service.face.inproc import InProcessBackend

    face = Face(InProcessBackend(agents), progress_every_s=progress_s)
    app.state.face_http = FaceHttp(face, app.state.api)
    app.router.routes.append(
        Route(
            "/mcp", app.state.face_http, methods=["GET", "POST", "DELETE"], include_in_schema=False
        )
    )
