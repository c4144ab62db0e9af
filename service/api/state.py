"""What every route of the REST API needs: the supervisor, the metrics, the use cases and
the app's settings, on top of the request limits all front ends share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from service.api.metrics import Metrics
from service.app.changes import Changes
from service.app.status import Status
from service.app.subscriptions import Subscriptions
from service.app.supervisor_protocol import SupervisorLike
from service.app.triggers import Triggers
from service.app.webhooks import Webhooks
from service.http.limits import RequestLimits


@dataclass(kw_only=True)
class ApiState(RequestLimits):
    supervisor: SupervisorLike
    metrics: Metrics
    subscriptions: Subscriptions
    """What a person or an agent may do to the subscriptions; the face is handed the same one."""
    changes: Changes
    """What changed: content, wait, the event log and stream, the history (the face's too)."""
    webhooks: Webhooks
    triggers: Triggers
    status: Status
    max_wait_ms: int = 600_000
    """Upper bound of ``/v1/wait``'s ``timeout_ms``."""
    default_wait_ms: int = 60_000
    console_listener: Any = None
    """A :class:`service.http.listener.ConsoleListener` on a unix-socket daemon (the daemon
    sets it): ``POST /v1/console/listener`` opens a loopback TCP listener for a browser."""


def api_state(request: Request) -> ApiState:
    state = request.app.state.api
    assert isinstance(state, ApiState)
    return state
