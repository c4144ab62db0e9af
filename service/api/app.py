"""Build the REST API (FastAPI, ``/v1``) around a running supervisor.

``create_api`` only wires things: routes read the :class:`~service.api.state.ApiState`
from ``app.state.api``. It knows neither the MCP face nor the console: the daemon's
composition root (:mod:`service.daemon.webapp`) adds ``/mcp`` and ``/ui`` to this app and
wraps it all in the guard (:mod:`service.http.guard`). Serving it is :mod:`service.http.server`'s
job.
"""

from __future__ import annotations

from fastapi import FastAPI

from service._version import __version__
from service.api.error_handlers import install_handlers
from service.api.metrics import Metrics, SnapshotCollector
from service.api.openapi import document
from service.api.routes import (
    agent,
    console,
    content,
    events,
    history,
    overview,
    system,
    triggers,
    webhooks,
)
from service.api.routes import subscriptions as subscription_routes
from service.api.state import ApiState
from service.app.supervisor_protocol import SupervisorLike
from service.app.usecases import UseCases


def create_api(
    supervisor: SupervisorLike,
    cases: UseCases,
    *,
    keepalive_s: float = 15.0,
    max_wait_ms: int = 600_000,
    max_waiters: int = 256,
    read_timeout_s: float = 10.0,
) -> FastAPI:
    """The API app: every ``/v1`` route, its error handlers and its OpenAPI document."""
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
        lambda: {"trigger_run_duration_seconds": cases.triggers.runner.durations},
    )
    app.state.api = ApiState(
        supervisor=supervisor,
        metrics=Metrics(collector),
        subscriptions=cases.subscriptions,
        changes=cases.changes,
        webhooks=cases.webhooks,
        triggers=cases.triggers,
        status=cases.status,
        keepalive_s=keepalive_s,
        max_wait_ms=max_wait_ms,
        max_waiters=max_waiters,
        read_timeout_s=read_timeout_s,
    )
    install_handlers(app)
    routers = (
        *(subscription_routes, history, content, events, system, overview, webhooks, triggers),
        *(agent, console),
    )
    for module in routers:
        app.include_router(module.router)
    app.openapi = lambda: document(app)  # type: ignore[method-assign]
    return app
