"""Build the local API (FastAPI) around a running supervisor.

``create_app`` only wires things: routes read the :class:`~service.api.state.ApiState`
from ``app.state.api``; the guard in :mod:`service.api.security` wraps everything.
Serving it (unix socket 0600 or loopback TCP) is :mod:`service.api.server`'s job.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import FastAPI

from service._version import __version__
from service.api.errors import install_handlers
from service.api.metrics import Metrics, SnapshotCollector
from service.api.openapi import document
from service.api.routes import (
    agent,
    console,
    content,
    events,
    history,
    overview,
    subscriptions,
    system,
    webhooks,
)
from service.api.security import DEFAULT_ALLOWED_HOSTS, LocalGuard
from service.api.sessions import BrowserSessions
from service.api.state import ApiState, SupervisorLike


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
    """The API app. ``token`` is required on every request but ``/healthz`` when set
    (loopback TCP); pass None for the unix socket, whose file mode is the access control."""
    app = FastAPI(
        title="mcpsubd local API",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    collector = SnapshotCollector(
        supervisor.metrics_snapshot,
        lambda: supervisor.ready,
        lambda: supervisor.started_at,
    )
    app.state.api = ApiState(
        supervisor=supervisor,
        metrics=Metrics(collector),
        keepalive_s=keepalive_s,
        max_wait_ms=max_wait_ms,
        max_waiters=max_waiters,
        read_timeout_s=read_timeout_s,
    )
    install_handlers(app)
    routers = (subscriptions, history, content, events, system, overview, webhooks, agent, console)
    for module in routers:
        app.include_router(module.router)
    _mount_face(app, supervisor, agent_allowed_origins, agent_progress_s, agent_unsubscribe)
    # The console's sessions (login links included) for a token; None on the unix socket.
    app.state.sessions = BrowserSessions(token) if token is not None else None
    app.add_middleware(
        LocalGuard, token=token, allowed_hosts=allowed_hosts, sessions=app.state.sessions
    )
    app.openapi = lambda: document(app)  # type: ignore[method-assign]
    return app


def _mount_face(
    app: FastAPI,
    supervisor: SupervisorLike,
    allowed_origins: tuple[str, ...] | None,
    progress_s: float,
    unsubscribe: str = "own",
) -> None:
    """The agent face at ``/mcp`` (``service/face``), behind the same guard as the API."""
    from starlette.routing import Route

    from service.face.handlers import Face
    from service.face.http import FaceHttp
    from service.face.inproc import InProcessBackend

    backend = InProcessBackend(supervisor, allowed_origins, unsubscribe)
    app.state.face_backend = backend
    app.state.face_http = FaceHttp(Face(backend, progress_every_s=progress_s), app.state.api)
    app.router.routes.append(
        Route(
            "/mcp", app.state.face_http, methods=["GET", "POST", "DELETE"], include_in_schema=False
        )
    )
